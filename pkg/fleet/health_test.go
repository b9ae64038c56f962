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

package fleet

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// healthReport is what a test reads of the status about the backend's
// health.
type healthReport struct {
	Ready, Leading string // status/reason: message
	Storage        *v1alpha1.StorageStatus
}

func (f *fixture) healthReport(name string) healthReport {
	pc := f.get(name)
	describe := func(typ string) string {
		c := meta.FindStatusCondition(pc.Status.Conditions, typ)
		if c == nil {
			return ""
		}
		return string(c.Status) + "/" + c.Reason + ": " + c.Message
	}
	return healthReport{Ready: describe(v1alpha1.ConditionReady), Leading: describe(v1alpha1.ConditionLeading), Storage: pc.Status.Storage}
}

// events returns the type and reason of every Event about name.
func (f *fixture) events(name string) []string {
	events, err := f.kube.CoreV1().Events("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatalf("cannot list events: %v", err)
	}
	var got []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name {
			got = append(got, e.Type+" "+e.Reason)
		}
	}
	return got
}

// storageOf10Gi is the status.storage of a backend of 10Gi.
func storageOf10Gi(available string) *v1alpha1.StorageStatus {
	return &v1alpha1.StorageStatus{Available: resource.MustParse(available), Total: resource.MustParse("10Gi")}
}

// A leading instance whose backend fails its probes turns Ready=False
// BackendUnavailable with the backend's error and a Warning Event, keeps
// running and leading, and turns Running again with a Normal Event once its
// backend answers; status.storage follows its last successful probe.
func TestManagerReportsAnUnavailableBackend(t *testing.T) {
	f := newFixture(t)
	f.create(managed())
	f.eventually("a is Running", func() bool { return f.readyReason("a", 1) == v1alpha1.ReasonRunning })
	inst := f.started("x.io/a")[0]
	const gi = 1 << 30
	space := &provisioning.Space{AvailableBytes: 6 * gi, TotalBytes: 10 * gi}
	leading := "True/" + reasonLeaseHeld + ": the Lease is held by replica-1"
	steps := []struct {
		name   string
		health provisioning.Health
		want   healthReport
	}{
		{
			name:   "first probe",
			health: provisioning.Health{Space: space},
			want:   healthReport{Ready: "True/Running: provisioning as replica-1", Leading: leading, Storage: storageOf10Gi("6Gi")},
		},
		{
			name:   "outage",
			health: provisioning.Health{Err: errors.New("server not responding"), Space: space},
			want:   healthReport{Ready: "False/BackendUnavailable: server not responding", Leading: leading, Storage: storageOf10Gi("6Gi")},
		},
		{
			name:   "back, with less space",
			health: provisioning.Health{Space: &provisioning.Space{AvailableBytes: 4 * gi, TotalBytes: 10 * gi}},
			want:   healthReport{Ready: "True/Running: provisioning as replica-1", Leading: leading, Storage: storageOf10Gi("4Gi")},
		},
	}
	for _, step := range steps {
		inst.setHealth(step.health)
		var got healthReport
		f.eventually(step.name+" reported", func() bool { got = f.healthReport("a"); return cmp.Equal(step.want, got) })
	}
	want := []string{corev1.EventTypeWarning + " " + v1alpha1.ReasonBackendUnavailable, corev1.EventTypeNormal + " " + eventBackendAvailable}
	// Events are written in the background.
	f.eventually("a Warning and a Normal Event", func() bool { return cmp.Equal(want, f.events("a")) })
	if n := len(f.started("x.io/a")); n != 1 {
		t.Errorf("%d instances started, want 1: an unavailable backend needs no restart", n)
	}
}

func TestDesiredStorage(t *testing.T) {
	const gi = 1 << 30
	space := func(available, total int64) *provisioning.Space {
		return &provisioning.Space{AvailableBytes: available, TotalBytes: total}
	}
	tests := map[string]struct {
		current *v1alpha1.StorageStatus
		obs     observation
		want    *v1alpha1.StorageStatus
	}{
		"first probe": {
			obs:  observation{running: true, storage: space(6*gi, 10*gi)},
			want: storageOf10Gi("6Gi"),
		},
		"moved less than a hundredth: kept": {
			current: storageOf10Gi("6Gi"),
			obs:     observation{running: true, storage: space(6*gi-gi/200, 10*gi)},
			want:    storageOf10Gi("6Gi"),
		},
		"moved a hundredth: rewritten": {
			current: storageOf10Gi("6Gi"),
			obs:     observation{running: true, storage: space(6*gi-gi/8, 10*gi)},
			want:    storageOf10Gi("6016Mi"),
		},
		"nothing probed, as a standby: kept": {
			current: storageOf10Gi("6Gi"),
			obs:     observation{running: true},
			want:    storageOf10Gi("6Gi"),
		},
		"no instance runs: cleared": {
			current: storageOf10Gi("6Gi"),
			obs:     observation{reason: v1alpha1.ReasonInvalidSpec},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, desiredStorage(tc.current, tc.obs)); diff != "" {
				t.Errorf("desiredStorage() (-want +got):\n%s", diff)
			}
		})
	}
}
