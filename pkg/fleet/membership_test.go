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
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/leaderelection/leasetest"
)

// replicaLease is the membership Lease of holder ("" once released),
// renewed at renewed by its holder's clock.
func replicaLease(identity, holder string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "provfleet-system", Name: replicaLeaseName(identity), UID: types.UID("uid-" + identity),
			ResourceVersion: "7", Labels: map[string]string{replicaLeaseLabel: replicaLeaseKind}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(renewed))},
	}
}

func newTestMembership(clk *testingclock.FakeClock, client *kubefake.Clientset) *membership {
	return &membership{identity: "b", namespace: "provfleet-system", clock: clk, client: client, replicas: map[string]replicaRecord{}}
}

func TestMembershipLiveReplicas(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name     string
		leases   []*coordinationv1.Lease
		after    time.Duration
		want     []string
		wantNext time.Duration
	}{
		{name: "alone", want: []string{"b"}},
		{name: "others renewing", leases: []*coordinationv1.Lease{replicaLease("c", "c", now), replicaLease("a", "a", now)},
			want: []string{"a", "b", "c"}, wantNext: 15 * time.Second},
		{name: "one released", leases: []*coordinationv1.Lease{replicaLease("a", "", now), replicaLease("c", "c", now)},
			want: []string{"b", "c"}, wantNext: 15 * time.Second},
		{name: "expired by the local clock", leases: []*coordinationv1.Lease{replicaLease("a", "a", now)}, after: 15 * time.Second,
			want: []string{"b"}},
		{name: "still live by the local clock", leases: []*coordinationv1.Lease{replicaLease("a", "a", now)}, after: 10 * time.Second,
			want: []string{"a", "b"}, wantNext: 5 * time.Second},
		{name: "renewed an hour ago by its clock: dead at once", leases: []*coordinationv1.Lease{replicaLease("a", "a", now.Add(-time.Hour))},
			want: []string{"b"}},
		{name: "renewed a minute ahead by its clock: trusted as live", leases: []*coordinationv1.Lease{replicaLease("a", "a", now.Add(time.Minute))},
			want: []string{"a", "b"}, wantNext: 15 * time.Second},
		{name: "this replica's own Lease counts once", leases: []*coordinationv1.Lease{replicaLease("b", "b", now)}, want: []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(now)
			ms := newTestMembership(clk, nil)
			for _, lease := range tc.leases {
				ms.observe(lease)
			}
			clk.Step(tc.after)
			live, next := ms.liveReplicas()
			if diff := cmp.Diff(tc.want, live); diff != "" {
				t.Errorf("live replicas (-want +got):\n%s", diff)
			}
			if next != tc.wantNext {
				t.Errorf("next expiry in %v, want %v", next, tc.wantNext)
			}
		})
	}
}

// Only what may change the replicas calls for a new spread: a renewal of a
// live replica does not.
func TestMembershipObserveReportsChanges(t *testing.T) {
	now := time.Now()
	clk := testingclock.NewFakeClock(now)
	ms := newTestMembership(clk, nil)
	steps := []struct {
		name  string
		lease *coordinationv1.Lease
		after time.Duration
		want  bool
	}{
		{name: "a joins", lease: replicaLease("a", "a", now), want: true},
		{name: "a renews", lease: replicaLease("a", "a", now.Add(6*time.Second)), after: 6 * time.Second, want: false},
		{name: "a renews after it expired", lease: replicaLease("a", "a", now.Add(30*time.Second)), after: 24 * time.Second, want: true},
		{name: "a releases", lease: replicaLease("a", "", now.Add(31*time.Second)), after: time.Second, want: true},
	}
	for _, step := range steps {
		clk.Step(step.after)
		if got := ms.observe(step.lease); got != step.want {
			t.Errorf("%s: observe reported %v, want %v", step.name, got, step.want)
		}
	}
}

func TestMembershipSetSpreadMoves(t *testing.T) {
	ms := newTestMembership(testingclock.NewFakeClock(time.Now()), nil)
	moved, changed := ms.setSpread([]string{"a", "b"}, map[string]string{"p1": "a", "p2": "b", "p3": "b"})
	if diff := cmp.Diff([]string{"p2", "p3"}, sorted(moved)); diff != "" || !changed {
		t.Errorf("first spread: moved (-want +got):\n%s, replicas changed %v", diff, changed)
	}
	// c joins: p3 leaves this replica, p1 moves between two others.
	moved, changed = ms.setSpread([]string{"a", "b", "c"}, map[string]string{"p1": "c", "p2": "b", "p3": "c"})
	if diff := cmp.Diff([]string{"p3"}, sorted(moved)); diff != "" || !changed {
		t.Errorf("after a join: moved (-want +got):\n%s, replicas changed %v", diff, changed)
	}
	// p2 is deleted; p4 is created and comes here.
	moved, changed = ms.setSpread([]string{"a", "b", "c"}, map[string]string{"p1": "c", "p3": "c", "p4": "b"})
	if diff := cmp.Diff([]string{"p2", "p4"}, sorted(moved)); diff != "" || changed {
		t.Errorf("after names changed: moved (-want +got):\n%s, replicas changed %v", diff, changed)
	}
	if replicas, assigned := ms.counts(); replicas != 3 || assigned != 1 {
		t.Errorf("counts: %d replicas, %d assigned; want 3 and 1", replicas, assigned)
	}
}

func sorted(s []string) []string {
	return slices.Sorted(slices.Values(s))
}

// The membership Leases of replicas gone for long are deleted, by the first
// live replica only, and never one renewed since it was read.
func TestMembershipCollectsLeasesOfReplicasGone(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name     string
		live     []string
		after    time.Duration
		renewed  bool
		want     []string
		wantNext time.Duration
	}{
		{name: "not gone long enough", live: []string{"b"}, after: 5 * time.Minute,
			want: []string{replicaLeaseName("a"), replicaLeaseName("b")}, wantNext: replicaLeaseGone + 15*time.Second - 5*time.Minute},
		{name: "gone long enough", live: []string{"b"}, after: replicaLeaseGone + time.Minute, want: []string{replicaLeaseName("b")}},
		{name: "another replica collects", live: []string{"a0", "b"}, after: replicaLeaseGone + time.Minute,
			want: []string{replicaLeaseName("a"), replicaLeaseName("b")}},
		{name: "renewed since it was read", live: []string{"b"}, after: replicaLeaseGone + time.Minute, renewed: true,
			want: []string{replicaLeaseName("a"), replicaLeaseName("b")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gone, own := replicaLease("a", "a", now), replicaLease("b", "b", now)
			client := kubefake.NewClientset(gone, own)
			leasetest.EnforceVersions(client)
			clk := testingclock.NewFakeClock(now)
			ms := newTestMembership(clk, client)
			ms.observe(gone)
			ms.observe(own)
			if tc.renewed {
				renewed := replicaLease("a", "a", now.Add(time.Hour))
				if _, err := client.CoordinationV1().Leases("provfleet-system").Update(context.Background(), renewed, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			clk.Step(tc.after)
			next := ms.collect(context.Background(), tc.live)
			leases, err := client.CoordinationV1().Leases("provfleet-system").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, lease := range leases.Items {
				got = append(got, lease.Name)
			}
			if diff := cmp.Diff(sorted(tc.want), sorted(got)); diff != "" {
				t.Errorf("Leases left (-want +got):\n%s", diff)
			}
			if next != tc.wantNext {
				t.Errorf("next collection in %v, want %v", next, tc.wantNext)
			}
		})
	}
}

// A replica that joins takes the ProvisionerConfigs the spread gives it:
// this replica stops their instances and leaves their status to it; once
// the other releases its membership Lease, they come back.
func TestManagerHandsOverTheShareOfAReplicaThatJoins(t *testing.T) {
	f := newFixture(t)
	var names []string
	for i := range 6 {
		pc := managed()
		pc.Name, pc.Spec.ProvisionerName = fmt.Sprintf("p%d", i), v1alpha1.ProvisionerName(fmt.Sprintf("x.io/p%d", i))
		f.create(pc)
		names = append(names, pc.Name)
	}
	running := func(name string) bool {
		instances := f.started("x.io/" + name)
		return len(instances) > 0 && !isStopped(instances[len(instances)-1])
	}
	f.eventually("every instance running", func() bool {
		for _, name := range names {
			if !running(name) || f.readyReason(name, 1) != v1alpha1.ReasonRunning {
				return false
			}
		}
		return true
	})

	other := replicaLease("replica-2", "replica-2", time.Now())
	other.Namespace = "provfleet-system"
	created, err := f.kube.CoordinationV1().Leases("provfleet-system").Create(f.ctx, other, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owners := spread(names, []string{"replica-1", "replica-2"})
	f.eventually("the share of replica-2 stopped here, the rest running", func() bool {
		for _, name := range names {
			if running(name) != (owners[name] == "replica-1") {
				return false
			}
		}
		return true
	})
	statuses := map[string]string{}
	for _, name := range names {
		statuses[name] = f.get(name).ResourceVersion
	}
	if n, _ := f.manager.membership.counts(); n != 2 {
		t.Errorf("%d replicas counted, want 2", n)
	}

	created.Spec.HolderIdentity = ptr.To("")
	if _, err := f.kube.CoordinationV1().Leases("provfleet-system").Update(f.ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("every instance running again", func() bool {
		for _, name := range names {
			if !running(name) {
				return false
			}
		}
		return true
	})
	for _, name := range names {
		if owners[name] == "replica-1" && f.get(name).ResourceVersion != statuses[name] {
			t.Errorf("ProvisionerConfig %s, which stayed here, was written again", name)
		}
	}
}
