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
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/provfleet/provfleet/internal/polltest"
)

// newTestLimiter returns a budget on a fake clock with an empty bucket, so
// every token comes from stepping the clock.
func newTestLimiter(qps float32, burst int) (*Limiter, *testingclock.FakeClock) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := newWithClock(qps, burst, clk)
	l.bucket.AllowN(clk.Now(), burst)
	return l, clk
}

// waiting returns how many callers wait for a token.
func (l *Limiter) waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, q := range l.queues {
		n += len(q)
	}
	return n
}

func (l *Limiter) isDispatching() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dispatching
}

// enqueue starts one caller per tenant name, in order, each only after the
// previous is queued or served, and returns a channel that yields the tenant
// of each caller as it is granted.
func enqueue(t *testing.T, l *Limiter, tenants []string) <-chan string {
	t.Helper()
	granted := make(chan string, len(tenants))
	var returned atomic.Int64
	for _, tenant := range tenants {
		before := l.waiting() + int(returned.Load())
		go func() {
			defer returned.Add(1)
			if err := l.Tenant(tenant).Wait(context.Background()); err != nil {
				granted <- "error: " + err.Error()
				return
			}
			granted <- tenant
		}()
		polltest.Eventually(t, "the waiter queued or returned", func() bool { return l.waiting()+int(returned.Load()) == before+1 })
	}
	return granted
}

// step moves the fake clock once the dispatcher waits for a refill (or has
// ended) and returns how many waiters were granted as a result.
func step(t *testing.T, l *Limiter, clk *testingclock.FakeClock, d time.Duration) int {
	t.Helper()
	quiet := func() bool { return clk.HasWaiters() || !l.isDispatching() }
	polltest.Eventually(t, "the dispatcher waiting for a refill or ended", quiet)
	before := l.waiting()
	clk.Step(d)
	polltest.Eventually(t, "the dispatcher waiting for a refill or ended", quiet)
	return before - l.waiting()
}

func repeat(tenant string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = tenant
	}
	return out
}

func TestLimiterLeastRecentUsageFirst(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := map[string]struct {
		usage   map[string]float64
		waiters []string
		want    []string
	}{
		"one tenant keeps arrival order": {
			waiters: []string{"a", "a", "a"},
			want:    []string{"a", "a", "a"},
		},
		"the least used tenant goes first": {
			usage:   map[string]float64{"a": 5, "b": 2},
			waiters: []string{"a", "b", "c"},
			want:    []string{"c", "b", "a"},
		},
		"a backlog does not delay another tenant's first request": {
			waiters: append(repeat("noisy", 100), "quiet"),
			want:    []string{"noisy", "quiet", "noisy", "noisy"},
		},
		"a busy tenant's backlog does not delay a light tenant": {
			usage:   map[string]float64{"busy": 10},
			waiters: []string{"busy", "busy", "light", "light"},
			want:    []string{"light", "light", "busy", "busy"},
		},
		"equal usage alternates in arrival order": {
			waiters: []string{"a", "a", "a", "b", "c", "c"},
			want:    []string{"a", "b", "c", "a", "c", "a"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// One token a second; usages stay within the burst, so no tenant
			// has to leave tokens and each second grants one.
			l, clk := newTestLimiter(1, 20)
			defer l.Stop()
			for tenant, count := range tc.usage {
				l.usage[tenant] = usage{count: count, at: clk.Now()}
			}
			granted := enqueue(t, l, tc.waiters)
			var got []string
			for range tc.want {
				if n := step(t, l, clk, time.Second); n != 1 {
					t.Fatalf("one token granted %d waiters", n)
				}
				got = append(got, <-granted)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("grant order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLimiterBackloggedTenantAloneGetsTheFullRate(t *testing.T) {
	defer goleak.VerifyNone(t)
	const qps, burst = 10, 20
	l, clk := newTestLimiter(qps, burst)
	defer l.Stop()
	enqueue(t, l, repeat("busy", 400))

	var warmup, steady int
	for range 30 * qps {
		warmup += step(t, l, clk, time.Second/qps)
	}
	for range 5 * qps {
		steady += step(t, l, clk, time.Second/qps)
	}
	// While its usage grows past a burst the tenant leaves the bucket to fill
	// up, all but one token; then every refill goes to the backlog.
	got := map[string]int{"first 30s": warmup, "next 5s": steady, "left in the bucket": int(l.bucket.TokensAt(clk.Now()))}
	want := map[string]int{"first 30s": 30*qps - (burst - 1), "next 5s": 5 * qps, "left in the bucket": burst - 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tokens granted to a backlogged tenant alone (-want +got):\n%s", diff)
	}
}

func TestLimiterNewTenantGetsItsBurstNextToABacklog(t *testing.T) {
	defer goleak.VerifyNone(t)
	const qps, burst = 10, 20
	l, clk := newTestLimiter(qps, burst)
	defer l.Stop()
	enqueue(t, l, repeat("busy", 400))
	for range 30 * qps {
		step(t, l, clk, time.Second/qps)
	}

	// The clock stands still: these requests are served from the tokens the
	// backlog left, all but one of the burst.
	for i := range burst - 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := l.Tenant("light").Wait(ctx)
		cancel()
		if err != nil {
			t.Fatalf("request %d of a newly active tenant waited for a refill: %v", i, err)
		}
	}
	// Then it waits like everyone, but only for the next token.
	granted := enqueue(t, l, []string{"light"})
	if n := step(t, l, clk, time.Second/qps); n != 1 {
		t.Fatalf("one token granted %d waiters", n)
	}
	if got := <-granted; got != "light" {
		t.Errorf("the next token went to %q, want light", got)
	}
}

func TestLimiterCancelledWaiterLeavesTheQueue(t *testing.T) {
	defer goleak.VerifyNone(t)
	l, clk := newTestLimiter(1, 2)
	defer l.Stop()

	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- l.Tenant("impatient").Wait(ctx) }()
	polltest.Eventually(t, "one waiter", func() bool { return l.waiting() == 1 })
	granted := enqueue(t, l, []string{"patient"})
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait returned %v, want context.Canceled", err)
	}
	step(t, l, clk, time.Second)
	if got := <-granted; got != "patient" {
		t.Errorf("token went to %q, want patient", got)
	}

	gaveUp2 := make(chan error, 1)
	ctx, cancel = context.WithCancel(context.Background())
	go func() { gaveUp2 <- l.Tenant("impatient").Wait(ctx) }()
	polltest.Eventually(t, "one waiter", func() bool { return l.waiting() == 1 })
	cancel()
	if err := <-gaveUp2; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait returned %v, want context.Canceled", err)
	}
	// Nobody waits any more: the dispatcher ends without a refill.
	polltest.Eventually(t, "the dispatcher ended", func() bool { return !l.isDispatching() })
}

func TestLimiterStopFailsWaiters(t *testing.T) {
	defer goleak.VerifyNone(t)
	l, _ := newTestLimiter(1, 2)
	granted := enqueue(t, l, []string{"a", "b"})
	l.Stop()
	for range 2 {
		if got := <-granted; got != "error: "+errStopped.Error() {
			t.Errorf("waiter got %q after Stop, want the stopped error", got)
		}
	}
	if err := l.Tenant("c").Wait(context.Background()); !errors.Is(err, errStopped) {
		t.Errorf("Wait after Stop returned %v, want %v", err, errStopped)
	}
}

func TestLimiterTryAcceptNeverJumpsTheQueue(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := map[string]struct {
		usage   map[string]float64
		waiters []string
		want    bool
	}{
		"nobody waits": {want: true},
		"someone waits": {
			// Five tokens are left, but other must leave all but one.
			usage:   map[string]float64{"other": 40},
			waiters: []string{"other"},
			want:    false,
		},
		"nobody waits but the caller must leave the tokens": {
			usage: map[string]float64{"me": 40},
			want:  false,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l, clk := newTestLimiter(1, 20)
			clk.Step(5 * time.Second)
			for tenant, count := range tc.usage {
				l.usage[tenant] = usage{count: count, at: clk.Now()}
			}
			granted := enqueue(t, l, tc.waiters)
			if got := l.Tenant("me").TryAccept(); got != tc.want {
				t.Errorf("TryAccept() = %v, want %v", got, tc.want)
			}
			l.Stop()
			for range tc.waiters {
				<-granted
			}
		})
	}
}

func TestLimiterTenantsShareOneBucket(t *testing.T) {
	defer goleak.VerifyNone(t)
	// One token in a thousand seconds after the burst: only the burst is spent.
	l := New(0.001, 4)
	defer l.Stop()
	for i := range 4 {
		if err := l.Tenant(fmt.Sprint("t", i%2)).Wait(context.Background()); err != nil {
			t.Fatalf("Wait %d within the burst: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := l.Tenant("t2").Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a third tenant's Wait after the shared burst returned %v, want to wait past its deadline", err)
	}
	if got, want := l.Tenant("t0").QPS(), float32(0.001); got != want {
		t.Errorf("QPS() = %v, want %v", got, want)
	}
}

// waitLog keeps what a WaitObserver heard.
type waitLog struct {
	mu    sync.Mutex
	waits []string
}

func (w *waitLog) observe(tenant string, waited time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waits = append(w.waits, fmt.Sprintf("%s %v", tenant, waited))
}

func (w *waitLog) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.waits)
}

// TestLimiterObservesWaits: every Wait is told with how long it waited,
// those granted at once, those granted later and those that gave up.
func TestLimiterObservesWaits(t *testing.T) {
	defer goleak.VerifyNone(t)
	l, clk := newTestLimiter(1, 2)
	defer l.Stop()
	log := &waitLog{}
	l.ObserveWaits(log.observe)

	granted := enqueue(t, l, []string{"slow"})
	if n := step(t, l, clk, 1500*time.Millisecond); n != 1 {
		t.Fatalf("%d waiters granted after 1.5s, want 1", n)
	}
	<-granted
	// Half a token is left: the next Wait of this tenant is granted at once
	// after another half second.
	clk.Step(500 * time.Millisecond)
	if err := l.Tenant("quick").Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- l.Tenant("impatient").Wait(ctx) }()
	polltest.Eventually(t, "one waiter", func() bool { return l.waiting() == 1 })
	clk.Step(250 * time.Millisecond)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait returned %v, want context.Canceled", err)
	}

	want := []string{"slow 1.5s", "quick 0s", "impatient 250ms"}
	if diff := cmp.Diff(want, log.get()); diff != "" {
		t.Errorf("waits observed (-want +got):\n%s", diff)
	}
	l.ObserveWaits(nil)
	clk.Step(time.Second)
	if err := l.Tenant("unheard").Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(log.get()); got != len(want) {
		t.Errorf("%d waits observed after ObserveWaits(nil), want %d", got, len(want))
	}
}
