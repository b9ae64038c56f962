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

package hostpathnodes

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// TestNodeExpander: a volume grows within its node's storage budget, which
// the node's other volumes and the claims placed there take, and not the
// volumes of other nodes.
func TestNodeExpander(t *testing.T) {
	now := time.Now()
	onNodeB := volumeOnNodeA("pv-b", "b", "5Gi", now)
	onNodeB.Annotations[backend.AnnNode] = "b"
	tests := map[string]struct {
		storage string
		size    string
		wantErr bool
	}{
		"no budget":                     {size: "1Ei"},
		"fits beside the node's others": {storage: "10Gi", size: "7Gi"},
		"past the node's budget":        {storage: "10Gi", size: "8Gi", wantErr: true},
		"an absurd size":                {storage: "10Gi", size: "1Ei", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := &v1alpha1.HostPathBackend{Path: "/var/lib/fake"}
			if tc.storage != "" {
				q := resource.MustParse(tc.storage)
				spec.Capacity = &v1alpha1.CapacitySpec{Storage: &q}
			}
			c, _ := fakeCoordinator(t, kubefake.NewClientset(), spec)
			grown := volumeOnNodeA("pv-grown", "grown", "1Gi", now)
			other := volumeOnNodeA("pv-other", "other", "2Gi", now)
			for _, pv := range []*corev1.PersistentVolume{grown, other, onNodeB} {
				pv.Annotations[provisioning.AnnDynamicallyProvisioned] = "provfleet.io/fake"
				if err := c.informers.Volumes.GetStore().Add(pv); err != nil {
					t.Fatal(err)
				}
			}
			placed := claimOnNodeA("placed", "")
			placed.Annotations[provisioning.AnnStorageProvisioner] = "provfleet.io/fake"
			placed.CreationTimestamp = metav1.NewTime(now)
			if err := c.informers.Claims.GetStore().Add(placed); err != nil {
				t.Fatal(err)
			}
			size := resource.MustParse(tc.size)
			got, err := nodeExpander{c: c}.Expand(t.Context(), grown, nil, size)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Expand: %v, want an error: %v", err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, provisioning.ErrNoRoom) {
					t.Errorf("Expand: %v, want a refusal for want of room", err)
				}
				return
			}
			if diff := cmp.Diff(size.String(), got.String()); diff != "" {
				t.Errorf("capacity (-want +got):\n%s", diff)
			}
		})
	}
}
