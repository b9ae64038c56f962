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
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// Two replicas of one provisioner; the leader's first Provision call hangs,
// ignoring its context as a call on a hard NFS mount does, and the leader is
// stopped. It gives up on the call, leaves its Lease to expire instead of
// releasing it, and the other replica leads once it expired. No claim is
// provisioned by both while the hung call may still finish.
func TestHungLeaderFailsOverOnceItsLeaseExpires(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	hung := make(chan string, 1)
	release := make(chan struct{})
	var hangOnce sync.Once
	hangFirst := func(_ context.Context, options provisioning.ProvisionOptions) {
		first := false
		hangOnce.Do(func() { first = true })
		if first {
			hung <- options.PVName
			<-release
		}
	}
	replicas := map[string]*dirBackend{
		"replica-a": {root: root, afterCreate: hangFirst},
		"replica-b": {root: root, afterCreate: hangFirst},
	}
	running := map[string]*instance{}
	for identity, backend := range replicas {
		running[identity] = f.start(f.replicaConfig(identity), backend)
	}
	// Registered after the instances' cleanups, so it runs before them.
	t.Cleanup(func() { close(release) })
	f.createClass(f.class, nil)

	leader, follower := f.oneLeader(running)

	stuck := f.createClaim("stuck", f.class, nil)
	select {
	case pvName := <-hung:
		if pvName != volumeName(stuck) {
			t.Fatalf("hung Provision call for %s, want %s", pvName, volumeName(stuck))
		}
	case <-time.After(waitTimeout):
		t.Fatal("the leader never called Provision")
	}

	running[leader].stop(t)
	stopped := time.Now()
	holder, err := f.leaseHolder(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if holder != leader {
		t.Errorf("Lease holder right after the stop = %q, want %q: a hung leader must let its Lease expire, not release it", holder, leader)
	}

	claims := []*corev1.PersistentVolumeClaim{stuck}
	for i := range 2 {
		claims = append(claims, f.createClaim(fmt.Sprintf("after-%d", i), f.class, nil))
	}
	for _, claim := range claims {
		f.waitBound(claim.Name)
	}
	if !running[follower].controller.IsLeader() {
		t.Errorf("%s does not lead after %s stopped", follower, leader)
	}

	for _, claim := range claims {
		pvName := volumeName(claim)
		byReplica := map[string]int{}
		for identity, backend := range replicas {
			if n := len(backend.attemptsFor(pvName)); n > 0 {
				byReplica[identity] = n
			}
		}
		want := map[string]int{follower: 1}
		if claim == stuck {
			// The hung call, and the follower's once the Lease expired.
			want[leader] = 1
		}
		if diff := cmp.Diff(want, byReplica); diff != "" {
			t.Errorf("Provision calls for claim %s by replica (-want +got):\n%s", claim.Name, diff)
		}
	}
	for _, attempt := range replicas[follower].attemptsFor(volumeName(stuck)) {
		if attempt.at.Before(stopped) {
			t.Errorf("%s provisioned the hung claim at %v, while %s was still stopping", follower, attempt.at, leader)
		}
	}
}
