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

package provisioning

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// Reschedule writes at the resource version of the claim it is given; after
// a conflict it writes again only while the claim still names the node it
// was sent back from.
func TestReschedule(t *testing.T) {
	for name, tc := range map[string]struct {
		// stored changes the claim as the API has it, after the caller read it.
		stored    func(*corev1.PersistentVolumeClaim)
		wantErr   error
		wantAnns  map[string]string
		wantLabel string
	}{
		"claim as read": {
			wantAnns: map[string]string{AnnReschedules: "1"},
		},
		"claim labelled meanwhile": {
			stored:    func(c *corev1.PersistentVolumeClaim) { c.Labels = map[string]string{"touched": "yes"} },
			wantAnns:  map[string]string{AnnReschedules: "1"},
			wantLabel: "yes",
		},
		"scheduler chose another node meanwhile": {
			stored:   func(c *corev1.PersistentVolumeClaim) { c.Annotations[AnnSelectedNode] = "node-2" },
			wantErr:  ErrSelectionChanged,
			wantAnns: map[string]string{AnnSelectedNode: "node-2"},
		},
		"sent back meanwhile": {
			stored: func(c *corev1.PersistentVolumeClaim) {
				delete(c.Annotations, AnnSelectedNode)
				c.Annotations[AnnReschedules] = "1"
			},
			wantErr:  ErrSelectionChanged,
			wantAnns: map[string]string{AnnReschedules: "1"},
		},
		"sent back as often as it may be": {
			stored:   func(c *corev1.PersistentVolumeClaim) { c.Annotations[AnnReschedules] = "3" },
			wantErr:  ErrRescheduleLimit,
			wantAnns: map[string]string{AnnSelectedNode: "node-1", AnnReschedules: "3"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			read := newClaim("c", "fast", testProvisioner)
			read.Annotations = map[string]string{AnnSelectedNode: "node-1"}
			stored := read.DeepCopy()
			if tc.stored != nil {
				tc.stored(stored)
			}
			f := newFixture(t, stored)
			if tc.stored != nil {
				// The claim read is stale: its first write meets a conflict.
				conflicts := 1
				f.client.PrependReactor("patch", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
					if conflicts > 0 {
						conflicts--
						return true, nil, apierrors.NewConflict(corev1.Resource("persistentvolumeclaims"), "c", errors.New("stale"))
					}
					return false, nil, nil
				})
			}
			_, err := Reschedule(context.Background(), f.client, read)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("Reschedule() error = %v, want %v", err, tc.wantErr)
			}
			got := f.getClaim("c")
			if diff := cmp.Diff(tc.wantAnns, got.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if label := got.Labels["touched"]; label != tc.wantLabel {
				t.Errorf("label touched = %q, want %q", label, tc.wantLabel)
			}
		})
	}
}
