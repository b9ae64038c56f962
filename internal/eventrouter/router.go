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

package eventrouter

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// KeysFunc calls yield with every key obj names.
type KeysFunc[K comparable] func(obj any, yield func(K))

// Router hands the events of one informer to the subscribers of the keys the
// objects name.
type Router[K comparable] struct {
	informer cache.SharedIndexInformer
	keys     KeysFunc[K]

	mu sync.RWMutex
	// listener is the handler on the informer; nil without subscribers.
	listener *listener[K]
	subs     map[K][]*Subscription[K]
	active   int
}

// New returns the Router of informer, which routes by the keys that keys
// lists. It adds no handler before the first Subscribe.
func New[K comparable](informer cache.SharedIndexInformer, keys KeysFunc[K]) *Router[K] {
	return &Router[K]{informer: informer, keys: keys, subs: map[K][]*Subscription[K]{}}
}

// Informer is the informer whose events r routes.
func (r *Router[K]) Informer() cache.SharedIndexInformer { return r.informer }

// Subscribed reports whether some subscriber is subscribed under key.
func (r *Router[K]) Subscribed(key K) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.subs[key]) > 0
}

// Subscription is one subscriber's registration with a Router, from
// Subscribe until Stop.
type Subscription[K comparable] struct {
	router *Router[K]
	// keys are what to subscribe under; called with the router locked.
	keys func() []K

	// Guarded by router.mu.
	handler cache.ResourceEventHandler // nil once stopped
	current []K
}

// Subscribe delivers every event of an object that names one of the keys
// keys returns (for an update, before or after it) to handler, once, until
// the returned Subscription is stopped. It does not replay the informer's
// store: the subscriber lists it, once subscribed and the informer synced.
// handler is called on the informer's handler goroutine with the router
// locked: it must only filter and queue, and never subscribe or stop. It
// fails when the informer refuses a handler, as a stopped one does.
func (r *Router[K]) Subscribe(keys func() []K, handler cache.ResourceEventHandler) (*Subscription[K], error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listener == nil {
		l := &listener[K]{router: r}
		// Subscribers resync on their own timers, not on every object.
		var noResync time.Duration
		handle, err := r.informer.AddEventHandlerWithOptions(l, cache.HandlerOptions{ResyncPeriod: &noResync})
		if err != nil {
			return nil, fmt.Errorf("cannot add an event handler: %w", err)
		}
		l.handle = handle
		r.listener = l
	}
	s := &Subscription[K]{router: r, keys: keys, handler: handler}
	s.add()
	r.active++
	return s, nil
}

// Stop ends the deliveries of s: none is under way or follows once it
// returned. The last subscriber removes the router's handler. Stopping twice
// does nothing.
func (s *Subscription[K]) Stop() error {
	r := s.router
	r.mu.Lock()
	if s.handler == nil {
		r.mu.Unlock()
		return nil
	}
	s.remove()
	s.handler = nil
	r.active--
	var last *listener[K]
	if r.active == 0 {
		last, r.listener = r.listener, nil
	}
	r.mu.Unlock()
	if last == nil {
		return nil
	}
	// Unlocked: the handler may hold an event that waits for the lock, to
	// drop it since it is no longer the router's listener.
	if err := cache.ShutDownEventHandler(r.informer, last.handle); err != nil {
		return fmt.Errorf("cannot remove the event handler: %w", err)
	}
	return nil
}

// Refresh subscribes s under the keys its keys function returns now; it does
// nothing once s is stopped.
func (s *Subscription[K]) Refresh() {
	r := s.router
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.handler == nil {
		return
	}
	s.remove()
	s.add()
}

// add and remove enter and leave the subscription in the router's map; the
// router is locked.
func (s *Subscription[K]) add() {
	s.current = s.keys()
	for _, key := range s.current {
		s.router.subs[key] = append(s.router.subs[key], s)
	}
}

func (s *Subscription[K]) remove() {
	for _, key := range s.current {
		subs := slices.DeleteFunc(s.router.subs[key], func(other *Subscription[K]) bool { return other == s })
		if len(subs) == 0 {
			delete(s.router.subs, key)
		} else {
			s.router.subs[key] = subs
		}
	}
	s.current = nil
}

// listener is a router's one handler on its informer.
type listener[K comparable] struct {
	router *Router[K]
	handle cache.ResourceEventHandlerRegistration
}

//nolint:revive // The signature of cache.ResourceEventHandler.
func (l *listener[K]) OnAdd(obj any, isInInitialList bool) {
	// The store as it was when the handler was added: subscribers read the
	// store themselves, and a late copy of an object they already acted on
	// would only make them act on it again.
	if isInInitialList {
		return
	}
	l.router.deliver(l, nil, obj, func(h cache.ResourceEventHandler) { h.OnAdd(obj, false) })
}

func (l *listener[K]) OnUpdate(oldObj, newObj any) {
	// A key may have moved: the subscribers of both objects hear of it.
	l.router.deliver(l, oldObj, newObj, func(h cache.ResourceEventHandler) { h.OnUpdate(oldObj, newObj) })
}

func (l *listener[K]) OnDelete(obj any) {
	l.router.deliver(l, nil, obj, func(h cache.ResourceEventHandler) { h.OnDelete(obj) })
}

// deliver calls call once for each subscriber of a key that oldObj (if not
// nil) or obj names.
func (r *Router[K]) deliver(l *listener[K], oldObj, obj any, call func(cache.ResourceEventHandler)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.listener != l {
		// A removed handler with an event in flight.
		return
	}
	var buf [4]*Subscription[K]
	called := buf[:0]
	visit := func(key K) {
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
