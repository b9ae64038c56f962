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
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// replicaConfig is a controller configuration for one of several replicas of
// the same provisioner. A stopping leader releases its Lease, so a takeover
// takes about one retry period; the lease duration only matters for a crash.
func (f *fixture) replicaConfig(identity string) provisioning.Config {
	cfg := f.config()
	cfg.LeaderElection = provisioning.LeaderElectionConfig{
		Enabled:       true,
		Namespace:     managerNamespace,
		Identity:      identity,
		LeaseDuration: 8 * time.Second,
		RenewDeadline: 6 * time.Second,
		RetryPeriod:   time.Second,
	}
	return cfg
}

// leaseHolder reads the holder of the provisioner's Lease from the API.
func (f *fixture) leaseHolder(ctx context.Context) (string, error) {
	lease, err := f.admin.CoordinationV1().Leases(managerNamespace).Get(ctx, provisioning.LeaseName(f.provisioner), metav1.GetOptions{})
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

// Two replicas of one provisioner on the real Lease API: one leads and
// provisions, the other waits; when the leader stops, the other takes over and
// provisions the claims that came meanwhile. No claim is provisioned twice.
func TestReplicasTakeOverWithoutDoubleProvisioning(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	replicas := map[string]*dirBackend{
		"replica-a": {root: root},
		"replica-b": {root: root},
	}
	running := map[string]*instance{}
	for identity, backend := range replicas {
		running[identity] = f.start(f.replicaConfig(identity), backend)
	}
	f.createClass(f.class, nil)

	var leader, follower string
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
