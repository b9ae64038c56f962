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

package dirvol

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// TestExpand: a volume grows when the other volumes leave it room in the
// storage budget, and is counted at its new size before its
// PersistentVolume shows it.
func TestExpand(t *testing.T) {
	tests := map[string]struct {
		capacity backend.Capacity
		size     string
		wantErr  string
		// wantUsed is the budget's use afterwards, the listed volumes
		// still at their old size.
		wantUsed int64
	}{
		"no budget": {size: "1Ei"},
		"fits exactly": {
			capacity: backend.Capacity{Storage: resource.MustParse("10Gi")}, size: "6Gi", wantUsed: 10 << 30,
		},
		"over the budget": {
			capacity: backend.Capacity{Storage: resource.MustParse("10Gi")}, size: "7Gi",
			wantErr: "capacity budget exhausted: the other volumes use 4Gi of 10Gi, the volume would grow to 7Gi", wantUsed: 5 << 30,
		},
		"an absurd size": {
			capacity: backend.Capacity{Storage: resource.MustParse("10Gi")}, size: "1Ei",
			wantErr: "the volume would grow to 1Ei", wantUsed: 5 << 30,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Capacity = tc.capacity })
			grown := volume("pvc-a", "a", "1Gi", testProvisioner)
			f.pvs = []*corev1.PersistentVolume{grown, volume("pvc-b", "b", "4Gi", testProvisioner)}
			err := f.store.Expand(grown, resource.MustParse(tc.size))
			checkErr(t, err, tc.wantErr)
			if tc.wantErr != "" && !errors.Is(err, provisioning.ErrNoRoom) {
				t.Errorf("Expand: %v, want a refusal for want of room", err)
			}
			budget, err := f.store.Budget()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantUsed, budget.UsedBytes); diff != "" {
				t.Errorf("used bytes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExpandCountsForLaterClaims: a new claim sees the room an expansion
// took, before and after the PersistentVolume shows the new size, and a
// lower size after a refusal replaces the higher one.
func TestExpandCountsForLaterClaims(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Capacity = backend.Capacity{Storage: resource.MustParse("10Gi")} })
	ctx := t.Context()
	grown := volume("pvc-a", "a", "2Gi", testProvisioner)
	f.pvs = []*corev1.PersistentVolume{grown}
	if err := f.store.Expand(grown, resource.MustParse("8Gi")); err != nil {
		t.Fatal(err)
	}
	checkErr(t, func() error { _, err := f.store.Create(ctx, request(t, "team", "b", "3Gi", "")); return err }(), "8Gi of 10Gi in use")
	// The PersistentVolume shows its new size.
	raised := grown.DeepCopy()
	raised.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("8Gi")
	f.pvs = []*corev1.PersistentVolume{raised}
	checkErr(t, func() error { _, err := f.store.Create(ctx, request(t, "team", "b", "3Gi", "")); return err }(), "8Gi of 10Gi in use")
	if err := f.store.Expand(raised, resource.MustParse("9Gi")); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Expand(raised, resource.MustParse("8Gi")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Create(ctx, request(t, "team", "b", "2Gi", "")); err != nil {
		t.Fatalf("the lower size did not replace the higher one: %v", err)
	}
}
