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
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// sourceBackend fills volumes from the data source kinds it lists.
type sourceBackend struct {
	*fakeBackend
	kinds []schema.GroupKind
}

func (b sourceBackend) SupportsDataSource(_ context.Context, kind schema.GroupKind) bool {
	return slices.Contains(b.kinds, kind)
}

// A claim that asks for its volume to be filled from a data source is
// provisioned only by a backend that supports that kind; other backends
// refuse it for good, with an Event, rather than make an empty volume. A
// volume populator's kind is left to the populator.
func TestProvisionDataSource(t *testing.T) {
	snapshots := "snapshot.storage.k8s.io"
	other := "other"
	populators := "populators.example.com"
	withSource := func(kind string, group *string) *corev1.PersistentVolumeClaim {
		c := newClaim("c", "fast", testProvisioner)
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: group, Kind: kind, Name: "claim"}
		return c
	}
	withSourceRef := func(kind string, group, namespace *string) *corev1.PersistentVolumeClaim {
		c := newClaim("c", "fast", testProvisioner)
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: group, Kind: kind, Name: "claim", Namespace: namespace}
		return c
	}
	clones := []schema.GroupKind{{Kind: "PersistentVolumeClaim"}}
	type want struct {
		Err    bool
		Calls  int
		Events []string
		Volume bool
		Intent bool
		// Source is the data source the backend was given.
		Source string
		// Provisioned is what the metrics counted as provisioned.
		Provisioned float64
	}
	provisioned := want{Calls: 1, Events: []string{EventProvisioning, EventProvisioningSucceeded}, Volume: true, Provisioned: 1}
	provisionedFrom := func(source string) want {
		w := provisioned
		w.Source = source
		return w
	}
	refused := want{Events: []string{EventProvisioningFailed}}
	tests := map[string]struct {
		claim *corev1.PersistentVolumeClaim
		kinds []schema.GroupKind
		want  want
	}{
		"no data source":                       {claim: newClaim("c", "fast", testProvisioner), want: provisioned},
		"claim, unsupported":                   {claim: withSource("PersistentVolumeClaim", nil), want: refused},
		"snapshot, unsupported":                {claim: withSource("VolumeSnapshot", &snapshots), want: refused},
		"claim by reference, unsupported":      {claim: withSourceRef("PersistentVolumeClaim", nil, nil), want: refused},
		"snapshot by reference, unsupported":   {claim: withSourceRef("VolumeSnapshot", &snapshots, nil), want: refused},
		"claim of another namespace":           {claim: withSourceRef("PersistentVolumeClaim", nil, &other), want: refused},
		"snapshot of another group":            {claim: withSource("VolumeSnapshot", &other), kinds: []schema.GroupKind{{Group: snapshots, Kind: "VolumeSnapshot"}}, want: refused},
		"claim, clones supported":              {claim: withSource("PersistentVolumeClaim", nil), kinds: clones, want: provisionedFrom("PersistentVolumeClaim default/claim")},
		"claim by reference, clones supported": {claim: withSourceRef("PersistentVolumeClaim", nil, nil), kinds: clones, want: provisionedFrom("PersistentVolumeClaim default/claim")},
		"snapshot, clones supported":           {claim: withSource("VolumeSnapshot", &snapshots), kinds: clones, want: refused},
		"populator kind":                       {claim: withSourceRef("Sample", &populators, nil), want: want{Events: []string{EventProvisioning}}},
		"populator kind, supported":            {claim: withSourceRef("Sample", &populators, nil), kinds: []schema.GroupKind{{Group: populators, Kind: "Sample"}}, want: provisionedFrom("Sample.populators.example.com default/claim")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			origin, originVolume, _ := boundClaim("1Gi", "1Gi", "1Gi", "fast")
			objects := []runtime.Object{tc.claim, newClass("fast", testProvisioner), origin, originVolume}
			f := newFixture(t, objects...)
			f.fill(objects...)
			backend := newFakeBackend()
			recorder := &testRecorder{}
			c := f.newController(testConfig(testProvisioner), sourceBackend{backend, tc.kinds}, recorder)
			_, err := c.syncClaim(context.Background(), newTestTerm(t, c), keyOfClaim(tc.claim))
			calls, _, _ := backend.snapshot()
			got := want{
				Err:    err != nil,
				Calls:  calls,
				Events: recorder.events(),
				Volume: f.volumeExists("pvc-uid-c"),
				Intent: hasFinalizer(f.getClaim("c"), c.finalizer),
			}
			var kind string
			if source := dataSourceOf(tc.claim); source != nil {
				kind = source.Kind
			}
			got.Provisioned = testutil.ToFloat64(f.metrics.provisionTotal.WithLabelValues(testProvisioner, "fast", kind))
			if calls > 0 && backend.options[0].DataSource != nil {
				got.Source = describeSource(backend.options[0].DataSource)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("after sync (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}
