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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

func TestServiceOf(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	live := coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent-a"), LeaseDurationSeconds: ptr.To[int32](40),
		RenewTime: &metav1.MicroTime{Time: now.Add(-10 * time.Second)}}
	leaseName := "agents/" + NodeLeaseName("n1")
	unserved := func(reason, message string) *v1alpha1.UnservedNode {
		return &v1alpha1.UnservedNode{Node: "n1", Reason: reason, Message: message}
	}
	tests := map[string]struct {
		// spec and report make the Lease of n1; no Lease when spec is nil.
		spec   *coordinationv1.LeaseSpec
		report *string
		want   nodeService
		// seenAgo is how long ago the manager saw the Lease's renewal;
		// 10 s unless set.
		seenAgo time.Duration
		// live: an agent holds the Lease, whatever it reports.
		live bool
	}{
		"no Lease": {
			want: nodeService{state: agentNoLease,
				unserved: unserved(v1alpha1.ReasonNoNodeAgent, "no node agent has run on the node: there is no Lease "+leaseName)},
		},
		"expired": {
			spec: &live, seenAgo: 41 * time.Second, report: ptr.To(`{"pc":{"generation":1,"reason":"Running"}}`),
			want: nodeService{state: agentExpired, unserved: unserved(v1alpha1.ReasonNoNodeAgent, "no node agent renews Lease "+leaseName)},
		},
		"released": {
			spec: &coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: live.RenewTime},
			want: nodeService{state: agentExpired, unserved: unserved(v1alpha1.ReasonNoNodeAgent, "no node agent renews Lease "+leaseName)},
		},
		"report unreadable": {
			spec: &live, report: ptr.To(`{"pc":`),
			want: nodeService{state: agentUnreadable, unserved: unserved(v1alpha1.ReasonNoNodeAgent,
				"cannot read annotation provfleet.io/provisioners of Lease "+leaseName+": unexpected end of JSON input")},
			live: true,
		},
		"no report yet": {
			spec: &live,
			want: nodeService{state: agentPending, unserved: unserved(v1alpha1.ReasonNodeAgentPending,
				"the node agent agent-a has not reported on this ProvisionerConfig yet")},
			live: true,
		},
		"no entry for the ProvisionerConfig": {
			spec: &live, report: ptr.To(`{"other":{"generation":1,"reason":"Running"}}`),
			want: nodeService{state: agentPending, unserved: unserved(v1alpha1.ReasonNodeAgentPending,
				"the node agent agent-a has not reported on this ProvisionerConfig yet")},
			live: true,
		},
		"not serving": {
			spec: &live, report: ptr.To(`{"pc":{"generation":2,"reason":"BackendUnavailable","message":"disk gone"}}`),
			want: nodeService{state: agentNotServing,
				report:   provisionerReport{Generation: 2, Reason: v1alpha1.ReasonBackendUnavailable, Message: "disk gone"},
				unserved: unserved(v1alpha1.ReasonBackendUnavailable, "disk gone")},
			live: true,
		},
		"running": {
			spec: &live, report: ptr.To(`{"pc":{"generation":2,"reason":"Running","available":5,"total":9}}`),
			want: nodeService{state: agentServing,
				report: provisionerReport{Generation: 2, Reason: v1alpha1.ReasonRunning, Available: ptr.To[int64](5), Total: ptr.To[int64](9)}},
			live: true,
		},
		"paused": {
			spec: &live, report: ptr.To(`{"pc":{"generation":3,"reason":"Paused"}}`),
			want: nodeService{state: agentServing, report: provisionerReport{Generation: 3, Reason: v1alpha1.ReasonPaused}},
			live: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			store := cache.NewStore(cache.MetaNamespaceKeyFunc)
			clock := newLeaseClock()
			// Another node's live Lease is never read for n1.
			other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: NodeLeaseName("n2"),
				Annotations: map[string]string{AnnNodeReport: `{"pc":{"generation":1,"reason":"Running"}}`}}, Spec: live}
			if err := store.Add(other); err != nil {
				t.Fatal(err)
			}
			if tt.spec != nil {
				lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: NodeLeaseName("n1")}, Spec: *tt.spec}
				if tt.report != nil {
					lease.Annotations = map[string]string{AnnNodeReport: *tt.report}
				}
				if err := store.Add(lease); err != nil {
					t.Fatal(err)
				}
				seenAgo := 10 * time.Second
				if tt.seenAgo != 0 {
					seenAgo = tt.seenAgo
				}
				clock.expiry(lease, now.Add(-seenAgo))
			}
			got := serviceOf(store, clock, "agents", "n1", "pc", now)
			want := tt.want
			if tt.live {
				// Renewal seen 10 s ago, for 40 s.
				want.expiry = now.Add(30 * time.Second)
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(nodeService{})); diff != "" {
				t.Errorf("service (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.live, got.agentLive()); diff != "" {
				t.Errorf("agentLive (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServiceOfWithTheAgentsClockBehind follows an agent whose clock is 45 s
// behind the manager's, renewing a 40 s Lease every 10 s and then stopping:
// it counts as live while it renews and until 40 s after the manager saw its
// last renewal, whatever renewTime says.
func TestServiceOfWithTheAgentsClockBehind(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const skew = -45 * time.Second
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	clock := newLeaseClock()
	renew := func(at time.Time) {
		t.Helper()
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: NodeLeaseName("n1"),
				Annotations: map[string]string{AnnNodeReport: `{"pc":{"generation":1,"reason":"Running"}}`}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent-a"), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: at.Add(skew)}},
		}
		if err := store.Update(lease); err != nil {
			t.Fatal(err)
		}
	}
	type look struct {
		at         time.Duration
		wantState  agentState
		wantExpiry time.Duration
	}
	var got, want []look
	observe := func(at time.Duration, wantState agentState, wantExpiry time.Duration) {
		s := serviceOf(store, clock, "agents", "n1", "pc", start.Add(at))
		var expiry time.Duration
		if !s.expiry.IsZero() {
			expiry = s.expiry.Sub(start)
		}
		got = append(got, look{at, s.state, expiry})
		want = append(want, look{at, wantState, wantExpiry})
	}
	for at := time.Duration(0); at <= 30*time.Second; at += 10 * time.Second {
		renew(start.Add(at))
		observe(at, agentServing, at+40*time.Second)
		observe(at+5*time.Second, agentServing, at+40*time.Second)
	}
	// The last renewal, seen at 30 s, lasts until 70 s.
	observe(69*time.Second, agentServing, 70*time.Second)
	observe(70*time.Second, agentExpired, 0)
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(look{})); diff != "" {
		t.Errorf("service over time (-want +got):\n%s", diff)
	}
}
