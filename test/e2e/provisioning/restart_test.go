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
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
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

// waitCreated waits until the backend created the volume, which closes created.
func waitCreated(t *testing.T, created <-chan struct{}) {
	t.Helper()
	select {
	case <-created:
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for the backend to create the volume")
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
	waitCreated(t, created)
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
	waitCreated(t, created)
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

// The controller dies between the backend's Provision and the PV's creation,
// and the claim is then bound to a PersistentVolume made by hand: the next
// controller deletes the backend volume made for the claim before it lets the
// claim go.
func TestRestartAfterProvisionWithClaimBoundElsewhereLeaksNothing(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	first, created := dyingBackend(root)
	dying := f.start(f.config(), first)
	f.createClass(f.class, nil)
	claim := f.createClaim("elsewhere", f.class, nil)
	waitCreated(t, created)
	dying.stop(t)
	if diff := cmp.Diff([]string{volumeName(claim)}, mustVolumes(t, first)); diff != "" {
		t.Fatalf("backend volumes after the crash (-want +got):\n%s", diff)
	}

	byHand := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand-" + f.namespace},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              f.class,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(t.TempDir(), "by-hand")},
			},
		},
	}
	if _, err := f.admin.CoreV1().PersistentVolumes().Create(t.Context(), byHand, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.admin.CoreV1().PersistentVolumes().Delete(context.Background(), byHand.Name, metav1.DeleteOptions{})
	})
	if bound := f.waitBound(claim.Name); bound.Spec.VolumeName != byHand.Name {
		t.Fatalf("claim bound to %q, want %q", bound.Spec.VolumeName, byHand.Name)
	}

	second := &dirBackend{root: root}
	f.start(f.config(), second)
	intent := provisioning.IntentFinalizer(f.provisioner)
	f.eventually("the claim to lose its intent finalizer", func(ctx context.Context) (bool, error) {
		live, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return !slices.Contains(live.Finalizers, intent), nil
	})
	if got := mustVolumes(t, second); len(got) != 0 {
		t.Errorf("backend volumes left after the claim was bound elsewhere: %v", got)
	}
	if diff := cmp.Diff([]string{volumeName(claim)}, second.deletedVolumes()); diff != "" {
		t.Errorf("backend deletions (-want +got):\n%s", diff)
	}
	if got := second.allAttempts(); len(got) != 0 {
		t.Errorf("the new controller provisioned for a bound claim: %+v", got)
	}
}
