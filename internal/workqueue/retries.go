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

package workqueue

import (
	"sync"
	"time"
)

// Retries tracks the failures of one kind of item across the queues that
// follow one another (one per period of leadership): its rate limiter counts
// them, and each failing item remembers the object version it failed at, so
// that events for that same version (resyncs included) neither reset its
// backoff nor revive it once given up.
type Retries[K comparable] struct {
	limiter *RetryLimiter[K]

	mu    sync.Mutex
	items map[K]retryEntry
}

type retryEntry struct {
	version string
	gaveUp  bool
	retryAt time.Time
}

// NewRetries returns a tracker whose rate limiter has limits l.
func NewRetries[K comparable](l RateLimits) *Retries[K] {
	return &Retries[K]{limiter: NewRetryLimiter[K](l), items: map[K]retryEntry{}}
}

// Limiter is the rate limiter counting the failures, for the queues that
// retry these items.
func (r *Retries[K]) Limiter() *RetryLimiter[K] { return r.limiter }

// Admit reports whether an event for key at version must be queued. An event
// for a newer version resets the item's failures.
func (r *Retries[K]) Admit(key K, version string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	entry, ok := r.items[key]
	if !ok {
		return true
	}
	if entry.version == version {
		return false
	}
	delete(r.items, key)
	r.limiter.Forget(key)
	return true
}

// Forget drops every failure of key, when it succeeded or its object was
// deleted.
func (r *Retries[K]) Forget(key K) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.items, key)
	r.limiter.Forget(key)
}

// Failed records one more failure of key at version and either queues it in
// q again after its backoff or, once it was retried threshold times (0:
// never), gives up. The threshold counts retries, as the seed's does, so an
// item is tried threshold+1 times.
func (r *Retries[K]) Failed(q *Queue[K], key K, version string, threshold int) (gaveUp bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if threshold > 0 && r.limiter.NumRequeues(key) >= threshold {
		r.items[key] = retryEntry{version: version, gaveUp: true}
		return true
	}
	delay := r.limiter.When(key)
	r.items[key] = retryEntry{version: version, retryAt: time.Now().Add(delay)}
	q.AddAfter(key, delay)
	return false
}

// Requeue queues in q every item still backing off at its due time, for a
// queue that replaces one that was shut down.
func (r *Retries[K]) Requeue(q *Queue[K]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, entry := range r.items {
		if !entry.gaveUp {
			q.AddAfter(key, time.Until(entry.retryAt))
		}
	}
}

// Revive turns given-up items below a new threshold back into backing-off
// ones, due now.
func (r *Retries[K]) Revive(threshold int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, entry := range r.items {
		if entry.gaveUp && (threshold == 0 || r.limiter.NumRequeues(key) < threshold) {
			// The revived try is a retry: it counts, though it is due now.
			r.limiter.When(key)
			r.items[key] = retryEntry{version: entry.version, retryAt: time.Now()}
		}
	}
}

// Failing reports whether key failed since it last succeeded or changed.
func (r *Retries[K]) Failing(key K) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.items[key]
	return ok
}

// GaveUp reports whether key was given up on at its current version.
func (r *Retries[K]) GaveUp(key K) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.items[key].gaveUp
}
