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

	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/provfleet/provfleet/internal/workqueue"
)

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

// lead starts the work of one term, which lasts until ctx ends; the returned
// stop waits for it to end.
func (c *Controller) lead(ctx context.Context) (stop func()) {
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
			c.elector.KeepLease()
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
	paused := func() bool { return c.config().Paused }
	t := &term{
		claims: loop[claimKey]{
			retries:   c.claimRetries,
			threshold: func() int { return c.config().Retry.ProvisionFailureThreshold },
			paused:    paused,
			waits:     c.claimWaits,
		},
		volumes: loop[string]{
			retries:   c.volumeRetries,
			threshold: func() int { return c.config().Retry.DeleteFailureThreshold },
			paused:    paused,
			waits:     c.volumeWaits,
			sync:      c.syncVolume,
		},
		saveLimiter:    workqueue.NewRetryLimiter[string](saveRetry(cfg)),
		reclaimLimiter: workqueue.NewRetryLimiter[struct{}](rateLimits(cfg.Retry)),
	}
	t.claims.sync = c.claimSync(t)
	metrics := queueMetricsProvider{c.metrics}
	t.claims.queue = workqueue.NewRateLimitingQueue(c.claimRetries.Limiter(),
		workqueue.Config{Name: queueName("claims", c.name), MaxWorkers: cfg.Workers, MetricsProvider: metrics},
		func() { runWorker(ctx, t.claims.queue, t.claims.handle) })
	t.volumes.queue = workqueue.NewRateLimitingQueue(c.volumeRetries.Limiter(),
		workqueue.Config{Name: queueName("volumes", c.name), MaxWorkers: cfg.Workers, MetricsProvider: metrics},
		func() { runWorker(ctx, t.volumes.queue, t.volumes.handle) })
	t.saves = workqueue.NewRateLimitingQueue(t.saveLimiter,
		workqueue.Config{Name: queueName("volumesave", c.name), MaxWorkers: 1, MetricsProvider: metrics},
		func() {
			runWorker(ctx, t.saves, func(ctx context.Context, name string) { c.saveVolumeAgain(ctx, t, name) })
		})
	if c.reclaimer != nil {
		// Every leading controller reclaims once; series for that would
		// cost every idle one.
		t.reclaims = workqueue.NewRateLimitingQueue(t.reclaimLimiter,
			workqueue.Config{Name: queueName("reclaim", c.name), MaxWorkers: 1},
			func() {
				runWorker(ctx, t.reclaims, func(ctx context.Context, _ struct{}) { c.reclaimAndRetry(ctx, t) })
			})
	}
	return t
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
		claim := obj.(*corev1.PersistentVolumeClaim)
		t.claims.queue.Add(keyOfClaim(claim))
		return true
	})
}
