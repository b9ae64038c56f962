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

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
)

// RateLimits are the parameters of a RetryLimiter.
type RateLimits struct {
	// Exponential doubles the per-item delay after each failure, from
	// InitialDelay up to MaxDelay; otherwise every retry waits InitialDelay.
	Exponential  bool
	InitialDelay time.Duration
	MaxDelay     time.Duration
	// QPS and Burst bound the overall rate of the items delayed.
	QPS   float64
	Burst int
}

// RetryLimiter is the one rate limiter of a work queue: a per-item backoff
// (exponential or fixed, from the initial delay up to the maximum) combined
// with an overall token bucket. Unlike client-go's limiters, its parameters can
// change while the queue runs, keeping every item's failure count.
type RetryLimiter[T comparable] struct {
	bucket workqueue.TypedBucketRateLimiter[T]

	mu          sync.Mutex
	failures    map[T]int
	exponential bool
	initial     time.Duration
	max         time.Duration
}

var _ workqueue.TypedRateLimiter[string] = (*RetryLimiter[string])(nil)

// NewRetryLimiter returns a limiter with limits l.
func NewRetryLimiter[T comparable](l RateLimits) *RetryLimiter[T] {
	r := &RetryLimiter[T]{
		bucket:   workqueue.TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(rate.Limit(l.QPS), l.Burst)},
		failures: map[T]int{},
	}
	r.Retune(l)
	return r
}

// Retune applies new limits; the next When uses them.
func (r *RetryLimiter[T]) Retune(l RateLimits) {
	r.bucket.SetLimit(rate.Limit(l.QPS))
	r.bucket.SetBurst(l.Burst)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exponential = l.Exponential
	r.initial = l.InitialDelay
	r.max = l.MaxDelay
}

// When records one more failure of item and returns how long it must wait.
func (r *RetryLimiter[T]) When(item T) time.Duration {
	r.mu.Lock()
	n := r.failures[item]
	r.failures[item] = n + 1
	delay := r.initial
	if r.exponential {
		// Doubling stops at the cap, so a long failure streak cannot overflow.
		for i := 0; i < n && delay < r.max; i++ {
			delay *= 2
		}
	}
	delay = min(delay, r.max)
	r.mu.Unlock()
	return max(delay, r.bucket.When(item))
}

// NumRequeues is the number of failures of item since it was last forgotten.
func (r *RetryLimiter[T]) NumRequeues(item T) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures[item]
}

// Forget clears the failures of item.
func (r *RetryLimiter[T]) Forget(item T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failures, item)
}
