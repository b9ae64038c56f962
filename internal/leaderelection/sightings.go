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

package leaderelection

import (
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Sightings remembers when this process first saw the current record of
// each Lease of an informer, by its own clock. An elector that starts long
// after the informer judges a Lease's expiry from that sighting rather than
// from its own start: the replica that takes a provisioner over from one
// that died then waits out the rest of the lease duration, not a whole
// duration more, as a standby elector running all along would.
//
// It is as safe as such an elector: a record is sighted no sooner than it
// was written, so it expires no sooner than its holder stepped down. A
// sighting the informer delivers after the elector read the Lease does not
// match the record the elector saw, and the elector then waits from its own
// sighting.
type Sightings struct {
	clock clock.Clock

	mu   sync.Mutex
	seen map[types.NamespacedName]sighting
}

type sighting struct {
	spec coordinationv1.LeaseSpec
	at   time.Time
}

// NewSightings follows the Leases of informer from now on, by clk (nil: the
// real clock); its handler lives as long as the informer, so it is made
// once, before the informer starts.
func NewSightings(informer cache.SharedIndexInformer, clk clock.Clock) (*Sightings, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	s := &Sightings{clock: clk, seen: map[types.NamespacedName]sighting{}}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.observe,
		UpdateFunc: func(_, obj any) { s.observe(obj) },
		DeleteFunc: s.forget,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot follow the Leases: %w", err)
	}
	return s, nil
}

func (s *Sightings) observe(obj any) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.seen[key]; ok && equality.Semantic.DeepEqual(old.spec, lease.Spec) {
		return
	}
	s.seen[key] = sighting{spec: *lease.Spec.DeepCopy(), at: s.clock.Now()}
}

func (s *Sightings) forget(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if lease, ok := obj.(*coordinationv1.Lease); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.seen, types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name})
	}
}

// since returns when the record of lease was first sighted; false when the
// sighting is of another record, or there is none.
func (s *Sightings) since(lease *coordinationv1.Lease) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen, ok := s.seen[types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name}]
	if !ok || !equality.Semantic.DeepEqual(seen.spec, lease.Spec) {
		return time.Time{}, false
	}
	return seen.at, true
}
