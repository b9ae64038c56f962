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
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// reschedulingBackend sends every claim back to the scheduler that is to be
// provisioned on node full, and records the node of every call.
type reschedulingBackend struct {
	*dirBackend
	full string

	mu    sync.Mutex
	nodes []string
}

func (b *reschedulingBackend) Provision(ctx context.Context, options provisioning.ProvisionOptions) (*corev1.PersistentVolume, provisioning.ProvisioningState, error) {
	node := "<none>"
	if options.SelectedNode != nil {
		node = options.SelectedNode.Name
	}
	b.mu.Lock()
	b.nodes = append(b.nodes, node)
	b.mu.Unlock()
	if node == b.full {
		return nil, provisioning.ProvisioningReschedule, errors.New("no room left on " + node)
	}
	return b.dirBackend.Provision(ctx, options)
}

func (b *reschedulingBackend) calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.nodes...)
}

// selectNode plays the scheduler: it sets the claim's selected node.
func (f *fixture) selectNode(claim, node string) {
	f.t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":%q}}}`, node)
	if _, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Patch(f.t.Context(), claim, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) createNode(name string) {
	f.t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	if _, err := f.admin.CoreV1().Nodes().Create(f.t.Context(), node, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		_ = f.admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// A WaitForFirstConsumer claim that the backend sent back to the scheduler is
// provisioned again only once the scheduler chose a node: the retry of the
// rescheduled attempt provisions nothing without one.
func TestRescheduledClaimWaitsForTheScheduler(t *testing.T) {
	f := newFixture(t)
	full, roomy := "full-"+f.namespace, "roomy-"+f.namespace
	backend := &reschedulingBackend{dirBackend: &dirBackend{root: t.TempDir()}, full: full}
	cfg := f.config()
	cfg.Retry.InitialDelay = 100 * time.Millisecond
	cfg.Retry.MaxDelay = 400 * time.Millisecond
	f.start(cfg, backend)
	f.createNode(full)
	f.createNode(roomy)
	f.createClass(f.class, func(c *storagev1.StorageClass) {
		c.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	})
	claim := f.createClaim("local", f.class, nil)
	f.selectNode(claim.Name, full)

	f.eventually("the selected node removed", func(ctx context.Context) (bool, error) {
		current, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, selected := current.Annotations["volume.kubernetes.io/selected-node"]
		return !selected && len(backend.calls()) > 0, nil
	})
	// Ten times the longest backoff: a retry without a node would show up.
	time.Sleep(10 * cfg.Retry.MaxDelay)
	if diff := cmp.Diff([]string{full}, backend.calls()); diff != "" {
		t.Fatalf("selected node of each Provision call (-want +got):\n%s", diff)
	}
	if _, err := f.admin.CoreV1().PersistentVolumes().Get(t.Context(), volumeName(claim), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("want no PV before the scheduler chose again, got %v", err)
	}

	f.selectNode(claim.Name, roomy)
	f.waitBound(claim.Name)
	if diff := cmp.Diff([]string{full, roomy}, backend.calls()); diff != "" {
		t.Errorf("selected node of each Provision call (-want +got):\n%s", diff)
	}
}

// A claim that clones another claim is refused by a backend that cannot fill a
// volume from one: it stays Pending with a Warning Event that says why, and
// no empty volume is made for it.
func TestCloneClaimRefused(t *testing.T) {
	f := newFixture(t)
	backend := &dirBackend{root: t.TempDir()}
	f.start(f.config(), backend)
	f.createClass(f.class, nil)
	origin := f.createClaim("origin", f.class, nil)
	f.waitBound(origin.Name)
	clone := f.createClaim("clone", f.class, func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: origin.Name}
	})

	var warnings []corev1.Event
	f.eventually("a ProvisioningFailed Event", func(context.Context) (bool, error) {
		warnings = ours(f.events(clone, provisioning.EventProvisioningFailed))
		return len(warnings) > 0, nil
	})
	if diff := cmp.Diff(corev1.EventTypeWarning, warnings[0].Type); diff != "" {
		t.Errorf("Event type (-want +got):\n%s", diff)
	}
	if msg := warnings[0].Message; !strings.Contains(msg, "PersistentVolumeClaim") || !strings.Contains(msg, origin.Name) {
		t.Errorf("Event message does not name the data source: %q", msg)
	}
	if got := backend.attemptsFor(volumeName(clone)); len(got) != 0 {
		t.Errorf("backend was asked to provision a clone: %+v", got)
	}
	if _, err := f.admin.CoreV1().PersistentVolumes().Get(t.Context(), volumeName(clone), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("want no PV for a refused clone, got %v", err)
	}
	current, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(t.Context(), clone.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(corev1.ClaimPending, current.Status.Phase); diff != "" {
		t.Errorf("claim phase (-want +got):\n%s", diff)
	}
}
