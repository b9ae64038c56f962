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

package provisioning_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// replicaConfig is a controller configuration for one of several replicas of
// the same provisioner. A stopping leader releases its Lease, so a takeover
// takes about one retry period; the lease duration only matters for a crash.
func (f *fixture) replicaConfig(identity string) provisioning.Config {
	cfg := f.config()
	cfg.LeaderElection = provisioning.LeaderElectionConfig{
		Enabled:       true,
		Namespace:     testenv.ManagerNamespace,
		Identity:      identity,
		LeaseDuration: 8 * time.Second,
		RenewDeadline: 6 * time.Second,
		RetryPeriod:   time.Second,
	}
	return cfg
}

// leaseHolder reads the holder of the provisioner's Lease from the API.
func (f *fixture) leaseHolder(ctx context.Context) (string, error) {
	lease, err := f.admin.CoordinationV1().Leases(testenv.ManagerNamespace).Get(ctx, provisioning.LeaseName(f.provisioner), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	if lease.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *lease.Spec.HolderIdentity, nil
}

// startTwoReplicas runs replica-a and replica-b of the test's provisioner over
// backends that share one folder, and returns the backends and the running
// controllers by identity.
func (f *fixture) startTwoReplicas() (map[string]*dirBackend, map[string]*instance) {
	f.t.Helper()
	root := f.t.TempDir()
	replicas := map[string]*dirBackend{
		"replica-a": {root: root},
		"replica-b": {root: root},
	}
	running := map[string]*instance{}
	for identity, backend := range replicas {
		running[identity] = f.start(f.replicaConfig(identity), backend)
	}
	return replicas, running
}

// Two replicas of one provisioner on the real Lease API: one leads and
// provisions, the other waits; when the leader stops, the other takes over and
// provisions the claims that came meanwhile. No claim is provisioned twice.
func TestReplicasTakeOverWithoutDoubleProvisioning(t *testing.T) {
	f := newFixture(t)
	replicas, running := f.startTwoReplicas()
	f.createClass(f.class, nil)

	leader, follower := f.oneLeader(running)

	var claims []*corev1.PersistentVolumeClaim
	for i := range 3 {
		claims = append(claims, f.createClaim(fmt.Sprintf("before-%d", i), f.class, nil))
	}
	for _, claim := range claims {
		f.waitBound(claim.Name)
	}
	if got := replicas[follower].allAttempts(); len(got) != 0 {
		t.Errorf("the standby replica provisioned: %+v", got)
	}

	running[leader].stop(t)
	for i := range 3 {
		claims = append(claims, f.createClaim(fmt.Sprintf("after-%d", i), f.class, nil))
	}
	for _, claim := range claims[3:] {
		f.waitBound(claim.Name)
	}
	if !running[follower].controller.IsLeader() {
		t.Errorf("%s does not lead after %s stopped", follower, leader)
	}
	holder, err := f.leaseHolder(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(follower, holder); diff != "" {
		t.Errorf("Lease holder (-want +got):\n%s", diff)
	}

	var want []string
	for i, claim := range claims {
		pvName := volumeName(claim)
		want = append(want, pvName)
		byReplica := map[string]int{}
		for identity, backend := range replicas {
			if n := len(backend.attemptsFor(pvName)); n > 0 {
				byReplica[identity] = n
			}
		}
		provisioner := leader
		if i >= 3 {
			provisioner = follower
		}
		if diff := cmp.Diff(map[string]int{provisioner: 1}, byReplica); diff != "" {
			t.Errorf("Provision calls for claim %s by replica (-want +got):\n%s", claim.Name, diff)
		}
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, mustVolumes(t, replicas[leader])); diff != "" {
		t.Errorf("backend volumes (-want +got):\n%s", diff)
	}
}

// leaderSampler reads which replicas lead, as often as it can, and keeps the
// moments when more than one did.
type leaderSampler struct {
	stopped chan struct{}
	done    chan struct{}
	// overlaps is written by the sampling goroutine until done is closed.
	overlaps []string
}

func sampleLeaders(running map[string]*instance) *leaderSampler {
	s := &leaderSampler{stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stopped:
				return
			default:
			}
			var leaders []string
			for identity, in := range running {
				if in.controller.IsLeader() {
					leaders = append(leaders, identity)
				}
			}
			if len(leaders) > 1 && len(s.overlaps) < 10 {
				slices.Sort(leaders)
				s.overlaps = append(s.overlaps, fmt.Sprintf("%s: %q", time.Now().Format(time.StampMilli), leaders))
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return s
}

// stop ends the sampling and returns when several replicas led.
func (s *leaderSampler) stop() []string {
	close(s.stopped)
	<-s.done
	return s.overlaps
}

// When the Lease of the leading replica is deleted, at no moment do both
// replicas lead: the leader stops its term as soon as it sees the deletion,
// and the other replica does not take the deleted Lease as free. One replica
// leads again and provisions.
func TestReplicasLeaseDeletedNeverTwoLeaders(t *testing.T) {
	f := newFixture(t)
	replicas, running := f.startTwoReplicas()
	f.createClass(f.class, nil)
	f.eventually("one replica to lead", func(ctx context.Context) (bool, error) {
		holder, err := f.leaseHolder(ctx)
		return holder != "" && running[holder] != nil && running[holder].controller.IsLeader(), err
	})

	sampler := sampleLeaders(running)
	deleted := time.Now()
	if err := f.admin.CoordinationV1().Leases(testenv.ManagerNamespace).Delete(t.Context(), provisioning.LeaseName(f.provisioner), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Until the Lease is renewed more than a lease duration after the
	// deletion: long enough for the other replica to have taken it, had it
	// judged it free.
	leaseDuration := f.replicaConfig("").LeaderElection.LeaseDuration
	var leader string
	f.eventually("a renewal a lease duration after the deletion", func(ctx context.Context) (bool, error) {
		lease, err := f.admin.CoordinationV1().Leases(testenv.ManagerNamespace).Get(ctx, provisioning.LeaseName(f.provisioner), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		if lease.Spec.HolderIdentity != nil {
			leader = *lease.Spec.HolderIdentity
		}
		return lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(deleted.Add(leaseDuration)), nil
	})
	claim := f.createClaim("after-delete", f.class, nil)
	f.waitBound(claim.Name)
	if overlaps := sampler.stop(); len(overlaps) > 0 {
		t.Errorf("both replicas led after the Lease was deleted: %s", overlaps)
	}

	if running[leader] == nil || !running[leader].controller.IsLeader() {
		t.Fatalf("Lease holder %q does not lead", leader)
	}
	byReplica := map[string]int{}
	for identity, backend := range replicas {
		if n := len(backend.attemptsFor(volumeName(claim))); n > 0 {
			byReplica[identity] = n
		}
	}
	if diff := cmp.Diff(map[string]int{leader: 1}, byReplica); diff != "" {
		t.Errorf("Provision calls by replica (-want +got):\n%s", diff)
	}
}

// While a provisioner of an older upstream version holds its Endpoints lock
// (a live record of another holder, in the namespace the option names), the
// provisioner does not lead and provisions nothing; once the lock is removed
// it leads and provisions.
func TestLegacyEndpointsLockBlocksLeading(t *testing.T) {
	f := newFixture(t)
	now := metav1.Now()
	record, err := json.Marshal(resourcelock.LeaderElectionRecord{
		HolderIdentity: "old-provisioner_0f3c", LeaseDurationSeconds: 3600, AcquireTime: now, RenewTime: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	lock := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{
		Namespace:   testenv.ManagerNamespace,
		Name:        provisioning.LeaseName(f.provisioner),
		Annotations: map[string]string{resourcelock.LeaderElectionRecordAnnotationKey: string(record)},
	}}
	endpoints := f.admin.CoreV1().Endpoints(testenv.ManagerNamespace)
	if _, err := endpoints.Create(t.Context(), lock, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = endpoints.Delete(context.Background(), lock.Name, metav1.DeleteOptions{}) })

	cfg := f.replicaConfig("replica-a")
	cfg.LeaderElection.LegacyLockNamespace = testenv.ManagerNamespace
	backend := &dirBackend{root: t.TempDir()}
	in := f.start(cfg, backend)
	f.createClass(f.class, nil)
	claim := f.createClaim("while-locked", f.class, nil)
	// Longer than the elector waits between two looks at the lock, so that
	// it looked at least twice.
	le := cfg.LeaderElection
	for until := time.Now().Add(le.LeaseDuration + 2*le.RetryPeriod); time.Now().Before(until); time.Sleep(100 * time.Millisecond) {
		if in.controller.IsLeader() {
			t.Fatal("the provisioner leads while the older provisioner's Endpoints lock is held")
		}
	}
	if got := backend.allAttempts(); len(got) != 0 {
		t.Errorf("provisioned while the older provisioner's Endpoints lock is held: %+v", got)
	}
	if holder, err := f.leaseHolder(t.Context()); err != nil || holder != "" {
		t.Errorf("Lease holder %q (%v) while the older provisioner's Endpoints lock is held, want none", holder, err)
	}

	if err := endpoints.Delete(t.Context(), lock.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitBound(claim.Name)
	if !in.controller.IsLeader() {
		t.Error("the provisioner does not lead after the Endpoints lock was removed")
	}
	if diff := cmp.Diff(1, len(backend.attemptsFor(volumeName(claim)))); diff != "" {
		t.Errorf("Provision calls (-want +got):\n%s", diff)
	}
}

// oneLeader waits until exactly one of two running replicas leads and holds
// the Lease, and names the leader and the other replica.
func (f *fixture) oneLeader(running map[string]*instance) (leader, follower string) {
	f.eventually("one replica to lead", func(ctx context.Context) (bool, error) {
		var leaders []string
		for identity, in := range running {
			if in.controller.IsLeader() {
				leaders = append(leaders, identity)
			}
		}
		if len(leaders) != 1 {
			return false, nil
		}
		leader = leaders[0]
		holder, err := f.leaseHolder(ctx)
		return holder == leader, err
	})
	for identity := range running {
		if identity != leader {
			follower = identity
		}
	}
	return leader, follower
}
