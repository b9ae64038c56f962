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

package leaderelection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clientgo "k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/internal/eventrouter"
	"github.com/provfleet/provfleet/internal/leaderelection/leasetest"
	"github.com/provfleet/provfleet/internal/polltest"
)

// testLease is the name of the Lease the tests elect on, in "default".
const testLease = "provfleet.io-test"

func electorConfig(identity string, leaseDuration, renewDeadline, retryPeriod time.Duration) Config {
	return Config{
		Lease:         types.NamespacedName{Namespace: "default", Name: testLease},
		Identity:      identity,
		LeaseDuration: leaseDuration,
		RenewDeadline: renewDeadline,
		RetryPeriod:   retryPeriod,
	}
}

// leaders logs the terms of several electors of one Lease, ours and
// client-go's, and whether two ever overlapped.
type leaders struct {
	mu      sync.Mutex
	current map[string]bool
	history []string
	overlap []string
}

func newLeaders() *leaders { return &leaders{current: map[string]bool{}} }

func (l *leaders) start(identity string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for other := range l.current {
		l.overlap = append(l.overlap, other+" and "+identity)
	}
	l.current[identity] = true
	l.history = append(l.history, "+"+identity)
}

func (l *leaders) stop(identity string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.current, identity)
	l.history = append(l.history, "-"+identity)
}

// lead starts a term that lasts until it is stopped.
func (l *leaders) lead(identity string) func(context.Context) func() {
	return func(context.Context) func() {
		l.start(identity)
		return func() { l.stop(identity) }
	}
}

func (l *leaders) leading() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for id := range l.current {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// check fails the test when two terms overlapped or the history differs.
func (l *leaders) check(t *testing.T, want ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.overlap) > 0 {
		t.Errorf("terms overlapped: %q", l.overlap)
	}
	if diff := cmp.Diff(want, l.history); diff != "" {
		t.Errorf("terms (-want +got):\n%s", diff)
	}
}

// newLeaseElector returns the elector of the test Lease; runElector gives it
// its term's work.
func newLeaseElector(client Client, leases *eventrouter.Router[types.NamespacedName], cfg Config,
	onNewLeader func(string), clk clock.Clock) *LeaderElector {
	cfg.Client, cfg.Leases, cfg.Clock = client, leases, clk
	cfg.Callbacks.OnNewLeader = onNewLeader
	return NewLeaderElector(cfg)
}

// runElector runs e with lead as the work of its terms until the returned
// stop is called or the test ends.
func runElector(t *testing.T, e *LeaderElector, lead func(context.Context) func()) (stop func()) {
	t.Helper()
	e.cfg.Callbacks.OnStartedLeading = lead
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

func newLeaseClient() *fake.Clientset {
	client := fake.NewClientset()
	leasetest.EnforceVersions(client)
	return client
}

// startLeaseInformer runs an informer of the Leases of client until the test
// ends.
func startLeaseInformer(t *testing.T, client *fake.Clientset) cache.SharedIndexInformer {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Coordination().V1().Leases().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	return informer
}

func getLease(t *testing.T, client *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	lease, err := client.CoordinationV1().Leases("default").Get(context.Background(), testLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

// failLeaseWrites makes updates of Leases that name one of holders fail
// while it is on.
func failLeaseWrites(client *fake.Clientset, holders ...string) *atomic.Bool {
	var on atomic.Bool
	client.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		lease := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if on.Load() && slices.Contains(holders, ptr.Deref(lease.Spec.HolderIdentity, "")) {
			return true, nil, apierrors.NewInternalError(errors.New("injected failure"))
		}
		return false, nil, nil
	})
	return &on
}

func TestLeaseElectorLeadsRenewsAndReleases(t *testing.T) {
	client := newLeaseClient()
	var mu sync.Mutex
	var changes []string
	var e *LeaderElector
	// The owner reads IsLeader when told of a change: it must agree.
	onChange := func(holder string) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, fmt.Sprintf("%q leading=%v", holder, e.IsLeader()))
	}
	e = newLeaseElector(client, nil, electorConfig("a", 2*time.Second, time.Second, 100*time.Millisecond), onChange, clock.RealClock{})
	l := newLeaders()
	stop := runElector(t, e, l.lead("a"))
	polltest.Eventually(t, "a leading", e.IsLeader)

	acquired := getLease(t, client)
	if diff := cmp.Diff(leasetest.RecordSummary{Holder: "a", LeaseDurationSeconds: 2}, leasetest.Summary(acquired)); diff != "" {
		t.Errorf("acquired Lease (-want +got):\n%s", diff)
	}
	if !acquired.Spec.AcquireTime.Equal(acquired.Spec.RenewTime) {
		t.Errorf("acquired at %v but renewed at %v", acquired.Spec.AcquireTime, acquired.Spec.RenewTime)
	}
	polltest.Eventually(t, "a renewal", func() bool { return getLease(t, client).Spec.RenewTime.After(acquired.Spec.RenewTime.Time) })
	renewed := getLease(t, client)
	if diff := cmp.Diff(leasetest.Summary(acquired), leasetest.Summary(renewed)); diff != "" {
		t.Errorf("renewal changed the record (-acquired +renewed):\n%s", diff)
	}
	if !renewed.Spec.AcquireTime.Equal(acquired.Spec.AcquireTime) {
		t.Errorf("renewal moved the acquire time from %v to %v", acquired.Spec.AcquireTime, renewed.Spec.AcquireTime)
	}
	if err := e.CheckRenewal(); err != nil {
		t.Errorf("renewing leader unhealthy: %v", err)
	}

	stop()
	if e.IsLeader() {
		t.Error("a stopped elector leads")
	}
	if diff := cmp.Diff(leasetest.RecordSummary{LeaseDurationSeconds: 1}, leasetest.Summary(getLease(t, client))); diff != "" {
		t.Errorf("released Lease (-want +got):\n%s", diff)
	}
	l.check(t, "+a", "-a")
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{`"a" leading=true`, `"" leading=false`}, changes); diff != "" {
		t.Errorf("reported holders (-want +got):\n%s", diff)
	}
}

// Three electors, each with its own informer as in three processes, start on
// a missing Lease: one wins, the others wait. A lease of a minute makes the
// release on stop the only way another can take over within the test. A
// leader renews two retry periods before its renew deadline: 2s and 500ms
// leave it a second of slack, so a busy machine does not make it step down.
func TestLeaseElectorsContend(t *testing.T) {
	client := newLeaseClient()
	l := newLeaders()
	stops := map[string]func(){}
	for _, id := range []string{"a", "b", "c"} {
		e := newLeaseElector(client, nil, electorConfig(id, time.Minute, 2*time.Second, 500*time.Millisecond), nil, clock.RealClock{})
		stops[id] = runElector(t, e, l.lead(id))
	}
	polltest.Eventually(t, "one leader", func() bool { return len(l.leading()) == 1 })
	first := l.leading()[0]
	acquired := getLease(t, client)
	for range 2 {
		before := getLease(t, client).Spec.RenewTime.Time
		polltest.Eventually(t, "a renewal", func() bool { return getLease(t, client).Spec.RenewTime.After(before) })
	}
	if diff := cmp.Diff([]string{first}, l.leading()); diff != "" {
		t.Errorf("leaders after two renewals (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(leasetest.RecordSummary{Holder: first, LeaseDurationSeconds: 60}, leasetest.Summary(acquired)); diff != "" {
		t.Errorf("Lease (-want +got):\n%s", diff)
	}

	stops[first]()
	polltest.Eventually(t, "another leader", func() bool { return len(l.leading()) == 1 })
	second := l.leading()[0]
	if diff := cmp.Diff(leasetest.RecordSummary{Holder: second, LeaseDurationSeconds: 60, Transitions: 1}, leasetest.Summary(getLease(t, client))); diff != "" {
		t.Errorf("Lease after the takeover (-want +got):\n%s", diff)
	}
	l.check(t, "+"+first, "-"+first, "+"+second)
}

// A holder whose renewals fail steps down at its renew deadline, before the
// Lease expires for the other elector, which then takes over.
func TestLeaseElectorStepsDownWhenRenewalFails(t *testing.T) {
	client := newLeaseClient()
	// Also the release of a fails: b can only take over once the lease expired.
	failing := failLeaseWrites(client, "a", "")
	l := newLeaders()
	cfg := func(id string) Config {
		return electorConfig(id, 2*time.Second, 600*time.Millisecond, 100*time.Millisecond)
	}
	leases := NewLeaseRouter(startLeaseInformer(t, client))
	a := newLeaseElector(client, leases, cfg("a"), nil, clock.RealClock{})
	runElector(t, a, l.lead("a"))
	polltest.Eventually(t, "a leading", a.IsLeader)
	b := newLeaseElector(client, leases, cfg("b"), nil, clock.RealClock{})
	runElector(t, b, l.lead("b"))

	failing.Store(true)
	polltest.Eventually(t, "b leading", b.IsLeader)
	if a.IsLeader() {
		t.Error("a still leads")
	}
	if err := a.CheckRenewal(); err != nil {
		t.Errorf("a, which stepped down, is unhealthy: %v", err)
	}
	l.check(t, "+a", "-a", "+b")
}

// A term that does not end when told to makes the elector unhealthy once the
// lease it could not renew expired.
func TestLeaseElectorUnhealthyWhenTermOutlivesLease(t *testing.T) {
	client := newLeaseClient()
	failing := failLeaseWrites(client, "a")
	e := newLeaseElector(client, nil, electorConfig("a", time.Second, 500*time.Millisecond, 100*time.Millisecond), nil, clock.RealClock{})
	stuck := make(chan struct{})
	runElector(t, e, func(context.Context) func() { return func() { <-stuck } })
	polltest.Eventually(t, "a leading", e.IsLeader)
	if err := e.CheckRenewal(); err != nil {
		t.Errorf("renewing leader unhealthy: %v", err)
	}
	failing.Store(true)
	polltest.Eventually(t, "a unhealthy", func() bool { return e.CheckRenewal() != nil })
	if !e.IsLeader() {
		t.Error("a term that has not returned is not reported")
	}
	close(stuck)
	polltest.Eventually(t, "a not leading", func() bool { return !e.IsLeader() })
	if err := e.CheckRenewal(); err != nil {
		t.Errorf("follower unhealthy: %v", err)
	}
}

// A holder whose Lease was deleted steps down, and campaigns again.
func TestLeaseElectorLeaseDeleted(t *testing.T) {
	client := newLeaseClient()
	e := newLeaseElector(client, nil, electorConfig("a", 2*time.Second, time.Second, 100*time.Millisecond), nil, clock.RealClock{})
	l := newLeaders()
	stop := runElector(t, e, l.lead("a"))
	polltest.Eventually(t, "a leading", e.IsLeader)
	if err := client.CoordinationV1().Leases("default").Delete(context.Background(), testLease, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "a second term", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.history) == 3
	})
	if diff := cmp.Diff(leasetest.RecordSummary{Holder: "a", LeaseDurationSeconds: 2}, leasetest.Summary(getLease(t, client))); diff != "" {
		t.Errorf("re-created Lease (-want +got):\n%s", diff)
	}
	stop()
	l.check(t, "+a", "-a", "+a", "-a")
}

// A Lease left by a client-go elector is taken over once it expired, by the
// local clock from when it was seen, and not before.
func TestLeaseElectorTakesOverExpiredForeignLease(t *testing.T) {
	fakeClock := testingclock.NewFakeClock(time.Now())
	seenAt := fakeClock.Now()
	client := newLeaseClient()
	foreign := withRecord(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: testLease}},
		resourcelock.LeaderElectionRecord{
			HolderIdentity:       "old",
			LeaseDurationSeconds: 10,
			AcquireTime:          metav1.NewTime(seenAt.Add(-time.Hour)),
			// Written long ago by its clock: only the local clock counts.
			RenewTime:         metav1.NewTime(seenAt.Add(-time.Hour)),
			LeaderTransitions: 3,
		})
	if _, err := client.CoordinationV1().Leases("default").Create(context.Background(), foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := newLeaseElector(client, nil, electorConfig("a", 15*time.Second, 10*time.Second, 2*time.Second), nil, fakeClock)
	runElector(t, e, newLeaders().lead("a"))
	// Waiting either for the Lease to expire or, once leading, to renew it.
	settle := func() { polltest.Eventually(t, "a waiting", func() bool { return fakeClock.Waiters() == 1 }) }
	settle()
	// Seconds at a time, so the acquire time tells when the Lease was taken.
	for range 12 {
		fakeClock.Step(time.Second)
		settle()
	}
	if !e.IsLeader() {
		t.Fatal("a does not lead after the Lease expired")
	}
	lease := getLease(t, client)
	if diff := cmp.Diff(leasetest.RecordSummary{Holder: "a", LeaseDurationSeconds: 15, Transitions: 4}, leasetest.Summary(lease)); diff != "" {
		t.Errorf("Lease (-want +got):\n%s", diff)
	}
	if got := lease.Spec.AcquireTime.Sub(seenAt); got < 10*time.Second {
		t.Errorf("acquired %v after the Lease was seen, before it expired", got)
	}
}

// client-go's elector and this one on the same Lease never both lead: this
// one waits while a client-go holder renews and takes over when it crashed;
// a client-go follower waits while this one renews and takes over when it
// released.
func TestLeaseElectorAndClientGoExcludeEachOther(t *testing.T) {
	const (
		leaseDuration = 2 * time.Second
		renewDeadline = time.Second
		retryPeriod   = 250 * time.Millisecond
	)
	client := newLeaseClient()
	l := newLeaders()
	var terms sync.WaitGroup
	runClientGo := func(identity string, releaseOnCancel bool) (stop func()) {
		le, err := clientgo.NewLeaderElector(clientgo.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Namespace: "default", Name: testLease},
				Client:     client.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
			},
			LeaseDuration:   leaseDuration,
			RenewDeadline:   renewDeadline,
			RetryPeriod:     retryPeriod,
			ReleaseOnCancel: releaseOnCancel,
			Callbacks: clientgo.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					terms.Add(1)
					defer terms.Done()
					stopTerm := l.lead(identity)(ctx)
					<-ctx.Done()
					stopTerm()
				},
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			le.Run(ctx)
		}()
		var once sync.Once
		stop = func() {
			once.Do(func() {
				cancel()
				<-done
				terms.Wait()
			})
		}
		t.Cleanup(stop)
		return stop
	}
	// outlasts waits until the Lease was renewed more than a lease duration
	// after now, long enough for a waiting elector to have taken it, had it
	// judged it expired.
	outlasts := func(what string) {
		until := time.Now().Add(leaseDuration + retryPeriod)
		polltest.Eventually(t, what, func() bool { return getLease(t, client).Spec.RenewTime.After(until) })
	}

	crash := runClientGo("old", false)
	polltest.Eventually(t, "old leading", func() bool { return slices.Equal(l.leading(), []string{"old"}) })
	ours := newLeaseElector(client, nil, electorConfig("ours", leaseDuration, renewDeadline, retryPeriod), nil, clock.RealClock{})
	stopOurs := runElector(t, ours, l.lead("ours"))
	outlasts("old renewing")
	if ours.IsLeader() {
		t.Fatal("ours leads while old renews")
	}

	crash()
	polltest.Eventually(t, "ours leading", ours.IsLeader)
	runClientGo("new", true)
	outlasts("ours renewing")
	if diff := cmp.Diff([]string{"ours"}, l.leading()); diff != "" {
		t.Fatalf("leaders while ours renews (-want +got):\n%s", diff)
	}

	stopOurs()
	polltest.Eventually(t, "new leading", func() bool { return slices.Equal(l.leading(), []string{"new"}) })
	if diff := cmp.Diff(leasetest.RecordSummary{Holder: "new", LeaseDurationSeconds: 2, Transitions: 2}, leasetest.Summary(getLease(t, client))); diff != "" {
		t.Errorf("Lease (-want +got):\n%s", diff)
	}
	l.check(t, "+old", "-old", "+ours", "-ours", "+new")
}

// A stop after KeepLease leaves the Lease held: a successor with the same
// identity leads at once, while another replica, waiting for a lease of a
// minute, never gets a turn.
func TestLeaseElectorHandsOverToSameIdentity(t *testing.T) {
	client := newLeaseClient()
	l := newLeaders()
	cfg := func(id string) Config {
		return electorConfig(id, time.Minute, time.Second, 100*time.Millisecond)
	}
	first := newLeaseElector(client, nil, cfg("a"), nil, clock.RealClock{})
	stopFirst := runElector(t, first, l.lead("a"))
	polltest.Eventually(t, "a leading", first.IsLeader)
	other := newLeaseElector(client, nil, cfg("b"), nil, clock.RealClock{})
	runElector(t, other, l.lead("b"))

	first.KeepLease()
	stopFirst()
	if diff := cmp.Diff(leasetest.RecordSummary{Holder: "a", LeaseDurationSeconds: 60}, leasetest.Summary(getLease(t, client))); diff != "" {
		t.Errorf("Lease after a hand-over stop (-want +got):\n%s", diff)
	}
	successor := newLeaseElector(client, nil, cfg("a"), nil, clock.RealClock{})
	runElector(t, successor, l.lead("a"))
	polltest.Eventually(t, "the successor leading", successor.IsLeader)
	if other.IsLeader() {
		t.Error("the other replica took a handed-over Lease")
	}
	l.check(t, "+a", "-a", "+a")
}

// KeepLease concerns the term that ends next only: after a term that kept
// its Lease, because its drain gave up, lost it, a later term of the same
// elector releases the Lease on a clean stop, so failover stays quick.
func TestLeaseElectorKeepsTheLeaseForOneTermOnly(t *testing.T) {
	client := newLeaseClient()
	e := newLeaseElector(client, nil, electorConfig("a", time.Minute, time.Second, 100*time.Millisecond), nil, clock.RealClock{})
	l := newLeaders()
	stop := runElector(t, e, l.lead("a"))
	polltest.Eventually(t, "a leading", e.IsLeader)

	e.KeepLease()
	// The holder sees its Lease deleted, ends its term and, as the last
	// holder, takes the Lease again at once.
	if err := client.CoordinationV1().Leases("default").Delete(t.Context(), testLease, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "a second term", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.history) >= 3
	})
	stop()
	if diff := cmp.Diff(leasetest.RecordSummary{LeaseDurationSeconds: 1}, leasetest.Summary(getLease(t, client))); diff != "" {
		t.Errorf("Lease after a clean stop of the second term (-want +got):\n%s", diff)
	}
	l.check(t, "+a", "-a", "+a", "-a")
}

// seesCurrent reports whether e has seen the Lease as the API has it now.
func seesCurrent(client *fake.Clientset, e *LeaderElector) bool {
	var want string
	current, err := client.Tracker().Get(coordinationv1.SchemeGroupVersion.WithResource("leases"), e.lease.Namespace, e.lease.Name)
	if err == nil {
		want = current.(*coordinationv1.Lease).ResourceVersion
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var seen string
	if e.seen != nil {
		seen = e.seen.ResourceVersion
	}
	return seen == want
}

// A holder stops its work as soon as it sees its Lease deleted or held by
// another elector, not at its next renewal: the clock does not move here.
func TestLeaseElectorStopsWhenLeaseLost(t *testing.T) {
	tests := map[string]struct {
		lose func(ctx context.Context, leases typedcoordinationv1.LeaseInterface, lease *coordinationv1.Lease) error
	}{
		"Lease deleted": {
			lose: func(ctx context.Context, leases typedcoordinationv1.LeaseInterface, lease *coordinationv1.Lease) error {
				return leases.Delete(ctx, lease.Name, metav1.DeleteOptions{})
			},
		},
		"another holder": {
			lose: func(ctx context.Context, leases typedcoordinationv1.LeaseInterface, lease *coordinationv1.Lease) error {
				now := metav1.Now()
				_, err := leases.Update(ctx, withRecord(lease, resourcelock.LeaderElectionRecord{
					HolderIdentity: "other", LeaseDurationSeconds: 60, AcquireTime: now, RenewTime: now, LeaderTransitions: 1,
				}), metav1.UpdateOptions{})
				return err
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fakeClock := testingclock.NewFakeClock(time.Now())
			client := newLeaseClient()
			e := newLeaseElector(client, nil, electorConfig("a", 15*time.Second, 10*time.Second, 2*time.Second), nil, fakeClock)
			l := newLeaders()
			runElector(t, e, l.lead("a"))
			polltest.Eventually(t, "a leading", func() bool {
				// The jitter before the first write waits on the clock.
				if fakeClock.Waiters() == 1 && !e.IsLeader() {
					fakeClock.Step(time.Second)
				}
				return e.IsLeader() && fakeClock.Waiters() == 1 && seesCurrent(client, e)
			})

			if err := tc.lose(t.Context(), client.CoordinationV1().Leases("default"), getLease(t, client)); err != nil {
				t.Fatal(err)
			}
			polltest.Eventually(t, "a stopped", func() bool {
				l.mu.Lock()
				defer l.mu.Unlock()
				return len(l.history) >= 2
			})
			l.mu.Lock()
			defer l.mu.Unlock()
			if diff := cmp.Diff([]string{"+a", "-a"}, l.history[:2]); diff != "" {
				t.Errorf("terms (-want +got):\n%s", diff)
			}
		})
	}
}

// When the Lease of a holder is deleted, another elector does not take it as
// free: the holder may still work (a client-go holder even goes on leading
// and creates the Lease again), so the record deleted counts until it
// expires. The holder, which stops its term when it sees the deletion, takes
// the Lease again at once.
func TestLeaseElectorFollowerWaitsOutDeletedLease(t *testing.T) {
	fakeClock := testingclock.NewFakeClock(time.Now())
	client := newLeaseClient()
	cfg := func(id string) Config {
		return electorConfig(id, 15*time.Second, 10*time.Second, 2*time.Second)
	}
	l := newLeaders()
	a := newLeaseElector(client, nil, cfg("a"), nil, fakeClock)
	runElector(t, a, l.lead("a"))
	polltest.Eventually(t, "a leading", func() bool {
		if fakeClock.Waiters() == 1 && !a.IsLeader() {
			fakeClock.Step(time.Second)
		}
		return a.IsLeader() && fakeClock.Waiters() == 1 && seesCurrent(client, a)
	})
	b := newLeaseElector(client, nil, cfg("b"), nil, fakeClock)
	runElector(t, b, l.lead("b"))
	// Both wait on a timer, a to renew, b for the Lease to expire or a to
	// take it again, and have seen the Lease as it is.
	settle := func() {
		polltest.Eventually(t, "electors waiting", func() bool {
			return fakeClock.Waiters() == 2 && seesCurrent(client, a) && seesCurrent(client, b)
		})
	}
	settle()

	if err := client.CoordinationV1().Leases("default").Delete(t.Context(), testLease, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Less than a lease duration.
	for range 10 {
		settle()
		fakeClock.Step(time.Second)
	}
	settle()
	if diff := cmp.Diff(leasetest.RecordSummary{Holder: "a", LeaseDurationSeconds: 15}, leasetest.Summary(getLease(t, client))); diff != "" {
		t.Errorf("Lease after the deletion (-want +got):\n%s", diff)
	}
	l.check(t, "+a", "-a", "+a")
}

// legacyLock is the Endpoints lock of an older provisioner in namespace
// "legacy", with record in the annotation client-go's Endpoints lock used.
func legacyLock(t *testing.T, record resourcelock.LeaderElectionRecord) *corev1.Endpoints {
	t.Helper()
	data, err := json.Marshal(record)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{
		Namespace:   "legacy",
		Name:        testLease,
		Annotations: map[string]string{resourcelock.LeaderElectionRecordAnnotationKey: string(data)},
	}}
}

// While an older provisioner's Endpoints lock holds a live record of another
// holder, the elector does not lead: not until twice the record's lease
// duration after its renew time, when a follower of the older version would
// have taken it, or until it is removed.
func TestLeaseElectorWaitsForLegacyLock(t *testing.T) {
	tests := map[string]struct {
		// record is that of the Endpoints lock, with times relative to the
		// start; nil: no lock.
		record *resourcelock.LeaderElectionRecord
		// removeAt, if set, is when the lock is deleted.
		removeAt time.Duration
		// The elector must not lead before notBefore and must lead by by.
		notBefore, by time.Duration
	}{
		"no lock": {by: 2 * time.Second},
		"released": {
			record: &resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 10},
			by:     2 * time.Second,
		},
		"held by the same identity": {
			record: &resourcelock.LeaderElectionRecord{HolderIdentity: "a", LeaseDurationSeconds: 10},
			by:     2 * time.Second,
		},
		"expired long ago": {
			record: &resourcelock.LeaderElectionRecord{HolderIdentity: "old", LeaseDurationSeconds: 10, RenewTime: metav1.NewTime(time.Unix(-3600, 0))},
			by:     2 * time.Second,
		},
		"live until it expires": {
			record:    &resourcelock.LeaderElectionRecord{HolderIdentity: "old", LeaseDurationSeconds: 10},
			notBefore: 20 * time.Second,
			by:        24 * time.Second,
		},
		"live until it is removed": {
			record:    &resourcelock.LeaderElectionRecord{HolderIdentity: "old", LeaseDurationSeconds: 3600},
			removeAt:  5 * time.Second,
			notBefore: 5 * time.Second,
			by:        19 * time.Second,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fakeClock := testingclock.NewFakeClock(time.Now().Truncate(time.Second))
			start := fakeClock.Now()
			client := newLeaseClient()
			if tc.record != nil {
				record := *tc.record
				if record.RenewTime.IsZero() {
					record.RenewTime = metav1.NewTime(start)
				}
				record.AcquireTime = record.RenewTime
				if _, err := client.CoreV1().Endpoints("legacy").Create(t.Context(), legacyLock(t, record), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			cfg := electorConfig("a", 15*time.Second, 10*time.Second, 2*time.Second)
			cfg.LegacyLockNamespace = "legacy"
			e := newLeaseElector(client, nil, cfg, nil, fakeClock)
			runElector(t, e, newLeaders().lead("a"))
			var ledAt time.Duration
			for elapsed := time.Duration(0); elapsed <= tc.by; elapsed += time.Second {
				polltest.Eventually(t, "a waiting", func() bool { return fakeClock.Waiters() == 1 })
				if e.IsLeader() {
					ledAt = elapsed
					break
				}
				if tc.removeAt != 0 && elapsed+time.Second == tc.removeAt {
					if err := client.CoreV1().Endpoints("legacy").Delete(t.Context(), testLease, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				fakeClock.Step(time.Second)
			}
			if !e.IsLeader() {
				t.Fatalf("a does not lead %v after the start", tc.by)
			}
			if ledAt < tc.notBefore {
				t.Errorf("a led %v after the start, before %v", ledAt, tc.notBefore)
			}
		})
	}
}

// A leader that sees a live record of another holder in the older
// provisioner's Endpoints lock at a renewal stops leading and releases its
// Lease.
func TestLeaseElectorStopsForLegacyLock(t *testing.T) {
	fakeClock := testingclock.NewFakeClock(time.Now().Truncate(time.Second))
	client := newLeaseClient()
	cfg := electorConfig("a", 15*time.Second, 10*time.Second, 2*time.Second)
	cfg.LegacyLockNamespace = "legacy"
	e := newLeaseElector(client, nil, cfg, nil, fakeClock)
	l := newLeaders()
	runElector(t, e, l.lead("a"))
	polltest.Eventually(t, "a leading", func() bool {
		if fakeClock.Waiters() == 1 && !e.IsLeader() {
			fakeClock.Step(time.Second)
		}
		return e.IsLeader() && fakeClock.Waiters() == 1
	})
	now := metav1.NewTime(fakeClock.Now())
	record := resourcelock.LeaderElectionRecord{HolderIdentity: "old", LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}
	if _, err := client.CoreV1().Endpoints("legacy").Create(t.Context(), legacyLock(t, record), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Past the next renewal.
	for range 8 {
		polltest.Eventually(t, "a waiting", func() bool { return fakeClock.Waiters() == 1 })
		fakeClock.Step(time.Second)
	}
	polltest.Eventually(t, "a stopped", func() bool { return !e.IsLeader() })
	l.check(t, "+a", "-a")
	if diff := cmp.Diff(leasetest.RecordSummary{LeaseDurationSeconds: 1}, leasetest.Summary(getLease(t, client))); diff != "" {
		t.Errorf("Lease (-want +got):\n%s", diff)
	}
}

// Leases reach their electors through a running informer; a stopped informer
// refuses the subscription.
func TestRouterLeases(t *testing.T) {
	client := fake.NewClientset()
	// The fake's watch starts after its list: a Lease made in between
	// would never be delivered, so the test waits for the watch.
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("leases", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		once.Do(func() { close(watching) })
		return true, w, err
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	r := NewLeaseRouter(factory.Coordination().V1().Leases().Informer())
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	<-watching

	var mu sync.Mutex
	var got []string
	record := func(subscriber, event string, obj any) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, subscriber+" "+event+" "+obj.(*coordinationv1.Lease).Name)
	}
	delivered := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(got))
	}
	var subs []*eventrouter.Subscription[types.NamespacedName]
	for _, name := range []string{"a", "b"} {
		s, err := r.Subscribe(func() []types.NamespacedName { return []types.NamespacedName{{Namespace: "default", Name: name}} },
			cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { record(name, "add", obj) },
				UpdateFunc: func(_, obj any) { record(name, "update", obj) },
				DeleteFunc: func(obj any) { record(name, "delete", obj) },
			})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	leases := client.CoordinationV1().Leases("default")
	for _, name := range []string{"a", "c"} {
		if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := leases.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "the Lease deleted", func() bool { return len(delivered()) == 2 })
	if diff := cmp.Diff([]string{"a add a", "a delete a"}, delivered()); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	for _, s := range subs {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	}

	cancel()
	factory.Shutdown()
	late := NewLeaseRouter(factory.Coordination().V1().Leases().Informer())
	if _, err := late.Subscribe(func() []types.NamespacedName { return nil }, cache.ResourceEventHandlerFuncs{}); err == nil {
		t.Error("subscribing on a stopped informer succeeded")
	}
}

// A holder publishes what Annotate says with the write that takes the Lease
// and with its renewals, keeps the annotations others wrote, and RenewSoon
// publishes a change well before the next interval (a minute here).
func TestLeaseElectorLabelsAndAnnotatesItsWrites(t *testing.T) {
	client := newLeaseClient()
	var mu sync.Mutex
	report := "one"
	cfg := electorConfig("a", 3*time.Minute, 2*time.Minute, time.Minute)
	cfg.Annotate = func(annotations map[string]string) {
		mu.Lock()
		defer mu.Unlock()
		annotations["report"] = report
		delete(annotations, "done")
	}
	cfg.Labels = map[string]string{"kind": "replica"}
	// The clock moves only until a leads: the next report can then be
	// published by RenewSoon alone, not by a renewal.
	fakeClock := testingclock.NewFakeClock(time.Now())
	e := newLeaseElector(client, nil, cfg, nil, fakeClock)
	l := newLeaders()
	runElector(t, e, l.lead("a"))
	polltest.Eventually(t, "a leading", func() bool {
		// The jitter before the first write waits on the clock.
		if fakeClock.Waiters() == 1 && !e.IsLeader() {
			fakeClock.Step(time.Second)
		}
		return e.IsLeader()
	})
	if got := getLease(t, client).Annotations; !cmp.Equal(got, map[string]string{"report": "one"}) {
		t.Errorf("annotations of the acquired Lease: %v", got)
	}
	if diff := cmp.Diff(map[string]string{"kind": "replica"}, getLease(t, client).Labels); diff != "" {
		t.Errorf("labels of the created Lease (-want +got):\n%s", diff)
	}

	// Another writer adds its own annotations meanwhile.
	lease := getLease(t, client)
	lease.Annotations["other"] = "kept"
	lease.Annotations["done"] = "dropped"
	if _, err := client.CoordinationV1().Leases("default").Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	report = "two"
	mu.Unlock()
	e.RenewSoon()
	polltest.Eventually(t, "the new report published", func() bool {
		return cmp.Equal(getLease(t, client).Annotations, map[string]string{"report": "two", "other": "kept"})
	})
}

// An elector that starts after the Lease's record was sighted waits out
// the rest of its duration from the sighting, as one running all along
// would; without sightings it waits a whole duration from its start.
func TestLeaseElectorStartsFromSightings(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sightings bool
		// wantLeadAfter is how many seconds after its start the elector
		// leads, within one step.
		wantLeadAfter int
	}{
		{name: "sighted 8s before the start", sightings: true, wantLeadAfter: 2},
		{name: "no sightings", sightings: false, wantLeadAfter: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fakeClock := testingclock.NewFakeClock(time.Now())
			client := newLeaseClient()
			foreign := withRecord(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: testLease}},
				resourcelock.LeaderElectionRecord{HolderIdentity: "dead", LeaseDurationSeconds: 10,
					AcquireTime: metav1.NewTime(fakeClock.Now()), RenewTime: metav1.NewTime(fakeClock.Now())})
			if _, err := client.CoordinationV1().Leases("default").Create(context.Background(), foreign, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			informer := startLeaseInformer(t, client)
			cfg := electorConfig("a", 15*time.Second, 10*time.Second, 2*time.Second)
			if tc.sightings {
				sightings, err := NewSightings(informer, fakeClock)
				if err != nil {
					t.Fatal(err)
				}
				polltest.Eventually(t, "the Lease sighted", func() bool {
					_, ok := sightings.since(foreign)
					return ok
				})
				cfg.Sightings = sightings
			}
			fakeClock.Step(8 * time.Second)
			e := newLeaseElector(client, NewLeaseRouter(informer), cfg, nil, fakeClock)
			runElector(t, e, newLeaders().lead("a"))
			settle := func() { polltest.Eventually(t, "a waiting", func() bool { return fakeClock.Waiters() == 1 }) }
			settle()
			led := 0
			// The jitter adds up to a retry period's half to the wait.
			for second := 1; second <= 12 && led == 0; second++ {
				fakeClock.Step(time.Second)
				settle()
				if e.IsLeader() {
					led = second
				}
			}
			if led < tc.wantLeadAfter || led > tc.wantLeadAfter+1 {
				t.Errorf("led %d s after its start, want %d s (one more for the jitter)", led, tc.wantLeadAfter)
			}
		})
	}
}
