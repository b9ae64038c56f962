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
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// leaseClock judges node Leases' expiry by the manager's own clock: a Lease
// expires leaseDurationSeconds after the manager first saw its current
// renewal, as client-go's elector and the node lifecycle controller judge.
// The renewTime an agent writes is read by its own clock, which may be off:
// by it, an agent whose clock lags would count as gone while it renews, and
// one whose clock runs ahead as live long after it stopped.
//
// A renewal the manager has not seen yet is seen when first read, so after
// the manager starts every held Lease counts as live for one more duration,
// as a new elector waits a full duration before it takes a Lease over.
type leaseClock struct {
	mu sync.Mutex
	// sightings are, by namespace/name, the last renewal seen of each node
	// Lease and when; forget drops a deleted Lease's.
	sightings map[string]leaseSighting
}

// leaseRenewal tells one renewal of a Lease from another.
type leaseRenewal struct {
	holder string
	// renewMicros is the renewal's renewTime as written: compared only
	// with itself, never with the manager's clock.
	renewMicros int64
}

type leaseSighting struct {
	renewal leaseRenewal
	seen    time.Time
}

func newLeaseClock() *leaseClock {
	return &leaseClock{sightings: map[string]leaseSighting{}}
}

// renewalOf returns the renewal of lease, false when it has no holder or no
// renewal, so it cannot be live.
func renewalOf(lease *coordinationv1.Lease) (leaseRenewal, bool) {
	s := lease.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return leaseRenewal{}, false
	}
	return leaseRenewal{holder: *s.HolderIdentity, renewMicros: s.RenewTime.UnixMicro()}, true
}

// observe records that lease is seen at now and returns when its current
// renewal was first seen.
func (c *leaseClock) observe(lease *coordinationv1.Lease, renewal leaseRenewal, now time.Time) time.Time {
	key := lease.Namespace + "/" + lease.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sightings[key]; ok && s.renewal == renewal {
		return s.seen
	}
	c.sightings[key] = leaseSighting{renewal: renewal, seen: now}
	return now
}

// expiry is when lease expires unless renewed, seeing it at now; false when
// it has no holder or no renewal.
func (c *leaseClock) expiry(lease *coordinationv1.Lease, now time.Time) (time.Time, bool) {
	renewal, held := renewalOf(lease)
	if !held {
		return time.Time{}, false
	}
	seen := c.observe(lease, renewal, now)
	return seen.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second), true
}

// live reports whether lease has a holder whose renewal the manager saw
// within its duration, seeing it at now.
func (c *leaseClock) live(lease *coordinationv1.Lease, now time.Time) bool {
	expiry, held := c.expiry(lease, now)
	return held && expiry.After(now)
}

// wasLive is live for a version of a Lease that a newer one may have
// replaced: it records nothing, and a renewal it has not seen last counts
// as not live.
func (c *leaseClock) wasLive(lease *coordinationv1.Lease, now time.Time) bool {
	renewal, held := renewalOf(lease)
	if !held {
		return false
	}
	c.mu.Lock()
	s, ok := c.sightings[lease.Namespace+"/"+lease.Name]
	c.mu.Unlock()
	return ok && s.renewal == renewal && s.seen.Add(time.Duration(*lease.Spec.LeaseDurationSeconds)*time.Second).After(now)
}

// forget drops what was seen of a deleted Lease.
func (c *leaseClock) forget(lease *coordinationv1.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sightings, lease.Namespace+"/"+lease.Name)
}
