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
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/internal/cachetrim"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// touchingBackend is a reschedulingBackend that, with touch, labels the
// claim behind the controller's back on its first call: the claim the
// controller then changes is stale. Each later call checks that the first
// call's sync finished its write: the claim has no selected node any more.
type touchingBackend struct {
	*reschedulingBackend
	admin kubernetes.Interface
	touch bool

	mu       sync.Mutex
	provided int
	// unfinished counts the later calls that found the selected node set.
	unfinished int
}

func (b *touchingBackend) Provision(ctx context.Context, options provisioning.ProvisionOptions) (*corev1.PersistentVolume, provisioning.ProvisioningState, error) {
	b.mu.Lock()
	first := b.provided == 0
	b.provided++
	b.mu.Unlock()
	claims := b.admin.CoreV1().PersistentVolumeClaims(options.PVC.Namespace)
	switch {
	case first && b.touch:
		patch := []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)
		if _, err := claims.Patch(ctx, options.PVC.Name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			return nil, provisioning.ProvisioningFinished, fmt.Errorf("cannot label the claim: %w", err)
		}
	case !first:
		current, err := claims.Get(ctx, options.PVC.Name, metav1.GetOptions{})
		if err != nil {
			return nil, provisioning.ProvisioningFinished, fmt.Errorf("cannot read the claim: %w", err)
		}
		if _, selected := current.Annotations["volume.kubernetes.io/selected-node"]; selected {
			b.mu.Lock()
			b.unfinished++
			b.mu.Unlock()
		}
	}
	return b.reschedulingBackend.Provision(ctx, options)
}

func (b *touchingBackend) unfinishedCalls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.unfinished
}

// A controller whose informers drop the last-applied annotation and managed
// fields sends a rescheduled claim, which carries its intent finalizer
// already, back to the scheduler without erasing them. A write built on a
// claim changed meanwhile is retried within the same sync: the selected node
// is gone before the backend is called again, and the other writer's label
// stays.
func TestTrimmedCacheKeepsWhatItDropped(t *testing.T) {
	for name, tc := range map[string]struct {
		touch  bool
		labels map[string]string
	}{
		"claim as cached":         {touch: false},
		"claim changed meanwhile": {touch: true, labels: map[string]string{"touched": "yes"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			full := "full-" + f.namespace
			backend := &touchingBackend{
				reschedulingBackend: &reschedulingBackend{dirBackend: &dirBackend{root: t.TempDir()}, full: full},
				admin:               f.admin,
				touch:               tc.touch,
			}
			f.start(f.config(), backend, informers.WithTransform(cachetrim.Transform))
			f.createNode(full)
			f.createClass(f.class, func(c *storagev1.StorageClass) {
				c.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
			})
			applied := fmt.Sprintf(`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"annotations":{"note":%q}}}`, strings.Repeat("x", 64<<10))
			claim := f.createClaim("applied", f.class, func(c *corev1.PersistentVolumeClaim) {
				c.Annotations = map[string]string{lastApplied: applied}
				// As an earlier attempt leaves it: the controller then
				// writes the claim it cached, not one a write returned.
				c.Finalizers = []string{provisioning.IntentFinalizer(f.provisioner)}
			})
			f.selectNode(claim.Name, full)

			current := f.waitUnselected(claim.Name)
			// A conflict that was not retried would leave the node set
			// until the claim's next sync calls the backend again.
			if n := backend.unfinishedCalls(); n > 0 {
				t.Errorf("%d Provision calls found the first call's change unwritten", n)
			}
			if calls := backend.calls(); len(calls) == 0 || calls[0] != full {
				t.Errorf("Provision calls on nodes %v, want the first on %s", calls, full)
			}
			if current.Annotations[lastApplied] != applied {
				t.Errorf("the last-applied annotation changed: %d bytes, want %d", len(current.Annotations[lastApplied]), len(applied))
			}
			if diff := cmp.Diff(tc.labels, current.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if missing := missingManagers(claim.ManagedFields, current.ManagedFields); len(missing) > 0 {
				t.Errorf("managed fields of %v are gone", missing)
			}
		})
	}
}

// waitUnselected waits until the claim has no selected node and returns it.
func (f *fixture) waitUnselected(name string) *corev1.PersistentVolumeClaim {
	f.t.Helper()
	var current *corev1.PersistentVolumeClaim
	f.eventually("the selected node removed", func(ctx context.Context) (bool, error) {
		var err error
		current, err = f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, selected := current.Annotations["volume.kubernetes.io/selected-node"]
		return !selected, nil
	})
	return current
}

// missingManagers lists the managers of before that after lacks.
func missingManagers(before, after []metav1.ManagedFieldsEntry) []string {
	var missing []string
	for _, b := range before {
		found := false
		for _, a := range after {
			if a.Manager == b.Manager && a.Operation == b.Operation {
				found = true
			}
		}
		if !found {
			missing = append(missing, b.Manager)
		}
	}
	return missing
}
