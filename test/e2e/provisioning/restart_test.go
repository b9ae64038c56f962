/*
Copyright The provfleet Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package provisioning_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// dyingBackend makes the volume, then hangs until its controller is stopped and
// only then returns it: the process dies after the backend's Provision and
// before the PersistentVolume exists. created is closed once the volume exists.
func dyingBackend(root string) (*dirBackend, <-chan struct{}) {
	created := make(chan struct{})
	var once sync.Once
	return &dirBackend{
		root: root,
		afterCreate: func(ctx context.Context, _ provisioning.ProvisionOptions) {
			once.Do(func() { close(created) })
			<-ctx.Done()
		},
	}, created
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// The controller dies between the backend's Provision and the PV's creation,
// and the claim is deleted meanwhile: the next controller deletes the backend
// volume and lets the claim go.
func TestRestartAfterProvisionWithClaimDeletedLeaksNothing(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	first, created := dyingBackend(root)
	dying := f.start(f.config(), first)
	f.createClass(f.class, nil)
	claim := f.createClaim("orphan", f.class, nil)
	waitClosed(t, created, "the backend to create the volume")
	dying.stop(t)

	if _, err := f.admin.CoreV1().PersistentVolumes().Get(t.Context(), volumeName(claim), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("want no PV after the controller died before creating it, got %v", err)
	}
	if diff := cmp.Diff([]string{volumeName(claim)}, mustVolumes(t, first)); diff != "" {
		t.Fatalf("backend volumes after the crash (-want +got):\n%s", diff)
	}
	f.deleteClaim(claim.Name)

	second := &dirBackend{root: root}
	f.start(f.config(), second)
	f.waitClaimGone(claim.Name)
	f.eventually("the backend volume to be deleted", func(context.Context) (bool, error) {
		volumes, err := second.volumes()
		return len(volumes) == 0, err
	})
	if got := second.allAttempts(); len(got) != 0 {
		t.Errorf("the new controller provisioned for a deleted claim: %+v", got)
	}
	if _, err := f.admin.CoreV1().PersistentVolumes().Get(t.Context(), volumeName(claim), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("want no PV for the deleted claim, got %v", err)
	}
}

// The controller dies at the same point but the claim stays: the next
// controller finishes it with the one backend volume already made.
func TestRestartAfterProvisionFinishesTheClaim(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	first, created := dyingBackend(root)
	dying := f.start(f.config(), first)
	f.createClass(f.class, nil)
	claim := f.createClaim("survivor", f.class, nil)
	waitClosed(t, created, "the backend to create the volume")
	dying.stop(t)

	second := &dirBackend{root: root}
	f.start(f.config(), second)
	bound := f.waitBound(claim.Name)
	if diff := cmp.Diff(volumeName(claim), bound.Spec.VolumeName); diff != "" {
		t.Errorf("claim bound to the wrong volume (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{volumeName(claim)}, mustVolumes(t, second)); diff != "" {
		t.Errorf("backend volumes (-want +got):\n%s", diff)
	}
}
