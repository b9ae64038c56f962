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

package fairlimit

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// errStopped is returned to callers still waiting when the limiter is
// stopped. The text names the fleet's budget, the one user of this package.
var errStopped = errors.New("fleet API client budget stopped")

// forgetAfter is how often tenants whose recent usage decayed to nothing are
// dropped, so a deleted tenant is not remembered for ever.
const forgetAfter = time.Minute

// Limiter shares one API client budget (a token bucket) between tenants.
//
// Each tenant's recent usage is a count of its tokens that decays with a time
// constant of twice burst/qps, so a tenant backlogged at the full rate
// approaches a usage of two bursts. Waiting tenants are served least recent
// usage first (arrival order among equals), so a tenant that used little never
// waits behind a busy one for more than one token.
//
// The burst belongs to tenants that were quiet: a tenant may use up to one
// burst's worth freely, and beyond that must leave one token in the bucket per
// token of excess usage, up to all but one. A backlogged tenant alone still
// gets the full refill rate, but the bucket stays full, so a tenant that
// becomes active next to it gets its own burst at API latency, as it would
// alone, instead of sharing the refill rate with the backlog.
type Limiter struct {
	bucket *rate.Limiter
	clock  clock.Clock
	// window is the decay time constant of usage, in seconds.
	window float64
	burst  float64

	ctx    context.Context
	cancel context.CancelFunc
	// wake tells the dispatcher that the waiters changed while it waits for
	// tokens.
	wake chan struct{}

	mu sync.Mutex
	// queues holds the waiters of each tenant in arrival order.
	queues map[string][]*waiter
	// ring lists the tenants with waiters; among equal usage the first is
	// served next.
	ring        []string
	usage       map[string]usage
	forgotAt    time.Time
	dispatching bool
	stopped     bool
	dispatcher  sync.WaitGroup

	// observer, if set, hears how long each Wait or Accept waited.
	observer atomic.Pointer[WaitObserver]
}

// WaitObserver hears, for each Wait or Accept, the tenant and how long it
// waited for its token, whether it got one or gave up.
type WaitObserver func(tenant string, waited time.Duration)

type waiter struct {
	done chan struct{}
	err  error
}

// usage is a tenant's decayed count of tokens as of at.
type usage struct {
	count float64
	at    time.Time
}

// New returns a budget of qps requests a second with the given burst, as
// flowcontrol.NewTokenBucketRateLimiter does for a single client.
func New(qps float32, burst int) *Limiter {
	return newWithClock(qps, burst, clock.RealClock{})
}

func newWithClock(qps float32, burst int, clk clock.Clock) *Limiter {
	ctx, cancel := context.WithCancel(context.Background())
	return &Limiter{
		bucket:   rate.NewLimiter(rate.Limit(qps), burst),
		clock:    clk,
		window:   2 * float64(burst) / float64(qps),
		burst:    float64(burst),
		ctx:      ctx,
		cancel:   cancel,
		wake:     make(chan struct{}, 1),
		queues:   map[string][]*waiter{},
		usage:    map[string]usage{},
		forgotAt: clk.Now(),
	}
}

// Tenant returns the view of the budget that one tenant's clients use as their
// rest.Config RateLimiter. Stopping a view does nothing: the budget is shared
// and is stopped with Limiter.Stop.
func (l *Limiter) Tenant(name string) *TenantLimiter {
	return &TenantLimiter{limiter: l, name: name}
}

// Stop fails every pending and future Wait and returns once the dispatcher
// ended.
func (l *Limiter) Stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	l.cancel()
	l.dispatcher.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, tenant := range l.ring {
		for _, w := range l.queues[tenant] {
			w.err = errStopped
			close(w.done)
		}
		delete(l.queues, tenant)
	}
	l.ring = nil
}

// ObserveWaits has observe told of every later Wait and Accept; nil stops
// telling. Waits granted at once are told too, so that the share of requests
// that waited shows.
func (l *Limiter) ObserveWaits(observe WaitObserver) {
	if observe == nil {
		l.observer.Store(nil)
		return
	}
	l.observer.Store(&observe)
}

func (l *Limiter) wait(ctx context.Context, tenant string) error {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return errStopped
	}
	// Registered first, so it runs once l.mu is released on every path.
	defer l.observeSince(tenant, l.clock.Now())
	if len(l.ring) == 0 && l.take(tenant, l.clock.Now()) {
		l.mu.Unlock()
		return nil
	}
	w := &waiter{done: make(chan struct{})}
	if len(l.queues[tenant]) == 0 {
		l.ring = append(l.ring, tenant)
	}
	l.queues[tenant] = append(l.queues[tenant], w)
	if l.dispatching {
		l.signal()
	} else {
		l.dispatching = true
		l.dispatcher.Add(1)
		go l.dispatch()
	}
	l.mu.Unlock()

	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.remove(tenant, w) {
		l.signal()
		return ctx.Err()
	}
	// Granted (or stopped) while we gave up: the token is spent either way.
	return w.err
}

// observeSince tells the observer, if any, that tenant waited since start.
func (l *Limiter) observeSince(tenant string, start time.Time) {
	if observe := l.observer.Load(); observe != nil {
		(*observe)(tenant, l.clock.Since(start))
	}
}

// signal wakes the dispatcher if it waits for tokens.
func (l *Limiter) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// remove drops a waiter that gave up; it reports false when the waiter was no
// longer queued. Callers hold l.mu.
func (l *Limiter) remove(tenant string, w *waiter) bool {
	q := l.queues[tenant]
	for i := range q {
		if q[i] != w {
			continue
		}
		q = append(q[:i], q[i+1:]...)
		if len(q) > 0 {
			l.queues[tenant] = q
			return true
		}
		delete(l.queues, tenant)
		for j, t := range l.ring {
			if t == tenant {
				l.ring = append(l.ring[:j], l.ring[j+1:]...)
				break
			}
		}
		return true
	}
	return false
}

// recent returns the tenant's usage decayed to now. Callers hold l.mu.
func (l *Limiter) recent(tenant string, now time.Time) float64 {
	u, ok := l.usage[tenant]
	if !ok {
		return 0
	}
	return u.count * math.Exp(-now.Sub(u.at).Seconds()/l.window)
}

// kept returns how many tokens the tenant must leave in the bucket. Callers
// hold l.mu.
func (l *Limiter) kept(tenant string, now time.Time) float64 {
	return min(max(l.recent(tenant, now)-l.burst, 0), max(l.burst-1, 0))
}

// take spends a token for the tenant if its share of the bucket has one.
// Callers hold l.mu.
func (l *Limiter) take(tenant string, now time.Time) bool {
	if l.bucket.TokensAt(now) < 1+l.kept(tenant, now) || !l.bucket.AllowN(now, 1) {
		return false
	}
	l.usage[tenant] = usage{count: l.recent(tenant, now) + 1, at: now}
	if now.Sub(l.forgotAt) >= forgetAfter {
		l.forgotAt = now
		for t := range l.usage {
			if l.recent(t, now) < 0.01 {
				delete(l.usage, t)
			}
		}
	}
	return true
}

// next returns the index in the ring of the waiting tenant with the least
// recent usage. Callers hold l.mu and ensure the ring is not empty.
func (l *Limiter) next(now time.Time) int {
	best, least := 0, math.Inf(1)
	for i, tenant := range l.ring {
		if u := l.recent(tenant, now); u < least {
			best, least = i, u
		}
	}
	return best
}

// dispatch hands tokens to waiters, least recent usage first, while anyone
// waits.
func (l *Limiter) dispatch() {
	defer l.dispatcher.Done()
	for {
		l.mu.Lock()
		if len(l.ring) == 0 || l.stopped {
			l.dispatching = false
			l.mu.Unlock()
			return
		}
		now := l.clock.Now()
		i := l.next(now)
		tenant := l.ring[i]
		if l.take(tenant, now) {
			l.grant(i)
			l.mu.Unlock()
			continue
		}
		// The least used waiter has the fewest tokens to leave, so nobody gets
		// a token before it does.
		missing := 1 + l.kept(tenant, now) - l.bucket.TokensAt(now)
		l.mu.Unlock()

		l.sleep(missing)
	}
}

// sleep returns once the bucket refilled the missing tokens, the waiters
// changed or the budget stopped.
func (l *Limiter) sleep(missing float64) {
	var refilled <-chan time.Time
	if limit := float64(l.bucket.Limit()); limit > 0 {
		timer := l.clock.NewTimer(time.Duration(math.Ceil(missing / limit * float64(time.Second))))
		defer timer.Stop()
		refilled = timer.C()
	}
	select {
	case <-refilled:
	case <-l.wake:
	case <-l.ctx.Done():
	}
}

// grant gives a token to the first waiter of the tenant at index i of the
// ring and moves that tenant to the back if it still waits. Callers hold l.mu.
func (l *Limiter) grant(i int) {
	tenant := l.ring[i]
	l.ring = append(l.ring[:i], l.ring[i+1:]...)
	q := l.queues[tenant]
	close(q[0].done)
	if len(q) == 1 {
		delete(l.queues, tenant)
		return
	}
	l.queues[tenant] = q[1:]
	l.ring = append(l.ring, tenant)
}

// TenantLimiter is one tenant's share of a Limiter: a flowcontrol.RateLimiter
// whose requests are counted against the tenant's recent usage.
type TenantLimiter struct {
	limiter *Limiter
	name    string
}

var _ flowcontrol.RateLimiter = &TenantLimiter{}

// TryAccept takes a token only when no tenant is waiting, so it never jumps the
// queue.
func (t *TenantLimiter) TryAccept() bool {
	t.limiter.mu.Lock()
	defer t.limiter.mu.Unlock()
	if t.limiter.stopped || len(t.limiter.ring) > 0 {
		return false
	}
	return t.limiter.take(t.name, t.limiter.clock.Now())
}

// Accept waits for a token, as long as it takes; it returns without one once
// the limiter is stopped.
func (t *TenantLimiter) Accept() {
	_ = t.limiter.wait(context.Background(), t.name)
}

// Wait waits for a token until ctx ends or the limiter is stopped.
func (t *TenantLimiter) Wait(ctx context.Context) error {
	return t.limiter.wait(ctx, t.name)
}

// QPS returns the rate of the whole budget, not the tenant's share of it.
func (t *TenantLimiter) QPS() float32 {
	return float32(t.limiter.bucket.Limit())
}

// Stop does nothing: other tenants share the budget.
func (t *TenantLimiter) Stop() {}
