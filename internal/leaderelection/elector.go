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
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/provfleet/provfleet/internal/eventrouter"
)

// LeaderElector elects the leader of one controller on a coordination.k8s.io
// Lease, written in the record format of client-go's LeaseLock, so that it and
// a client-go elector of the same Lease (an older single-provisioner
// deployment) never both lead.
//
// Unlike client-go's elector it never polls. A follower reads the Lease from
// an informer and writes only when the record it saw expired (unchanged for
// its leaseDurationSeconds, by the local clock, as client-go judges) or was
// released. The holder writes once per renew interval instead of once per
// retry period, and steps down when no renewal succeeded within the renew
// deadline, always before another elector may take over.
//
// The holder also stops its work as soon as the informer shows the Lease
// deleted or held by another elector, after one read confirms it. A record
// that was deleted still counts for the followers until it expires: its
// holder may be working until it sees the deletion, and a client-go holder
// goes on leading and creates the Lease again.
//
// With LegacyLockNamespace set, it also respects the Endpoints lock of an
// older upstream version, which client-go no longer offers: it reads that
// lock, never writes it, before each attempt to take the Lease and after
// each renewal, does not lead while it holds a live record of another
// holder, and ends a term when one shows up. Reading only needs no write
// access to a deprecated API and no second write per renewal; an older
// replica that starts while this one leads can take the expired lock, and
// leads next to it until this one's next renewal, so a migration scales the
// older version to zero rather than back up.
type LeaderElector struct {
	client   Client
	leases   *eventrouter.Router[types.NamespacedName] // nil: a private informer of this one Lease
	lease    metav1.ObjectMeta                         // namespace and name only
	identity string
	cfg      Config
	clock    clock.Clock

	leading atomic.Bool
	// keep skips the release at the end of the term, see KeepLease.
	keep atomic.Bool
	// wake is signalled, without blocking, when the record seen changes.
	wake chan struct{}
	// renewNow is signalled, without blocking, by RenewSoon.
	renewNow chan struct{}

	mu sync.Mutex
	// seen is the newest copy of the Lease this elector knows of; nil when
	// there is none.
	seen *coordinationv1.Lease
	// record is the record of seen, kept after the Lease was deleted until
	// another one is seen.
	record resourcelock.LeaderElectionRecord
	// seenAt is when record last changed, by the local clock.
	seenAt time.Time
	// renewedAt is when the last successful write of this holder started,
	// with the clock's monotonic reading.
	renewedAt time.Time

	reportMu sync.Mutex
	reported string

	// legacyHolder is the holder of the older provisioner's lock last
	// logged, so that each is logged once; used by Run's goroutine only.
	legacyHolder string
}

// NewLeaderElector returns the elector of cfg.Lease; it starts nothing until
// Run.
func NewLeaderElector(cfg Config) *LeaderElector {
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &LeaderElector{
		client:   cfg.Client,
		leases:   cfg.Leases,
		lease:    metav1.ObjectMeta{Namespace: cfg.Lease.Namespace, Name: cfg.Lease.Name},
		identity: cfg.Identity,
		cfg:      cfg,
		clock:    clk,
		wake:     make(chan struct{}, 1),
		renewNow: make(chan struct{}, 1),
	}
}

// RenewSoon makes a leader renew the Lease now rather than at the next
// interval, so that what Annotate adds is published at once. A follower
// ignores it.
func (e *LeaderElector) RenewSoon() {
	select {
	case e.renewNow <- struct{}{}:
	default:
	}
}

// annotated returns a copy of lease with the annotations of Config.Annotate.
func (e *LeaderElector) annotated(lease *coordinationv1.Lease) *coordinationv1.Lease {
	if e.cfg.Annotate == nil {
		return lease
	}
	lease = lease.DeepCopy()
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	e.cfg.Annotate(lease.Annotations)
	if len(lease.Annotations) == 0 {
		lease.Annotations = nil
	}
	return lease
}

// IsLeader reports whether a term's work is running: from before
// OnStartedLeading is called until the function it returned has returned.
func (e *LeaderElector) IsLeader() bool { return e.leading.Load() }

// CheckRenewal fails once the term outlived the lease: another elector may
// hold it now while the term's work, told to stop at the renew deadline,
// still has not ended. It is nil while following.
func (e *LeaderElector) CheckRenewal() error {
	if !e.leading.Load() {
		return nil
	}
	e.mu.Lock()
	since := e.clock.Since(e.renewedAt)
	e.mu.Unlock()
	if since > e.cfg.LeaseDuration {
		return fmt.Errorf("lease %s/%s not renewed for %v, longer than its duration %v",
			e.lease.Namespace, e.lease.Name, since.Round(time.Millisecond), e.cfg.LeaseDuration)
	}
	return nil
}

// renewInterval leaves room for two retries before the renew deadline.
func (e *LeaderElector) renewInterval() time.Duration {
	return max(e.cfg.RetryPeriod, e.cfg.RenewDeadline-2*e.cfg.RetryPeriod)
}

// Run campaigns until ctx ends. Each time it wins it calls
// OnStartedLeading, renews the Lease until the term ends, waits for the
// function OnStartedLeading returned and releases the Lease (see KeepLease).
// It returns once ctx ended and the last term is over.
func (e *LeaderElector) Run(ctx context.Context) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "lease", klog.KRef(e.lease.Namespace, e.lease.Name))
	ctx = klog.NewContext(ctx, logger)
	leases := e.leases
	if leases == nil {
		informer := newLeaseInformer(e.client, e.lease.Namespace, e.lease.Name)
		leases = NewLeaseRouter(informer)
		// The informer stops after the last term released the Lease.
		informerCtx, stopInformer := context.WithCancel(context.WithoutCancel(ctx))
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			informer.RunWithContext(informerCtx)
		}()
		defer func() {
			stopInformer()
			<-stopped
		}()
	}
	keys := func() []types.NamespacedName { return []types.NamespacedName{e.cfg.Lease} }
	for ctx.Err() == nil {
		sub, err := leases.Subscribe(keys, e.leaseEvents())
		if err == nil {
			e.elect(ctx, leases.Informer())
			if err := sub.Stop(); err != nil {
				utilruntime.HandleErrorWithContext(ctx, err, "Cannot stop watching the Lease")
			}
			return
		}
		// Only a stopped informer ends up here: wait, do not spin.
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot watch the Lease")
		e.sleepUntil(ctx.Done(), e.cfg.RetryPeriod)
	}
}

// leaseEvents hands the events of this elector's Lease to observe.
func (e *LeaderElector) leaseEvents() cache.ResourceEventHandler {
	observe := func(obj any) {
		if lease, ok := obj.(*coordinationv1.Lease); ok {
			e.observe(lease)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(any) { e.observe(nil) },
	}
}

// elect runs terms until ctx ends.
func (e *LeaderElector) elect(ctx context.Context, informer cache.SharedIndexInformer) {
	if !cache.WaitForNamedCacheSyncWithContext(ctx, informer.HasSynced) {
		return
	}
	if obj, exists, err := informer.GetStore().Get(&coordinationv1.Lease{ObjectMeta: e.lease}); err == nil && exists {
		if lease, ok := obj.(*coordinationv1.Lease); ok {
			e.observe(lease)
		}
	}
	for {
		held := e.campaign(ctx)
		if held == nil {
			return
		}
		e.term(ctx, held)
	}
}

// observe takes in a copy of the Lease, from the informer or from a request;
// nil when it is gone.
func (e *LeaderElector) observe(lease *coordinationv1.Lease) {
	e.mu.Lock()
	changed := (lease == nil) != (e.seen == nil) ||
		lease != nil && !equality.Semantic.DeepEqual(lease.Spec, e.seen.Spec)
	first := e.seen == nil && e.seenAt.IsZero()
	// The newest resource version even when only metadata changed.
	e.seen = lease
	if changed && lease != nil {
		e.record = leaseRecord(lease)
		e.seenAt = e.clock.Now()
		if at, ok := e.sightedAt(lease); first && ok {
			e.seenAt = at
		}
	}
	e.mu.Unlock()
	if !changed {
		return
	}
	select {
	case e.wake <- struct{}{}:
	default:
	}
	// This elector reports itself when its term starts, once IsLeader is true,
	// not when its write or a late event shows its identity.
	if holder := leaseRecord(lease).HolderIdentity; holder != e.identity || e.leading.Load() {
		e.report(holder)
	}
}

// sightedAt is when the Sightings, if any, first saw the record of lease.
func (e *LeaderElector) sightedAt(lease *coordinationv1.Lease) (time.Time, bool) {
	if e.cfg.Sightings == nil {
		return time.Time{}, false
	}
	return e.cfg.Sightings.since(lease)
}

// campaign waits until the Lease is free and takes it; it returns the Lease
// as written, or nil once ctx ended.
func (e *LeaderElector) campaign(ctx context.Context) *coordinationv1.Lease {
	logger := klog.FromContext(ctx)
	var notBefore time.Time // after a failed attempt
	for {
		e.mu.Lock()
		lease, record, seenAt := e.seen, e.record, e.seenAt
		e.mu.Unlock()
		now := e.clock.Now()
		at := now
		for _, t := range []time.Time{e.freeAt(record, seenAt), notBefore} {
			if t.After(at) {
				at = t
			}
		}
		// Jitter spreads the electors of several replicas that all saw the
		// same record, so that usually one writes.
		at = at.Add(rand.N(e.cfg.RetryPeriod/2 + 1)) //nolint:gosec // jitter needs no secret randomness
		if wait := at.Sub(now); wait > 0 {
			timer := e.clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil
			case <-e.wake:
				timer.Stop()
				continue
			case <-timer.C():
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if until := e.legacyLockHeld(ctx); !until.IsZero() {
			notBefore = until
			continue
		}
		held, err := e.acquire(ctx, lease)
		if err == nil {
			logger.Info("Acquired the lease", "identity", e.identity)
			return held
		}
		notBefore = e.clock.Now().Add(e.cfg.RetryPeriod)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			logger.V(4).Info("Another elector wrote the lease first", "err", err)
			continue
		}
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot acquire the lease")
	}
}

// freeAt is when the Lease, seen with record since seenAt, may be taken: at
// once when no record was seen, it was released or it is this elector's own;
// otherwise once it expired, also when the Lease was deleted meanwhile.
func (e *LeaderElector) freeAt(record resourcelock.LeaderElectionRecord, seenAt time.Time) time.Time {
	if record.HolderIdentity == "" || record.HolderIdentity == e.identity {
		return time.Time{}
	}
	return seenAt.Add(time.Duration(record.LeaseDurationSeconds) * time.Second)
}

// acquire writes this elector into the Lease, replacing the copy seen (or
// creating it when none was seen); the resource version makes the write fail
// when the Lease changed since.
func (e *LeaderElector) acquire(ctx context.Context, seen *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	now := e.clock.Now()
	record := resourcelock.LeaderElectionRecord{
		HolderIdentity:       e.identity,
		LeaseDurationSeconds: leaseSeconds(e.cfg.LeaseDuration),
		AcquireTime:          metav1.NewTime(now),
		RenewTime:            metav1.NewTime(now),
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	var written *coordinationv1.Lease
	var err error
	if seen == nil {
		meta := e.lease
		meta.Labels = e.cfg.Labels
		written, err = e.client.CoordinationV1().Leases(e.lease.Namespace).Create(ctx,
			withRecord(e.annotated(&coordinationv1.Lease{ObjectMeta: meta}), record), metav1.CreateOptions{})
	} else {
		old := leaseRecord(seen)
		if old.HolderIdentity == e.identity {
			record.AcquireTime = old.AcquireTime
			record.LeaderTransitions = old.LeaderTransitions
		} else {
			record.LeaderTransitions = old.LeaderTransitions + 1
		}
		written, err = e.client.CoordinationV1().Leases(e.lease.Namespace).Update(ctx, withRecord(e.annotated(seen), record), metav1.UpdateOptions{})
	}
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			// The informer may lag behind: read the Lease that won.
			if _, getErr := e.refresh(ctx); getErr != nil {
				err = errors.Join(err, getErr)
			}
		}
		return nil, fmt.Errorf("cannot acquire the lease: %w", err)
	}
	e.mu.Lock()
	e.renewedAt = now
	e.mu.Unlock()
	e.observe(written)
	return written, nil
}

// refresh reads the Lease from the API server, for when a write showed that
// the copy seen is stale; it returns what it read.
func (e *LeaderElector) refresh(ctx context.Context) (*coordinationv1.Lease, error) {
	lease, err := e.client.CoordinationV1().Leases(e.lease.Namespace).Get(ctx, e.lease.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		e.observe(nil)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the lease: %w", err)
	}
	e.observe(lease)
	return lease, nil
}

// term leads while renewing the Lease held, then releases it. The renewals
// run in the calling goroutine; the work is stopped in a goroutine of its own
// only once the term ended, so a leading instance holds one goroutine here.
func (e *LeaderElector) term(ctx context.Context, held *coordinationv1.Lease) {
	termCtx, endTerm := context.WithCancel(ctx)
	defer endTerm()
	e.leading.Store(true)
	e.report(e.identity)
	stopWork := e.cfg.Callbacks.OnStartedLeading(termCtx)
	drained := make(chan struct{})
	context.AfterFunc(termCtx, func() {
		stopWork()
		close(drained)
	})
	held = e.renew(ctx, held, endTerm, drained)
	e.leading.Store(false)
	// KeepLease concerns this term alone, however it ended.
	keep := e.keep.Swap(false)
	if held != nil && !keep {
		e.release(ctx, held)
	}
	e.dropSelf()
}

// KeepLease leaves the Lease held by this identity when the term that ends
// next ends, instead of releasing it. The Lease stays valid for its duration,
// so no other replica can win it, and a successor elector with the same
// identity takes it over at once.
func (e *LeaderElector) KeepLease() { e.keep.Store(true) }

// renew keeps the Lease held until stop is closed, also after ctx ended, so
// that the term's work drains under a valid lease. When no renewal succeeded
// within the renew deadline, or the Lease is deleted or another holder shows
// up, it ends the term and waits for stop. It returns the Lease as last written, or nil
// when it is not this elector's any more.
func (e *LeaderElector) renew(ctx context.Context, held *coordinationv1.Lease, endTerm func(), stop <-chan struct{}) *coordinationv1.Lease {
	logger := klog.FromContext(ctx)
	ctx = context.WithoutCancel(ctx)
	e.mu.Lock()
	deadline := e.renewedAt.Add(e.cfg.RenewDeadline)
	e.mu.Unlock()
	wait := e.renewInterval()
	legacyHeld := false
	for {
		lost, stopped := e.awaitRenewal(ctx, stop, wait)
		if stopped {
			return held
		}
		if lost {
			logger.Info("Lost the lease: deleted or held by another elector")
			stepDown(endTerm, stop)
			return nil
		}
		start := e.clock.Now()
		left := deadline.Sub(start)
		if left <= 0 {
			logger.Info("Lost the lease: not renewed within the renew deadline", "renewDeadline", e.cfg.RenewDeadline)
			stepDown(endTerm, stop)
			return held
		}
		written, err := e.renewOnce(ctx, held, start, left)
		switch {
		case err == nil:
			held, deadline, wait = written, start.Add(e.cfg.RenewDeadline), e.renewInterval()
			// Renewing goes on until the work drained, under the Lease.
			if !legacyHeld && e.legacyLockTaken(ctx) {
				legacyHeld = true
				endTerm()
			}
			continue
		case errors.Is(err, errLeaseTaken):
			logger.Info("Lost the lease: another elector holds it")
			stepDown(endTerm, stop)
			return nil
		case errors.Is(err, errStaleLease):
			// Another writer changed the Lease (its annotations, say) and it
			// is still ours: write again at once onto the copy just read.
			held, wait = written, 0
			continue
		}
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot renew the lease")
		wait = min(e.cfg.RetryPeriod, deadline.Sub(e.clock.Now()))
	}
}

// stepDown ends the term and waits for its work to stop.
func stepDown(endTerm func(), stop <-chan struct{}) {
	endTerm()
	<-stop
}

// renewOnce writes the renewal that started at start into the Lease held,
// within timeout, and notes when it started once it succeeded.
func (e *LeaderElector) renewOnce(ctx context.Context, held *coordinationv1.Lease, start time.Time, timeout time.Duration) (*coordinationv1.Lease, error) {
	written, err := e.write(ctx, e.annotated(held), timeout, func(old resourcelock.LeaderElectionRecord) resourcelock.LeaderElectionRecord {
		old.HolderIdentity = e.identity
		old.LeaseDurationSeconds = leaseSeconds(e.cfg.LeaseDuration)
		old.RenewTime = metav1.NewTime(start)
		return old
	})
	if err == nil {
		e.mu.Lock()
		e.renewedAt = start
		e.mu.Unlock()
	}
	return written, err
}

// awaitRenewal waits d for the next renewal. It reports stopped once stop is
// closed, and lost as soon as the Lease is seen deleted or held by another
// elector and a read confirms it: the informer may still deliver an event
// older than this elector's own last write.
func (e *LeaderElector) awaitRenewal(ctx context.Context, stop <-chan struct{}, d time.Duration) (lost, stopped bool) {
	if d <= 0 {
		return false, !e.sleepUntil(stop, 0)
	}
	timer := e.clock.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return false, true
		case <-timer.C():
			return false, false
		case <-e.renewNow:
			return false, false
		case <-e.wake:
		}
		e.mu.Lock()
		holder := e.record.HolderIdentity
		if e.seen == nil {
			holder = ""
		}
		e.mu.Unlock()
		if holder == e.identity {
			continue
		}
		readCtx, cancel := context.WithTimeout(ctx, e.cfg.RetryPeriod)
		current, err := e.refresh(readCtx)
		cancel()
		if err != nil {
			// The next renewal tells.
			klog.FromContext(ctx).V(2).Info("Cannot confirm a change of the lease", "err", err)
			continue
		}
		if current == nil || leaseRecord(current).HolderIdentity != e.identity {
			return true, false
		}
	}
}

// legacyLock reads the Endpoints lock of an older provisioner, within a
// retry period; see legacyLockUntil.
func (e *LeaderElector) legacyLock(ctx context.Context) (string, time.Time, error) {
	if e.cfg.LegacyLockNamespace == "" {
		return "", time.Time{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RetryPeriod)
	defer cancel()
	return legacyLockUntil(ctx, e.client, e.cfg.LegacyLockNamespace, e.lease.Name, e.identity)
}

// legacyLockHeld returns, while the Endpoints lock of an older provisioner
// holds a live record of another holder or cannot be read, when to look
// again; the zero time when this elector may lead. It looks again at least
// once per lease duration, to notice a removed lock at a read per duration.
func (e *LeaderElector) legacyLockHeld(ctx context.Context) time.Time {
	holder, until, err := e.legacyLock(ctx)
	now := e.clock.Now()
	again := now.Add(e.cfg.LeaseDuration)
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Not leading until the Endpoints lock of an older provisioner can be read")
		return again
	case !until.After(now):
		e.legacyHolder = ""
		return time.Time{}
	}
	logger := klog.FromContext(ctx)
	if holder != e.legacyHolder {
		e.legacyHolder = holder
		logger.Info("Not leading: an older provisioner holds its Endpoints lock",
			"endpoints", klog.KRef(e.cfg.LegacyLockNamespace, e.lease.Name), "holder", holder, "until", until)
	}
	if until.Before(again) {
		return until
	}
	return again
}

// legacyLockTaken reports whether an older provisioner now holds its
// Endpoints lock with a live record. A lock that cannot be read does not end
// a term: the next renewal looks again.
func (e *LeaderElector) legacyLockTaken(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	holder, until, err := e.legacyLock(ctx)
	if err != nil {
		logger.V(2).Info("Cannot read the Endpoints lock of an older provisioner", "err", err)
		return false
	}
	if !until.After(e.clock.Now()) {
		return false
	}
	e.legacyHolder = holder
	logger.Info("Stopping: an older provisioner took its Endpoints lock",
		"endpoints", klog.KRef(e.cfg.LegacyLockNamespace, e.lease.Name), "holder", holder, "until", until)
	return true
}

var (
	errLeaseTaken = errors.New("lease held by another elector or deleted")
	errStaleLease = errors.New("lease changed since it was written")
)

// write updates the Lease held with the record change makes of its record,
// within timeout. When the Lease changed meanwhile it reads it again: it fails
// with errLeaseTaken when another elector holds it now, and with
// errStaleLease, returning the current Lease, when it is still held.
func (e *LeaderElector) write(ctx context.Context, held *coordinationv1.Lease, timeout time.Duration,
	change func(resourcelock.LeaderElectionRecord) resourcelock.LeaderElectionRecord) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	written, err := e.client.CoordinationV1().Leases(e.lease.Namespace).Update(ctx,
		withRecord(held, change(leaseRecord(held))), metav1.UpdateOptions{})
	if err == nil {
		e.observe(written)
		return written, nil
	}
	if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("cannot write the lease: %w", err)
	}
	current, getErr := e.refresh(ctx)
	switch {
	case getErr != nil:
		return nil, errors.Join(fmt.Errorf("cannot write the lease: %w", err), getErr)
	case current == nil || leaseRecord(current).HolderIdentity != e.identity:
		return nil, errLeaseTaken
	}
	return current, errStaleLease
}

// release gives the Lease up as client-go does, so that a follower takes over
// at once instead of after it expired.
func (e *LeaderElector) release(ctx context.Context, held *coordinationv1.Lease) {
	logger := klog.FromContext(ctx)
	ctx = context.WithoutCancel(ctx)
	now := metav1.NewTime(e.clock.Now())
	released := func(old resourcelock.LeaderElectionRecord) resourcelock.LeaderElectionRecord {
		return resourcelock.LeaderElectionRecord{
			LeaderTransitions:    old.LeaderTransitions,
			LeaseDurationSeconds: 1,
			AcquireTime:          now,
			RenewTime:            now,
		}
	}
	current, err := e.write(ctx, held, e.cfg.RenewDeadline, released)
	if errors.Is(err, errStaleLease) {
		_, err = e.write(ctx, current, e.cfg.RenewDeadline, released)
	}
	if err != nil {
		// Not fatal: the Lease expires.
		logger.Info("Cannot release the lease", "err", err)
		return
	}
	logger.Info("Released the lease")
}

// sleepUntil waits for d and reports true, or reports false once stop is
// closed.
func (e *LeaderElector) sleepUntil(stop <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-stop:
			return false
		default:
			return true
		}
	}
	timer := e.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-stop:
		return false
	case <-timer.C():
		return true
	}
}

// report tells the owner about a new lease holder, once per change.
func (e *LeaderElector) report(holderIdentity string) {
	e.reportMu.Lock()
	defer e.reportMu.Unlock()
	e.reportLocked(holderIdentity)
}

// dropSelf reports that this instance no longer holds the lease, unless a
// newer holder was reported already.
func (e *LeaderElector) dropSelf() {
	e.reportMu.Lock()
	defer e.reportMu.Unlock()
	if e.reported == e.identity {
		e.reportLocked("")
	}
}

func (e *LeaderElector) reportLocked(holderIdentity string) {
	if holderIdentity == e.reported {
		return
	}
	e.reported = holderIdentity
	if e.cfg.Callbacks.OnNewLeader != nil {
		e.cfg.Callbacks.OnNewLeader(holderIdentity)
	}
}
