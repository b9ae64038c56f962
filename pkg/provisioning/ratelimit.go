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
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
)

// retryLimiter is the one rate limiter of a work queue: a per-item backoff
// (exponential or fixed, from the initial delay up to the maximum) combined
// with an overall token bucket. Unlike client-go's limiters, its parameters can
// change while the queue runs, keeping every item's failure count.
type retryLimiter[T comparable] struct {
	bucket workqueue.TypedBucketRateLimiter[T]

	mu          sync.Mutex
	failures    map[T]int
	exponential bool
	initial     time.Duration
	max         time.Duration
}

var _ workqueue.TypedRateLimiter[string] = (*retryLimiter[string])(nil)

func newRetryLimiter[T comparable](r RetryConfig) *retryLimiter[T] {
	l := &retryLimiter[T]{
		bucket:   workqueue.TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(rate.Limit(r.QPS), r.Burst)},
		failures: map[T]int{},
	}
	l.configure(r)
	return l
}

// configure applies new parameters; the next When uses them.
func (l *retryLimiter[T]) configure(r RetryConfig) {
	l.bucket.Limiter.SetLimit(rate.Limit(r.QPS))
	l.bucket.Limiter.SetBurst(r.Burst)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.exponential = r.ExponentialBackoff
	l.initial = r.InitialDelay
	l.max = r.MaxDelay
}

// When records one more failure of item and returns how long it must wait.
func (l *retryLimiter[T]) When(item T) time.Duration {
	l.mu.Lock()
	n := l.failures[item]
	l.failures[item] = n + 1
	delay := l.initial
	if l.exponential {
		// Doubling stops at the cap, so a long failure streak cannot overflow.
		for i := 0; i < n && delay < l.max; i++ {
			delay *= 2
		}
	}
	delay = min(delay, l.max)
	l.mu.Unlock()
	return max(delay, l.bucket.When(item))
}

func (l *retryLimiter[T]) NumRequeues(item T) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures[item]
}

func (l *retryLimiter[T]) Forget(item T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, item)
}
