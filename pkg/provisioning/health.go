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
	"errors"
	"time"

	"k8s.io/klog/v2"
)

// Health is what the probes of a Prober backend found while this instance
// led.
type Health struct {
	// Err is nil unless the last probe failed: the backend is unavailable.
	Err error
	// Space is what the last successful probe found; nil before one.
	Space *Space
	// ProbedAt is when that probe ran.
	ProbedAt time.Time
}

// changedFrom reports whether h differs from old enough to tell: the
// backend turned available or unavailable, its error changed, or its space
// Moved.
func (h Health) changedFrom(old Health) bool {
	switch {
	case (h.Err == nil) != (old.Err == nil):
		return true
	case h.Err != nil && h.Err.Error() != old.Err.Error():
		return true
	case (h.Space == nil) != (old.Space == nil):
		return true
	}
	return h.Space != nil && h.Space.Moved(*old.Space)
}

// Health returns what the probes of the current or last term found; the
// zero Health without a Prober, or before the first probe.
func (c *Controller) Health() Health {
	c.healthMu.Lock()
	defer c.healthMu.Unlock()
	return c.health
}

// backendWaits reports whether the last probe failed and, if so, when a
// failed item is to be tried again: at the next probe. Its failure does not
// count, so that items wait for the backend rather than being given up on.
func (c *Controller) backendWaits() (retryIn time.Duration, why string, waits bool) {
	if c.Health().Err == nil {
		return 0, "", false
	}
	return c.config().ProbeInterval, "backend unavailable", true
}

// volumeWaits reports whether the failure of a volume is waited out rather
// than counted: volumes wait for an unavailable backend and for the clones
// copied from them, claims for room too (claimWaits). The last copy's end
// queues its source at once; the retry is a fallback.
func (c *Controller) volumeWaits(_ string, err error) (retryIn time.Duration, why string, waits bool) {
	if errors.Is(err, errCopying) {
		return c.config().Retry.MaxDelay, "clones are being copied from it", true
	}
	return c.backendWaits()
}

// probes are the probes of one term, run by one goroutine.
type probes struct {
	// now, of one slot, asks for a probe; requests coalesce.
	now  chan struct{}
	done chan struct{}
}

// startProbes probes the backend at once, then every ProbeInterval and when
// asked, until ctx ends; nil without a Prober.
func (c *Controller) startProbes(ctx context.Context) *probes {
	if c.prober == nil {
		return nil
	}
	p := &probes{now: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			c.probe(ctx)
			timer := c.clock.NewTimer(c.config().ProbeInterval)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C():
			case <-p.now:
				timer.Stop()
			}
		}
	}()
	return p
}

// ask asks for a probe now, unless one is asked for already.
func (p *probes) ask() {
	select {
	case p.now <- struct{}{}:
	default:
	}
}

// wait waits for the probes to end, until giveUp; it returns their end when
// it gave up.
func (p *probes) wait(giveUp <-chan struct{}) []<-chan struct{} {
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	case <-giveUp:
		return []<-chan struct{}{p.done}
	}
}

// probeSoon asks the term under way for a probe: a failed Provision or
// Delete may be the first sign of an outage. During a known outage the
// probes of the interval tell when it ends: the failures of every waiting
// item would otherwise probe the backend without pause.
func (c *Controller) probeSoon() {
	if c.Health().Err != nil {
		return
	}
	c.mu.Lock()
	t := c.term
	c.mu.Unlock()
	if t != nil && t.probes != nil {
		t.probes.ask()
	}
}

// probe probes the backend once, under a deadline of the probe interval.
func (c *Controller) probe(ctx context.Context) {
	var space Space
	var budget *Budget
	// Before the probe: what is made meanwhile may not be in its figures.
	probedAt := time.Now()
	err := c.guard(ctx, "probe", c.config().ProbeInterval, func(ctx context.Context) error {
		var err error
		if space, err = c.prober.Probe(ctx); err == nil {
			// Under the deadline too: a backend may count its budget under
			// the lock of a hung operation.
			budget = c.readBudget(ctx)
		}
		return err
	})
	if ctx.Err() != nil {
		// The term ended: the failure is the stop's, not the backend's.
		return
	}
	c.recordProbe(ctx, space, probedAt, err)
	if err == nil {
		c.metrics.observeBudget(c.name, budget)
	}
}

// readBudget returns the capacity budget of a BudgetReporter backend; nil
// for another backend, or when it cannot count it.
func (c *Controller) readBudget(ctx context.Context) *Budget {
	reporter, ok := c.prober.(BudgetReporter)
	if !ok {
		return nil
	}
	budget, err := reporter.Budget()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot count the use of the capacity budget")
		return nil
	}
	return &budget
}

// recordProbe keeps the result of a probe begun at probedAt, exports it and
// tells of a change.
func (c *Controller) recordProbe(ctx context.Context, space Space, probedAt time.Time, err error) {
	logger := klog.FromContext(ctx)
	c.metrics.observeProbe(c.name, space, err)
	c.healthMu.Lock()
	was := c.health
	if err == nil {
		c.health = Health{Space: &space, ProbedAt: probedAt}
	} else {
		c.health.Err = err
	}
	changed := c.health.changedFrom(c.reported)
	if changed {
		c.reported = c.health
	}
	c.healthMu.Unlock()
	switch {
	case err != nil && was.Err == nil:
		logger.Error(err, "Backend unavailable: failures do not count towards the thresholds until it answers again")
	case err == nil && was.Err != nil:
		logger.Info("Backend available again")
	}
	if changed && c.onHealthChange != nil {
		c.onHealthChange()
	}
}

// forgetHealth forgets what the probes of a term found once it ended: a
// replica that does not lead knows nothing of the backend.
func (c *Controller) forgetHealth() {
	c.healthMu.Lock()
	c.health, c.reported = Health{}, Health{}
	c.healthMu.Unlock()
	c.metrics.deleteHealthSeries(c.name)
}
