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
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// The PersistentVolume of a claim is saved (by an earlier attempt, say of
// another replica) while the controller provisions the claim and before its
// informer shows it: the controller's own save meets the saved volume and
// takes it as the claim's. A backend volume of another source is left alone:
// a backend that is no Reclaimer cannot tell a second volume from the saved
// one described otherwise, and Delete is never handed a volume whose name a
// PersistentVolume uses.
func TestVolumeSavedMeanwhileIsTheClaims(t *testing.T) {
	tests := map[string]struct {
		// earlierDir is the backend volume of the saved PersistentVolume, as a
		// directory under the backend's root; empty: the one the backend makes
		// for the claim.
		earlierDir  string
		wantVolumes func(pvName string) []string
		wantDeleted func(pvName string) []string
	}{
		"same backend volume": {
			wantVolumes: func(pvName string) []string { return []string{pvName} },
			wantDeleted: func(string) []string { return nil },
		},
		"another backend volume": {
			earlierDir:  "earlier",
			wantVolumes: func(pvName string) []string { return []string{"earlier", pvName} },
			wantDeleted: func(string) []string { return nil },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			class := f.createClass(f.class, nil)
			claim := f.createClaim("saved-meanwhile", f.class, nil)
			pvName := volumeName(claim)

			created, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			backend := &dirBackend{
				root: t.TempDir(),
				afterCreate: func(ctx context.Context, _ provisioning.ProvisionOptions) {
					once.Do(func() { close(created) })
					select {
					case <-release:
					case <-ctx.Done():
					}
				},
			}
			hidden := informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermNotEqualSelector("metadata.name", pvName).String()
			})
			f.start(f.config(), backend, hidden)
			waitCreated(t, created)

			dir := filepath.Join(backend.root, pvName)
			if tc.earlierDir != "" {
				dir = filepath.Join(backend.root, tc.earlierDir)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			saved := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{
					Name:        pvName,
					Labels:      map[string]string{"e2e.provfleet.io/saved": "earlier"},
					Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": f.provisioner},
				},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
					AccessModes:                   claim.Spec.AccessModes,
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					StorageClassName:              class.Name,
					ClaimRef: &corev1.ObjectReference{
						Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID,
					},
					PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
				},
			}
			if _, err := f.admin.CoreV1().PersistentVolumes().Create(t.Context(), saved, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = f.admin.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
			})
			close(release)

			f.eventually("a ProvisioningSucceeded Event", func(context.Context) (bool, error) {
				return len(ours(f.events(claim, provisioning.EventProvisioningSucceeded))) > 0, nil
			})
			bound := f.waitBound(claim.Name)
			if diff := cmp.Diff(pvName, bound.Spec.VolumeName); diff != "" {
				t.Errorf("claim bound to the wrong volume (-want +got):\n%s", diff)
			}
			if got := f.volume(pvName).Labels["e2e.provfleet.io/saved"]; got != "earlier" {
				t.Errorf("the saved PersistentVolume was replaced: label %q", got)
			}
			f.eventually("the claim's intent finalizer to go", func(ctx context.Context) (bool, error) {
				c, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(ctx, claim.Name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				for _, fin := range c.Finalizers {
					if fin == provisioning.IntentFinalizer(f.provisioner) {
						return false, nil
					}
				}
				return true, nil
			})
			if diff := cmp.Diff(tc.wantVolumes(pvName), mustVolumes(t, backend)); diff != "" {
				t.Errorf("backend volumes (-want +got):\n%s", diff)
			}
			// A claim queued twice as its controller starts is provisioned
			// twice, each time with the same outcome.
			deleted := slices.Compact(backend.deletedVolumes())
			if diff := cmp.Diff(tc.wantDeleted(pvName), deleted); diff != "" {
				t.Errorf("deleted backend volumes (-want +got):\n%s", diff)
			}
		})
	}
}
