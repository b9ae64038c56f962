package fleet

import (
	"context"
	"errors"
	"sync"

	"k8s.io/client-go/util/flowcontrol"
)

// errLimiterStopped is returned to callers still waiting when the fleet budget
// is stopped.
var errLimiterStopped = errors.New("fleet API client budget stopped")

// FairLimiter shares one API client budget (a client-go token bucket) between
// tenants. Tokens go round-robin to the tenants that are waiting, one token per
// tenant per round, so a tenant with a long backlog cannot delay another
// tenant's first request by more than one token per waiting tenant.
type FairLimiter struct {
	source flowcontrol.RateLimiter

	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// queues holds the waiters of each tenant in arrival order.
	queues map[string][]*waiter
	// ring lists the tenants with waiters in the order they are served next.
	ring        []string
	dispatching bool
	stopped     bool
	dispatcher  sync.WaitGroup
}

type waiter struct {
	done chan struct{}
	err  error
}

// NewFairLimiter returns a fleet budget of qps requests a second with the given
// burst.
func NewFairLimiter(qps float32, burst int) *FairLimiter {
	return newFairLimiter(flowcontrol.NewTokenBucketRateLimiter(qps, burst))
}

func newFairLimiter(source flowcontrol.RateLimiter) *FairLimiter {
	ctx, cancel := context.WithCancel(context.Background())
	return &FairLimiter{
		source: source,
		ctx:    ctx,
		cancel: cancel,
		queues: map[string][]*waiter{},
	}
}

// Tenant returns the view of the budget that one tenant's clients use as their
// rest.Config RateLimiter. Stopping a view does nothing: the budget belongs to
// the fleet and is stopped with FairLimiter.Stop.
func (l *FairLimiter) Tenant(name string) flowcontrol.RateLimiter {
	return &tenantLimiter{fleet: l, name: name}
}

// Stop fails every pending and future Wait and returns once the dispatcher
// ended.
func (l *FairLimiter) Stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	l.cancel()
	l.dispatcher.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, tenant := range l.ring {
		for _, w := range l.queues[tenant] {
			w.err = errLimiterStopped
			close(w.done)
		}
		delete(l.queues, tenant)
	}
	l.ring = nil
	l.source.Stop()
}

func (l *FairLimiter) wait(ctx context.Context, tenant string) error {
	w := &waiter{done: make(chan struct{})}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return errLimiterStopped
	}
	if len(l.queues[tenant]) == 0 {
		l.ring = append(l.ring, tenant)
	}
	l.queues[tenant] = append(l.queues[tenant], w)
	if !l.dispatching {
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
		return ctx.Err()
	}
	// Granted (or stopped) while we gave up: the token is spent either way.
	return w.err
}

// remove drops a waiter that gave up; it reports false when the waiter was no
// longer queued. Callers hold l.mu.
func (l *FairLimiter) remove(tenant string, w *waiter) bool {
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

// dispatch takes tokens from the source while anyone waits and hands each to
// the next tenant in the ring.
func (l *FairLimiter) dispatch() {
	defer l.dispatcher.Done()
	for {
		l.mu.Lock()
		if len(l.ring) == 0 || l.stopped {
			l.dispatching = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()

		if err := l.source.Wait(l.ctx); err != nil {
			l.mu.Lock()
			l.dispatching = false
			l.mu.Unlock()
			return
		}

		l.mu.Lock()
		l.grantNext()
		l.mu.Unlock()
	}
}

// grantNext gives one token to the first waiter of the tenant at the head of
// the ring and moves that tenant to the back if it still waits. Callers hold
// l.mu.
func (l *FairLimiter) grantNext() {
	if len(l.ring) == 0 {
		return
	}
	tenant := l.ring[0]
	l.ring = l.ring[1:]
	q := l.queues[tenant]
	close(q[0].done)
	if len(q) == 1 {
		delete(l.queues, tenant)
		return
	}
	l.queues[tenant] = q[1:]
	l.ring = append(l.ring, tenant)
}

type tenantLimiter struct {
	fleet *FairLimiter
	name  string
}

var _ flowcontrol.RateLimiter = &tenantLimiter{}

// TryAccept takes a token only when no tenant is waiting, so it never jumps the
// queue.
func (t *tenantLimiter) TryAccept() bool {
	t.fleet.mu.Lock()
	defer t.fleet.mu.Unlock()
	if t.fleet.stopped || len(t.fleet.ring) > 0 {
		return false
	}
	return t.fleet.source.TryAccept()
}

func (t *tenantLimiter) Accept() {
	_ = t.fleet.wait(context.Background(), t.name)
}

func (t *tenantLimiter) Wait(ctx context.Context) error {
	return t.fleet.wait(ctx, t.name)
}

func (t *tenantLimiter) QPS() float32 {
	return t.fleet.source.QPS()
}

// Stop does nothing: other tenants share the budget.
func (t *tenantLimiter) Stop() {}

// eventBudget is the QPS and burst of the fleet's Event writes: a token bucket
// of their own, apart from the FairLimiter, since Events are written by one
// sink for every tenant and must never delay anyone's provisioning.
func eventBudget(settings Settings) (float32, int) {
	qps, burst := settings.EventQPS, settings.EventBurst
	if qps <= 0 {
		qps = settings.QPS / 5
	}
	if burst <= 0 {
		burst = max(1, settings.Burst/2)
	}
	return qps, burst
}
