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
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

func statusObject(generation int64, status v1alpha1.ProvisionerConfigStatus) *v1alpha1.ProvisionerConfig {
	pc := &v1alpha1.ProvisionerConfig{ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: generation}, Status: status}
	pc.Spec.Backend.HostPath = &v1alpha1.HostPathBackend{Path: "/data"}
	return pc
}

// reportedGeneration is the generation of the object TestDesiredStatus
// reports on.
const reportedGeneration = 3

func condition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, ObservedGeneration: reportedGeneration}
}

func TestDesiredStatus(t *testing.T) {
	tests := map[string]struct {
		obs  observation
		want v1alpha1.ProvisionerConfigStatus
	}{
		"leading": {
			obs: observation{reason: v1alpha1.ReasonRunning, leader: "me"},
			want: v1alpha1.ProvisionerConfigStatus{ObservedGeneration: reportedGeneration, Leader: "me", Backend: "hostPath", Conditions: []metav1.Condition{
				condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning),
				condition(v1alpha1.ConditionLeading, metav1.ConditionTrue, reasonLeaseHeld),
			}},
		},
		"standby without a leader": {
			obs: observation{reason: v1alpha1.ReasonStandby},
			want: v1alpha1.ProvisionerConfigStatus{ObservedGeneration: reportedGeneration, Backend: "hostPath", Conditions: []metav1.Condition{
				condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonStandby),
				condition(v1alpha1.ConditionLeading, metav1.ConditionFalse, reasonNoLeader),
			}},
		},
		"standby while the Lease is handed over": {
			obs: observation{reason: v1alpha1.ReasonStandby, running: true},
			want: v1alpha1.ProvisionerConfigStatus{ObservedGeneration: reportedGeneration, Backend: "hostPath", Conditions: []metav1.Condition{
				condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonStandby),
				condition(v1alpha1.ConditionLeading, metav1.ConditionFalse, reasonHandOver),
			}},
		},
		"paused": {
			obs: observation{reason: v1alpha1.ReasonPaused, leader: "other"},
			want: v1alpha1.ProvisionerConfigStatus{ObservedGeneration: reportedGeneration, Leader: "other", Backend: "hostPath", Conditions: []metav1.Condition{
				condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonPaused),
				condition(v1alpha1.ConditionLeading, metav1.ConditionTrue, reasonLeaseHeld),
			}},
		},
		"backend unavailable while leading": {
			obs: observation{reason: v1alpha1.ReasonBackendUnavailable, leader: "me", running: true},
			want: v1alpha1.ProvisionerConfigStatus{ObservedGeneration: reportedGeneration, Leader: "me", Backend: "hostPath", Conditions: []metav1.Condition{
				condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonBackendUnavailable),
				condition(v1alpha1.ConditionLeading, metav1.ConditionTrue, reasonLeaseHeld),
			}},
		},
		"backend not started": {
			obs: observation{reason: v1alpha1.ReasonBackendUnavailable},
			want: v1alpha1.ProvisionerConfigStatus{ObservedGeneration: reportedGeneration, Backend: "hostPath", Conditions: []metav1.Condition{
				condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonBackendUnavailable),
				condition(v1alpha1.ConditionLeading, metav1.ConditionFalse, reasonNotRunning),
			}},
		},
		"refused": {
			obs: observation{reason: v1alpha1.ReasonProvisionerNameConflict},
			want: v1alpha1.ProvisionerConfigStatus{ObservedGeneration: reportedGeneration, Backend: "hostPath", Conditions: []metav1.Condition{
				condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProvisionerNameConflict),
				condition(v1alpha1.ConditionLeading, metav1.ConditionFalse, reasonNotRunning),
			}},
		},
		"without leader election": {
			obs: observation{reason: v1alpha1.ReasonRunning, leader: "me", leaderElectionDisabled: true},
			want: v1alpha1.ProvisionerConfigStatus{ObservedGeneration: reportedGeneration, Leader: "me", Backend: "hostPath", Conditions: []metav1.Condition{
				condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning),
				condition(v1alpha1.ConditionLeading, metav1.ConditionTrue, reasonLeaderElectionDisabled),
			}},
		},
	}
	ignore := cmpopts.IgnoreFields(metav1.Condition{}, "Message", "LastTransitionTime")
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := desiredStatus(statusObject(reportedGeneration, v1alpha1.ProvisionerConfigStatus{}), tc.obs)
			if diff := cmp.Diff(tc.want, got, ignore); diff != "" {
				t.Errorf("desiredStatus() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDesiredStatusKeepsTransitionTimes(t *testing.T) {
	first := desiredStatus(statusObject(1, v1alpha1.ProvisionerConfigStatus{}), observation{reason: v1alpha1.ReasonRunning, leader: "me"})
	then := metav1.Unix(1000, 0)
	for i := range first.Conditions {
		first.Conditions[i].LastTransitionTime = then
	}
	second := desiredStatus(statusObject(2, first), observation{reason: v1alpha1.ReasonRunning, leader: "me"})
	for _, c := range second.Conditions {
		if !c.LastTransitionTime.Equal(&then) {
			t.Errorf("condition %s moved its transition time to %v although its status did not change", c.Type, c.LastTransitionTime)
		}
		if c.ObservedGeneration != 2 {
			t.Errorf("condition %s observedGeneration = %d, want 2", c.Type, c.ObservedGeneration)
		}
	}
}

func TestNeedsWrite(t *testing.T) {
	running := func(generation int64, leader string) v1alpha1.ProvisionerConfigStatus {
		return desiredStatus(statusObject(generation, v1alpha1.ProvisionerConfigStatus{}), observation{reason: v1alpha1.ReasonRunning, leader: leader})
	}
	tests := map[string]struct {
		current v1alpha1.ProvisionerConfigStatus
		obs     observation
		want    bool
	}{
		"nothing changed": {
			current: running(2, "me"),
			obs:     observation{reason: v1alpha1.ReasonRunning, leader: "me"},
			want:    false,
		},
		"a new generation": {
			current: running(1, "me"),
			obs:     observation{reason: v1alpha1.ReasonRunning, leader: "me"},
			want:    true,
		},
		"a standby leaves the leader's report alone": {
			current: running(2, "other"),
			obs:     observation{reason: v1alpha1.ReasonStandby, leader: "other"},
			want:    false,
		},
		"a standby leaves the leader's unavailable backend alone": {
			current: desiredStatus(statusObject(2, v1alpha1.ProvisionerConfigStatus{}), observation{reason: v1alpha1.ReasonBackendUnavailable, leader: "other", running: true}),
			obs:     observation{reason: v1alpha1.ReasonStandby, leader: "other", running: true},
			want:    false,
		},
		"a standby reports a generation the leader did not report yet": {
			current: running(1, "other"),
			obs:     observation{reason: v1alpha1.ReasonStandby, leader: "other"},
			want:    true,
		},
		"a standby reports a new leader": {
			current: running(2, "gone"),
			obs:     observation{reason: v1alpha1.ReasonStandby, leader: "other"},
			want:    true,
		},
		"a standby reports that nobody leads": {
			current: running(2, "gone"),
			obs:     observation{reason: v1alpha1.ReasonStandby},
			want:    true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pc := statusObject(2, tc.current)
			want := desiredStatus(pc, tc.obs)
			if got := needsWrite(pc, want, tc.obs); got != tc.want {
				t.Errorf("needsWrite() = %v, want %v", got, tc.want)
			}
		})
	}
}
