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
	expired := *live.DeepCopy()
	expired.RenewTime = &metav1.MicroTime{Time: now.Add(-41 * time.Second)}
	leaseName := "agents/" + NodeLeaseName("n1")
	unserved := func(reason, message string) *v1alpha1.UnservedNode {
		return &v1alpha1.UnservedNode{Node: "n1", Reason: reason, Message: message}
	}
	tests := map[string]struct {
		// spec and report make the Lease of n1; no Lease when spec is nil.
		spec   *coordinationv1.LeaseSpec
		report *string
		want   nodeService
		// live: an agent holds the Lease, whatever it reports.
		live bool
	}{
		"no Lease": {
			want: nodeService{state: agentNoLease,
				unserved: unserved(v1alpha1.ReasonNoNodeAgent, "no node agent has run on the node: there is no Lease "+leaseName)},
		},
		"expired": {
			spec: &expired, report: ptr.To(`{"pc":{"generation":1,"reason":"Running"}}`),
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
			}
			got := serviceOf(store, "agents", "n1", "pc", now)
			want := tt.want
			if tt.live {
				// Renewed 10 s ago for 40 s.
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

func TestLeaseLive(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		spec coordinationv1.LeaseSpec
		want bool
	}{
		"renewed within its duration": {
			spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent"), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: now.Add(-30 * time.Second)}},
			want: true,
		},
		"expired": {
			spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent"), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: now.Add(-41 * time.Second)}},
		},
		"no holder": {
			spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: now}},
		},
		"never renewed": {
			spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent"), LeaseDurationSeconds: ptr.To[int32](40)},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := leaseLive(&coordinationv1.Lease{Spec: tt.spec}, now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("live (-want +got):\n%s", diff)
			}
		})
	}
}
