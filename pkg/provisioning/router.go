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

package provisioning

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Router hands the events of the shared claim, volume and Lease informers to
// the controllers they concern. It has one event handler on each informer,
// only while some controller subscribes, and finds the subscribers of an
// event by map lookup: a fleet of hundreds of controllers costs one handler
// (two goroutines and a buffer) per informer instead of one per controller,
// and an event is seen only by the controllers it names.
//
// The owner of the informers makes one Router for them and hands it to every
// controller in SharedInformers.Router.
type Router struct {
	claims, volumes, leases *route
}

// NewRouter returns the Router of the given informers; leases may be nil. It
// adds no handler before a controller subscribes.
func NewRouter(claims, volumes, leases cache.SharedIndexInformer) *Router {
	r := &Router{claims: newRoute(claims, claimKeys), volumes: newRoute(volumes, volumeKeys)}
	if leases != nil {
		r.leases = newRoute(leases, leaseKeys)
	}
	return r
}

// serves reports whether r routes the events of inf.
func (r *Router) serves(inf SharedInformers) bool {
	leases := r.leases == nil && inf.Leases == nil || r.leases != nil && r.leases.informer == inf.Leases
	return r.claims.informer == inf.Claims && r.volumes.informer == inf.Volumes && leases
}

// routeKey is something an object names: a provisioner, a claim finalizer or
// a Lease.
type routeKey struct {
	finalizer bool
	// namespace is that of a Lease.
	namespace, name string
}

func provisionerKey(name string) routeKey { return routeKey{name: name} }
func finalizerKey(name string) routeKey   { return routeKey{finalizer: true, name: name} }

// claimKeys names the provisioner a claim asks for and its finalizers, among
// which is the intent finalizer of any provisioner that may be creating a
// volume for it.
func claimKeys(obj any, yield func(routeKey)) {
	claim, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if name := storageProvisioner(claim); name != "" {
		yield(provisionerKey(name))
	}
	for _, f := range claim.Finalizers {
		yield(finalizerKey(f))
	}
}

// volumeKeys names the provisioner that provisioned a volume.
func volumeKeys(obj any, yield func(routeKey)) {
	volume, ok := obj.(*v1.PersistentVolume)
	if !ok {
		return
	}
	if name := volume.Annotations[annDynamicallyProvisioned]; name != "" {
		yield(provisionerKey(name))
	}
}

func leaseKeys(obj any, yield func(routeKey)) {
	if lease, ok := obj.(*coordinationv1.Lease); ok {
		yield(routeKey{namespace: lease.Namespace, name: lease.Name})
	}
}

// route hands the events of one informer to the subscribers of the keys the
// objects name.
type route struct {
	informer cache.SharedIndexInformer
	// keys calls yield with every key obj names.
	keys func(obj any, yield func(routeKey))

	mu sync.RWMutex
	// listener is the handler on the informer; nil without subscribers.
	listener *listener
	subs     map[routeKey][]*subscription
	active   int
}

func newRoute(informer cache.SharedIndexInformer, keys func(any, func(routeKey))) *route {
	return &route{informer: informer, keys: keys, subs: map[routeKey][]*subscription{}}
}

// subscription is one subscriber's interest in the events of a route. It
// delivers nothing until started.
type subscription struct {
	route *route
	// keys are what to subscribe under; called with the route locked.
	keys func() []routeKey

	// Guarded by route.mu.
	handler cache.ResourceEventHandler // nil unless started
	current []routeKey
}

// subscription returns an unstarted subscription under keys.
func (r *route) subscription(keys func() []routeKey) *subscription {
	return &subscription{route: r, keys: keys}
}

// start delivers every event of an object that names one of the
// subscription's keys (for an update, before or after it) to handler, once,
// until stop. It does not replay the informer's store: the subscriber lists
// it, once subscribed and the informer synced. handler is called on
// the informer's handler goroutine with the route locked: it must only filter
// and queue, and never subscribe or unsubscribe.
func (s *subscription) start(handler cache.ResourceEventHandler) error {
	r := s.route
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.handler != nil {
		return errors.New("cannot start a subscription twice")
	}
	if r.listener == nil {
		l := &listener{route: r}
		// Subscribers resync on their own timers, not on every object.
		var noResync time.Duration
		handle, err := r.informer.AddEventHandlerWithOptions(l, cache.HandlerOptions{ResyncPeriod: &noResync})
		if err != nil {
			return fmt.Errorf("cannot add an event handler: %w", err)
		}
		l.handle = handle
		r.listener = l
	}
	s.handler = handler
	s.add()
	r.active++
	return nil
}

// stop ends the deliveries of a started subscription: none is under way or
// follows once it returned. The last subscriber removes the route's handler.
func (s *subscription) stop() error {
	r := s.route
	r.mu.Lock()
	if s.handler == nil {
		r.mu.Unlock()
		return nil
	}
	s.remove()
	s.handler = nil
	r.active--
	var last *listener
	if r.active == 0 {
		last, r.listener = r.listener, nil
	}
	r.mu.Unlock()
	if last == nil {
		return nil
	}
	// Unlocked: the handler may hold an event that waits for the lock, to
	// drop it since it is no longer the route's listener.
	if err := cache.ShutDownEventHandler(r.informer, last.handle); err != nil {
		return fmt.Errorf("cannot remove the event handler: %w", err)
	}
	return nil
}

// refresh subscribes a started subscription under its keys of now.
func (s *subscription) refresh() {
	r := s.route
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.handler == nil {
		return
	}
	s.remove()
	s.add()
}

// add and remove enter and leave the subscription in the route's map; the
// route is locked.
func (s *subscription) add() {
	s.current = s.keys()
	for _, key := range s.current {
		s.route.subs[key] = append(s.route.subs[key], s)
	}
}

func (s *subscription) remove() {
	for _, key := range s.current {
		subs := slices.DeleteFunc(s.route.subs[key], func(other *subscription) bool { return other == s })
		if len(subs) == 0 {
			delete(s.route.subs, key)
		} else {
			s.route.subs[key] = subs
		}
	}
	s.current = nil
}

// listener is a route's one handler on its informer.
type listener struct {
	route  *route
	handle cache.ResourceEventHandlerRegistration
}

func (l *listener) OnAdd(obj any, isInInitialList bool) {
	// The store as it was when the handler was added: subscribers read the
	// store themselves, and a late copy of an object they already acted on
	// would only make them act on it again.
	if isInInitialList {
		return
	}
	l.route.deliver(l, nil, obj, func(h cache.ResourceEventHandler) { h.OnAdd(obj, false) })
}

func (l *listener) OnUpdate(oldObj, newObj any) {
	// An annotation may have moved: the subscribers of both objects hear of it.
	l.route.deliver(l, oldObj, newObj, func(h cache.ResourceEventHandler) { h.OnUpdate(oldObj, newObj) })
}

func (l *listener) OnDelete(obj any) {
	l.route.deliver(l, nil, obj, func(h cache.ResourceEventHandler) { h.OnDelete(obj) })
}

// deliver calls call once for each subscriber of a key that oldObj (if not
// nil) or obj names.
func (r *route) deliver(l *listener, oldObj, obj any, call func(cache.ResourceEventHandler)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.listener != l {
		// A removed handler with an event in flight.
		return
	}
	var buf [4]*subscription
	called := buf[:0]
	visit := func(key routeKey) {
		for _, s := range r.subs[key] {
			if !slices.Contains(called, s) {
				called = append(called, s)
				call(s.handler)
			}
		}
	}
	if oldObj != nil {
		r.keys(oldObj, visit)
	}
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		r.keys(tombstone.Obj, visit)
	} else {
		r.keys(obj, visit)
	}
}
