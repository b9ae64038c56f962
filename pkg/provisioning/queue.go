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
	"context"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// retries tracks the failures of one kind of item across terms: its rate
// limiter counts them, and each failing item remembers the object version it
// failed at, so that events for that same version (resyncs included) neither
// reset its backoff nor revive it once given up.
type retries[K comparable] struct {
	limiter *retryLimiter[K]

	mu    sync.Mutex
	items map[K]retryEntry
}

type retryEntry struct {
	version string
	gaveUp  bool
	retryAt time.Time
}

func newRetries[K comparable](r RetryConfig) *retries[K] {
	return &retries[K]{limiter: newRetryLimiter[K](r), items: map[K]retryEntry{}}
}

// admit reports whether an event for key at version must be queued. An event
// for a newer version resets the item's failures.
func (r *retries[K]) admit(key K, version string) bool {
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

// succeeded forgets every failure of key.
func (r *retries[K]) succeeded(key K) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.items, key)
	r.limiter.Forget(key)
}

// failed records one more failure of key at version and either queues it
// again after its backoff or, once it was retried threshold times (0: never),
// gives up. The threshold counts retries, as the seed's does, so an item is
// tried threshold+1 times.
func (r *retries[K]) failed(q *workQueue[K], key K, version string, threshold int) (gaveUp bool) {
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

// requeue queues every item still backing off at its due time, for a queue
// that replaces one that was shut down.
func (r *retries[K]) requeue(q *workQueue[K]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, entry := range r.items {
		if !entry.gaveUp {
			q.AddAfter(key, time.Until(entry.retryAt))
		}
	}
}

// revive turns given-up items below a new threshold back into backing-off
// ones, due now.
func (r *retries[K]) revive(threshold int) {
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

// failing reports whether key failed since it last succeeded or changed.
func (r *retries[K]) failing(key K) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.items[key]
	return ok
}

// forget drops key, e.g. when its object was deleted.
func (r *retries[K]) forget(key K) {
	r.succeeded(key)
}

// loop is the work of one queue: its items, their retries and how to sync one.
type loop[K comparable] struct {
	queue     *workQueue[K]
	retries   *retries[K]
	threshold func() int
	paused    func() bool
	// sync handles one item and returns the object version it ended at.
	sync func(ctx context.Context, key K) (string, error)
}

// process handles one item of the queue.
func (l *loop[K]) process(ctx context.Context, key K) {
	// A stopping or paused controller leaves its items untouched.
	if ctx.Err() != nil || l.paused() {
		return
	}
	version, err := l.sync(ctx, key)
	if err == nil {
		l.retries.succeeded(key)
		return
	}
	if ctx.Err() != nil {
		return
	}
	if l.retries.failed(l.queue, key, version, l.threshold()) {
		utilruntime.HandleErrorWithContext(ctx, err, "Giving up until the object changes", "item", key, "failures", l.retries.limiter.NumRequeues(key))
	} else {
		utilruntime.HandleErrorWithContext(ctx, err, "Will retry", "item", key, "failures", l.retries.limiter.NumRequeues(key))
	}
}
