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
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/provfleet/provfleet/internal/leaderelection"
	"github.com/provfleet/provfleet/internal/workqueue"
)

// Leader is the controller an Elected runs: the provision Controller, or a
// fleet's hostPath coordinator. It works while it leads.
type Leader interface {
	// Lead starts the work of one term, which lasts until ctx ends; the
	// returned stop waits for it to end.
	Lead(ctx context.Context) (stop func())
}

// ElectedDeps are what an Elected uses but does not own.
type ElectedDeps struct {
	// Client writes the provisioner's Lease.
	Client Client
	// Informers are the fleet's shared informers: Run waits for those of
	// claims, volumes, classes and nodes, and the elector follows the Lease
	// through the Lease route of Informers.Router (one is made when nil).
	Informers SharedInformers
	// Synced are more caches Run waits for.
	Synced []cache.InformerSynced
	// Leader works while the Elected leads.
	Leader Leader
	// OnLeaderChange, if set, is called with the Lease holder's identity
	// whenever it changes.
	OnLeaderChange func(holderIdentity string)
	// Metrics, if set, loses the provisioner's series once Run returned.
	Metrics *Metrics
}

// Elected is the skeleton of a controller of one provisioner that works
// while it holds the provisioner's Lease, one term at a time: the provision
// Controller and a fleet's hostPath coordinator embed one. Run waits for the
// caches and campaigns (without leader election it leads at once); each term
// it wins runs its Leader's Lead.
type Elected struct {
	// kind names the controller in logs and errors.
	kind string
	// name is the provisioner name, which never changes.
	name     string
	identity string
	synced   []cache.InformerSynced
	metrics  *Metrics
	elector  elector
	started  atomic.Bool
}

// NewElected returns the skeleton of the controller kind of the provisioner
// name, electing as le says; it starts nothing until Run.
func NewElected(kind, name string, le LeaderElectionConfig, deps ElectedDeps) (*Elected, error) {
	identity, err := replicaIdentity(le.Identity)
	if err != nil {
		return nil, err
	}
	inf := deps.Informers
	if inf.Router == nil {
		inf.Router = NewRouter(inf.Claims, inf.Volumes, inf.Leases)
		deps.Informers = inf
	}
	e := &Elected{
		kind:     kind,
		name:     name,
		identity: identity,
		synced:   append([]cache.InformerSynced{inf.Claims.HasSynced, inf.Volumes.HasSynced, inf.Classes.HasSynced, inf.Nodes.HasSynced}, deps.Synced...),
		metrics:  deps.Metrics,
	}
	if !le.Enabled {
		e.elector = leaderelection.NewAlwaysLeader(leaderelection.LeaderCallbacks{OnStartedLeading: deps.Leader.Lead})
		return e, nil
	}
	e.elector = leaderelection.NewLeaderElector(e.electionConfig(le, deps))
	return e, nil
}

// electionConfig is the configuration of the elector on the provisioner's
// Lease, which follows the Lease through the Lease route of the shared
// router.
func (e *Elected) electionConfig(le LeaderElectionConfig, deps ElectedDeps) leaderelection.Config {
	return leaderelection.Config{
		Client:              deps.Client,
		Lease:               types.NamespacedName{Namespace: le.Namespace, Name: LeaseName(e.name)},
		Identity:            e.identity,
		LeaseDuration:       le.LeaseDuration,
		RenewDeadline:       le.RenewDeadline,
		RetryPeriod:         le.RetryPeriod,
		LegacyLockNamespace: le.LegacyLockNamespace,
		Leases:              deps.Informers.Router.leases,
		Sightings:           deps.Informers.Router.sightings,
		Callbacks:           leaderelection.LeaderCallbacks{OnStartedLeading: deps.Leader.Lead, OnNewLeader: deps.OnLeaderChange},
	}
}

// Run works until ctx ends, as the leader of its provisioner when leader
// election is on. It returns once the last term's work stopped, its Lease
// was released (unless KeepLease, or a term that gave up on hung work, kept
// it) and its metric series were deleted.
func (e *Elected) Run(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return fmt.Errorf("cannot run %s %q twice", e.kind, e.name)
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "provisioner", e.name)
	ctx = klog.NewContext(ctx, logger)
	if e.metrics != nil {
		defer e.metrics.deleteSeries(e.name)
	}
	logger.Info("Starting "+e.kind, "identity", e.identity)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, e.synced...) {
		return nil
	}
	e.elector.Run(ctx)
	logger.Info("Stopped " + e.kind)
	return nil
}

// Identity is the name of this replica in the Lease.
func (e *Elected) Identity() string { return e.identity }

// IsLeader is true when leader election is off, or this replica holds the
// Lease and works.
func (e *Elected) IsLeader() bool { return e.elector.IsLeader() }

// LeaseHealthy is nil unless this replica leads and its lease renewal is
// overdue.
func (e *Elected) LeaseHealthy() error { return e.elector.CheckRenewal() }

// KeepLease makes the coming stop keep the Lease held rather than release
// it. A replacement started right after Run returned, with the same identity
// and lease settings, takes the Lease over at once, and no other replica can
// win it in between.
func (e *Elected) KeepLease() { e.elector.KeepLease() }

// term is one period of leadership: its queues, workers and event handlers.
type term struct {
	claims      loop[claimKey]
	volumes     loop[string]
	saves       *workqueue.Queue[string]
	saveLimiter *workqueue.RetryLimiter[string]
	// reclaims runs reclaim, one at a time; nil without a Reclaimer.
	reclaims       *workqueue.Queue[struct{}]
	reclaimLimiter *workqueue.RetryLimiter[struct{}]
	// pending holds the PersistentVolumes waiting in saves, by name.
	pending sync.Map
	// probes probe the backend; nil without a Prober.
	probes *probes
}

// Lead starts the work of one term, which lasts until ctx ends; the returned
// stop waits for it to end. Run's elector calls it whenever this controller
// wins its Lease.
func (c *Controller) Lead(ctx context.Context) (stop func()) {
	logger := klog.FromContext(ctx)
	t := c.newTerm(ctx)
	t.probes = c.startProbes(ctx)
	c.subscribe(ctx, t)

	c.mu.Lock()
	c.term = t
	t.resize(c.cfg)
	c.mu.Unlock()
	// Subscribed first, so that no change falls between the listing and the
	// events.
	c.enqueueAll(t)
	resync := c.resyncEvery(t, c.config().ResyncPeriod)
	logger.Info("Leading: provisioning")

	return func() {
		c.mu.Lock()
		c.term = nil
		c.mu.Unlock()
		// Events first, so nothing is queued after the queues shut down.
		resync.stop()
		c.unsubscribe(ctx)
		drain := c.config().Timeouts.Drain
		giveUp, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
		defer cancel()
		queues := []workqueue.Drainable{t.claims.queue, t.volumes.queue, t.saves}
		if t.reclaims != nil {
			queues = append(queues, t.reclaims)
		}
		busy := workqueue.ShutDownWithDrain(giveUp.Done(), queues...)
		busy = append(busy, t.probes.wait(giveUp.Done())...)
		defer c.forgetHealth()
		if len(busy) > 0 {
			// A call that ignores its cancelled context may still finish.
			// Releasing the Lease would let another replica work on the same
			// objects meanwhile: it is left to expire instead, once the
			// elector stops renewing it when this returns.
			c.KeepLease()
			c.mu.Lock()
			c.abandoned = append(c.abandoned, busy...)
			c.mu.Unlock()
			logger.Info("Stopped leading without waiting longer for work that ignores cancellation: the Lease is left to expire", "drain", drain)
			c.notifyStuck()
			return
		}
		logger.Info("Stopped leading")
	}
}

// subscribe delivers the events of this provisioner's claims and volumes to
// t until unsubscribe.
func (c *Controller) subscribe(ctx context.Context, t *term) {
	c.eventsMu.Lock()
	defer c.eventsMu.Unlock()
	keys := func() []routeKey { return append(c.nameKeys(), finalizerKey(c.finalizer)) }
	if events, err := c.informers.Router.claims.Subscribe(keys, c.claimHandler(t)); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot watch claims")
	} else {
		c.events = append(c.events, events)
	}
	if events, err := c.informers.Router.volumes.Subscribe(c.nameKeys, c.volumeHandler(t)); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot watch volumes")
	} else {
		c.events = append(c.events, events)
	}
}

// unsubscribe ends the deliveries subscribe started: none is under way or
// follows once it returned.
func (c *Controller) unsubscribe(ctx context.Context) {
	c.eventsMu.Lock()
	defer c.eventsMu.Unlock()
	for _, events := range c.events {
		if err := events.Stop(); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Cannot stop watching")
		}
	}
	c.events = nil
}

// refreshSubscriptions subscribes the term under way under the names of
// the configuration of now.
func (c *Controller) refreshSubscriptions() {
	c.eventsMu.Lock()
	defer c.eventsMu.Unlock()
	for _, events := range c.events {
		events.Refresh()
	}
}

// resyncTimer queues everything of a term again every period, on a timer
// rather than a goroutine of its own.
type resyncTimer struct {
	mu      sync.Mutex
	timer   clock.Timer // nil without a period
	stopped bool
}

// resyncEvery starts the resyncs of t; a zero period turns them off.
func (c *Controller) resyncEvery(t *term, period time.Duration) *resyncTimer {
	r := &resyncTimer{}
	if period == 0 {
		return r
	}
	var resync func()
	resync = func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.stopped {
			return
		}
		c.enqueueAll(t)
		r.timer = c.clock.AfterFunc(period, resync)
	}
	r.mu.Lock()
	r.timer = c.clock.AfterFunc(period, resync)
	r.mu.Unlock()
	return r
}

// stop ends the resyncs; none is under way or follows once it returned.
func (r *resyncTimer) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if r.timer != nil {
		r.timer.Stop()
	}
}

func (c *Controller) newTerm(ctx context.Context) *term {
	cfg := c.config()
	t := &term{
		claims:         loop[claimKey]{retries: c.claimRetries},
		volumes:        loop[string]{retries: c.volumeRetries},
		saveLimiter:    workqueue.NewRetryLimiter[string](saveRetry(cfg)),
		reclaimLimiter: workqueue.NewRetryLimiter[struct{}](rateLimits(cfg.Retry)),
	}
	metrics := queueMetricsProvider{c.metrics}
	t.claims.queue = workqueue.NewRateLimitingQueue(c.claimRetries.Limiter(),
		workqueue.Config{Name: queueName("claims", c.name), MaxWorkers: cfg.Workers, MetricsProvider: metrics},
		func() { runWorker(ctx, t.claims.queue, claimWorker{c, t}) })
	t.volumes.queue = workqueue.NewRateLimitingQueue(c.volumeRetries.Limiter(),
		workqueue.Config{Name: queueName("volumes", c.name), MaxWorkers: cfg.Workers, MetricsProvider: metrics},
		func() { runWorker(ctx, t.volumes.queue, volumeWorker{c, t}) })
	t.saves = workqueue.NewRateLimitingQueue(t.saveLimiter,
		workqueue.Config{Name: queueName("volumesave", c.name), MaxWorkers: 1, MetricsProvider: metrics},
		func() {
			runWorker(ctx, t.saves, workFunc[string](func(ctx context.Context, name string) { c.saveVolumeAgain(ctx, t, name) }))
		})
	if c.reclaimer != nil {
		// Every leading controller reclaims once; series for that would
		// cost every idle one.
		t.reclaims = workqueue.NewRateLimitingQueue(t.reclaimLimiter,
			workqueue.Config{Name: queueName("reclaim", c.name), MaxWorkers: 1},
			func() {
				runWorker(ctx, t.reclaims, workFunc[struct{}](func(ctx context.Context, _ struct{}) { c.reclaimAndRetry(ctx, t) }))
			})
	}
	return t
}

// itemWorker is what each worker of a term's queue does with an item: the
// claim and volume workers sync it, the save and reclaim workers try again.
type itemWorker[K comparable] interface {
	work(ctx context.Context, key K)
}

// workFunc is an itemWorker of one function, as http.HandlerFunc is a
// handler.
type workFunc[K comparable] func(ctx context.Context, key K)

func (f workFunc[K]) work(ctx context.Context, key K) { f(ctx, key) }

// runWorker is the goroutine of one worker of queue, which the queue starts
// when it has an item that no running worker will take. It hands w the
// items until none is ready and then ends, so an idle queue holds no
// goroutine.
func runWorker[K comparable](ctx context.Context, queue *workqueue.Queue[K], w itemWorker[K]) {
	for {
		key, ok := queue.Get()
		if !ok {
			return
		}
		w.work(ctx, key)
		queue.Done(key)
	}
}

// loop is the claim or the volume queue of a term and the retries of its
// items, which outlive the term.
type loop[K comparable] struct {
	queue   *workqueue.Queue[K]
	retries *workqueue.Retries[K]
}

// skips reports whether the worker leaves key untouched: the controller is
// stopping, or the item was given up on and waits for a change of its
// object, which forgets the failures (a retry queued before it was given up
// is not one).
func (l *loop[K]) skips(ctx context.Context, key K) bool {
	return ctx.Err() != nil || l.retries.GaveUp(key)
}

// settle follows the sync of key, which ended at the object version
// version with err: a success forgets the failures; a failure that waits
// tells (the claim or volume waits for what it lacks: an available
// backend, room) is tried again when it says, any other after its backoff,
// or given up on after threshold failures.
func (l *loop[K]) settle(ctx context.Context, key K, version string, err error, threshold int,
	waits func(key K, err error) (retryIn time.Duration, why string, waits bool)) {
	if err == nil {
		l.retries.Forget(key)
		return
	}
	if ctx.Err() != nil {
		return
	}
	if retryIn, why, waits := waits(key, err); waits {
		l.queue.AddAfter(key, retryIn)
		utilruntime.HandleErrorWithContext(ctx, err, "Will retry, not counted as a failure", "item", key, "reason", why, "retryIn", retryIn)
		return
	}
	if l.retries.Failed(l.queue, key, version, threshold) {
		utilruntime.HandleErrorWithContext(ctx, err, "Giving up until the object changes", "item", key, "failures", l.queue.NumRequeues(key))
	} else {
		utilruntime.HandleErrorWithContext(ctx, err, "Will retry", "item", key, "failures", l.queue.NumRequeues(key))
	}
}

// resize applies the worker count and retry rates of cfg; callers hold c.mu.
func (t *term) resize(cfg Config) {
	t.claims.queue.SetMaxWorkers(cfg.Workers)
	t.volumes.queue.SetMaxWorkers(cfg.Workers)
	t.saveLimiter.Retune(saveRetry(cfg))
	t.reclaimLimiter.Retune(rateLimits(cfg.Retry))
}

// rateLimits are the limits of the retries r configures.
func rateLimits(r RetryConfig) workqueue.RateLimits {
	return workqueue.RateLimits{
		Exponential:  r.ExponentialBackoff,
		InitialDelay: r.InitialDelay,
		MaxDelay:     r.MaxDelay,
		QPS:          r.QPS,
		Burst:        r.Burst,
	}
}

// saveRetry paces the RetryForever volume store: from the save interval up to
// the maximum backoff, within the queue rate.
func saveRetry(cfg Config) workqueue.RateLimits {
	l := rateLimits(cfg.Retry)
	l.Exponential = true
	l.InitialDelay = cfg.VolumeSave.Interval
	l.MaxDelay = max(cfg.VolumeSave.Interval, cfg.Retry.MaxDelay)
	return l
}

// enqueueAll queues every claim and volume this controller may have to act
// on, what enqueuePending queues, and a reclaim.
func (c *Controller) enqueueAll(t *term) {
	for _, obj := range c.informers.Claims.GetStore().List() {
		c.enqueueClaim(t, obj)
	}
	for _, obj := range c.informers.Volumes.GetStore().List() {
		c.enqueueVolume(t, obj)
	}
	c.enqueuePending(t)
	if t.reclaims != nil {
		t.reclaims.Add(struct{}{})
	}
}

// enqueuePending queues the items still backing off and the claims
// provisioned in the background, which no informer event may bring back.
func (c *Controller) enqueuePending(t *term) {
	c.claimRetries.Requeue(t.claims.queue)
	c.volumeRetries.Requeue(t.volumes.queue)
	c.inProgress.Range(func(_, obj any) bool {
		t.claims.queue.Add(keyOfClaim(obj.(*background).claim))
		return true
	})
}
