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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// deletesFailFor is a backend whose Delete fails for one volume.
type deletesFailFor struct {
	*fakeBackend
	name string
}

func (b deletesFailFor) Delete(ctx context.Context, volume *v1.PersistentVolume) error {
	if volume.Name == b.name {
		return errBackend
	}
	return b.fakeBackend.Delete(ctx, volume)
}

// The provision and delete series have the names, labels and buckets of
// sig-storage-lib-external-provisioner's controller/metrics package, which
// dashboards and alerts match, plus the provisioner label.
func TestMetricNamesMatchUpstream(t *testing.T) {
	good, bad := newClaim("good", "fast", testProvisioner), newClaim("bad", "fast", testProvisioner)
	released := func(name string) *v1.PersistentVolume {
		return newVolume(name, testProvisioner, v1.VolumeReleased, v1.PersistentVolumeReclaimDelete)
	}
	objects := []runtime.Object{good, bad, newClass("fast", testProvisioner), released("pv-good"), released("pv-bad")}
	f := newFixture(t, objects...)
	f.fill(objects...)
	backend := newFakeBackend()
	backend.provision = func(_ context.Context, _ int, options ProvisionOptions) (ProvisioningState, error) {
		if options.PVC.Name == bad.Name {
			return ProvisioningFinished, errBackend
		}
		return ProvisioningFinished, nil
	}
	c := f.newController(testConfig(testProvisioner), deletesFailFor{backend, "pv-bad"}, &testRecorder{})
	tm := newTestTerm(t, c)
	for _, claim := range []*v1.PersistentVolumeClaim{good, bad} {
		_, _ = c.syncClaim(context.Background(), tm, keyOfClaim(claim))
	}
	for _, name := range []string{"pv-good", "pv-bad"} {
		_, _ = c.syncVolume(context.Background(), name)
	}

	type family struct {
		Labels  []string
		Buckets []float64
	}
	families, err := f.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]family{}
	for _, mf := range families {
		if !strings.Contains(mf.GetName(), "persistentvolume") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var fam family
			for _, l := range m.GetLabel() {
				fam.Labels = append(fam.Labels, l.GetName())
			}
			slices.Sort(fam.Labels)
			for _, b := range m.GetHistogram().GetBucket() {
				fam.Buckets = append(fam.Buckets, b.GetUpperBound())
			}
			got[mf.GetName()] = fam
		}
	}
	byClassAndSource := []string{"class", "provisioner", "source"}
	byClass := []string{"class", "provisioner"}
	want := map[string]family{
		"controller_persistentvolumeclaim_provision_total":            {Labels: byClassAndSource},
		"controller_persistentvolumeclaim_provision_failed_total":     {Labels: byClassAndSource},
		"controller_persistentvolumeclaim_provision_duration_seconds": {Labels: byClassAndSource, Buckets: prometheus.DefBuckets},
		"controller_persistentvolume_delete_total":                    {Labels: byClass},
		"controller_persistentvolume_delete_failed_total":             {Labels: byClass},
		"controller_persistentvolume_delete_duration_seconds":         {Labels: byClass, Buckets: prometheus.DefBuckets},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("provision and delete metrics (-want +got):\n%s", diff)
	}
}
