package fleet

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/util/wait"
)

// handTokens is a token source that grants exactly the tokens the test hands
// out, so the order of grants is deterministic.
type handTokens struct {
	tokens chan struct{}
	free   bool
}

func (h *handTokens) TryAccept() bool { return h.free }
func (h *handTokens) Accept()         {}
func (h *handTokens) Stop()           {}
func (h *handTokens) QPS() float32    { return 1 }
func (h *handTokens) Wait(ctx context.Context) error {
	select {
	case <-h.tokens:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waiting returns how many callers wait for a token.
func (l *FairLimiter) waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, q := range l.queues {
		n += len(q)
	}
	return n
}

// enqueue starts one waiter per tenant name, in order, each only after the
// previous is queued, and returns a channel that yields the tenant of each
// waiter as it is granted.
func enqueue(t *testing.T, l *FairLimiter, tenants []string) <-chan string {
	t.Helper()
	granted := make(chan string, len(tenants))
	for _, tenant := range tenants {
		before := l.waiting()
		go func() {
			if err := l.Tenant(tenant).Wait(context.Background()); err != nil {
				granted <- "error: " + err.Error()
				return
			}
			granted <- tenant
		}()
		waitFor(t, func() bool { return l.waiting() == before+1 })
	}
	return granted
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("condition never held: %v", err)
	}
}

func repeat(tenant string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = tenant
	}
	return out
}

func TestFairLimiterRoundRobin(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := map[string]struct {
		waiters []string
		want    []string
	}{
		"one tenant keeps arrival order": {
			waiters: []string{"a", "a", "a"},
			want:    []string{"a", "a", "a"},
		},
		"a backlog does not delay another tenant's first request": {
			waiters: append(repeat("noisy", 1000), "quiet"),
			want:    append([]string{"noisy", "quiet"}, repeat("noisy", 999)...),
		},
		"three tenants alternate": {
			waiters: []string{"a", "a", "a", "b", "c", "c"},
			want:    []string{"a", "b", "c", "a", "c", "a"},
		},
		"a tenant that comes back joins the end of the round": {
			waiters: []string{"a", "b", "b", "c"},
			want:    []string{"a", "b", "c", "b"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			source := &handTokens{tokens: make(chan struct{})}
			l := newFairLimiter(source)
			defer l.Stop()
			granted := enqueue(t, l, tc.waiters)
			var got []string
			for range tc.want {
				source.tokens <- struct{}{}
				got = append(got, <-granted)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("grant order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFairLimiterCancelledWaiterLeavesTheQueue(t *testing.T) {
	defer goleak.VerifyNone(t)
	source := &handTokens{tokens: make(chan struct{})}
	l := newFairLimiter(source)
	defer l.Stop()

	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- l.Tenant("impatient").Wait(ctx) }()
	waitFor(t, func() bool { return l.waiting() == 1 })
	granted := enqueue(t, l, []string{"patient"})
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait returned %v, want context.Canceled", err)
	}
	source.tokens <- struct{}{}
	if got := <-granted; got != "patient" {
		t.Errorf("token went to %q, want patient", got)
	}
}

func TestFairLimiterStopFailsWaiters(t *testing.T) {
	defer goleak.VerifyNone(t)
	source := &handTokens{tokens: make(chan struct{})}
	l := newFairLimiter(source)
	granted := enqueue(t, l, []string{"a", "b"})
	l.Stop()
	for range 2 {
		if got := <-granted; got != "error: "+errLimiterStopped.Error() {
			t.Errorf("waiter got %q after Stop, want the stopped error", got)
		}
	}
	if err := l.Tenant("c").Wait(context.Background()); !errors.Is(err, errLimiterStopped) {
		t.Errorf("Wait after Stop returned %v, want %v", err, errLimiterStopped)
	}
}

func TestFairLimiterTryAcceptNeverJumpsTheQueue(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := map[string]struct {
		waiters []string
		want    bool
	}{
		"nobody waits":     {want: true},
		"someone waits":    {waiters: []string{"other"}, want: false},
		"own tenant waits": {waiters: []string{"me"}, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			source := &handTokens{tokens: make(chan struct{}), free: true}
			l := newFairLimiter(source)
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

func TestFairLimiterTenantsShareOneBucket(t *testing.T) {
	defer goleak.VerifyNone(t)
	// One token in a thousand seconds after the burst: only the burst is spent.
	l := NewFairLimiter(0.001, 4)
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

func TestEventBudget(t *testing.T) {
	type budget struct {
		QPS   float32
		Burst int
	}
	tests := map[string]struct {
		settings Settings
		want     budget
	}{
		"derived from the fleet budget": {settings: Settings{QPS: 100, Burst: 200}, want: budget{20, 100}},
		"set":                           {settings: Settings{QPS: 100, Burst: 200, EventQPS: 3, EventBurst: 7}, want: budget{3, 7}},
		"burst of at least one":         {settings: Settings{QPS: 1, Burst: 1}, want: budget{0.2, 1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got budget
			got.QPS, got.Burst = eventBudget(tc.settings)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("eventBudget (-want +got):\n%s", diff)
			}
		})
	}
}
