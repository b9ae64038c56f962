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

package workqueue

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/provfleet/provfleet/internal/polltest"
)

// recorder is a process function that records what it ran and can hold items
// until released.
type recorder struct {
	mu      sync.Mutex
	ran     []string
	running map[string]int
	overlap []string // items seen in two workers at once
	active  int
	peak    int
	gates   map[string]chan struct{}
}

func newRecorder() *recorder {
	return &recorder{running: map[string]int{}, gates: map[string]chan struct{}{}}
}

// hold makes the next runs of item wait until release.
func (r *recorder) hold(item string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gates[item] = make(chan struct{})
}

func (r *recorder) release(item string) {
	r.mu.Lock()
	gate := r.gates[item]
	delete(r.gates, item)
	r.mu.Unlock()
	close(gate)
}

func (r *recorder) process(item string) {
	r.mu.Lock()
	r.running[item]++
	if r.running[item] > 1 {
		r.overlap = append(r.overlap, item)
	}
	r.active++
	r.peak = max(r.peak, r.active)
	gate := r.gates[item]
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	r.mu.Lock()
	r.running[item]--
	r.active--
	r.ran = append(r.ran, item)
	r.mu.Unlock()
}

func (r *recorder) snapshot() (ran []string, active, peak int, overlap []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ran), r.active, r.peak, slices.Clone(r.overlap)
}

// testProvider keeps the series of one queue, unregistered, and counts what
// the queue asked of it.
type testProvider struct {
	mu       sync.Mutex
	created  int
	deleted  int
	inFlight InFlight
	depth    prometheus.Gauge
	retries  prometheus.Counter
}

func (p *testProvider) NewQueueMetrics(_ string, inFlight InFlight) QueueMetrics {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.created++
	p.inFlight = inFlight
	p.depth = prometheus.NewGauge(prometheus.GaugeOpts{Name: "depth"})
	p.retries = prometheus.NewCounter(prometheus.CounterOpts{Name: "retries"})
	return QueueMetrics{
		Depth: p.depth, Adds: prometheus.NewCounter(prometheus.CounterOpts{Name: "adds"}), Retries: p.retries,
		Latency:      prometheus.NewHistogram(prometheus.HistogramOpts{Name: "latency"}),
		WorkDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "work"}),
		Delete: func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.deleted++
		},
	}
}

// counts returns how often series were created and deleted.
func (p *testProvider) counts() (created, deleted int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.created, p.deleted
}

func newTestQueue(t *testing.T, workers int, r *recorder) (*Queue[string], *testProvider) {
	t.Helper()
	p := &testProvider{}
	limiter := NewRetryLimiter[string](RateLimits{InitialDelay: time.Millisecond, MaxDelay: time.Millisecond, QPS: 1000, Burst: 1000})
	var q *Queue[string]
	q = NewRateLimitingQueue(limiter, Config{Name: "claims:p", MaxWorkers: workers, MetricsProvider: p}, func() {
		for {
			item, ok := q.Get()
			if !ok {
				return
			}
			r.process(item)
			q.Done(item)
		}
	})
	t.Cleanup(q.ShutDown)
	return q, p
}

func (q *Queue[K]) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.workers == 0 && len(q.order) == 0
}

func TestWorkQueueRunsAnItemOnceWhileQueuedAndAgainWhenAddedWhileHeld(t *testing.T) {
	r := newRecorder()
	q, _ := newTestQueue(t, 1, r)
	r.hold("a")
	q.Add("a")
	polltest.Eventually(t, "a held", func() bool { _, active, _, _ := r.snapshot(); return active == 1 })
	for range 3 {
		q.Add("b")
		q.Add("a")
	}
	r.release("a")
	polltest.Eventually(t, "queue drained", q.idle)

	ran, _, _, overlap := r.snapshot()
	if diff := cmp.Diff([]string{"a", "b", "a"}, ran); diff != "" {
		t.Errorf("items run (-want +got):\n%s", diff)
	}
	if len(overlap) > 0 {
		t.Errorf("items held by two workers at once: %v", overlap)
	}
}

func TestWorkQueueStartsWorkersOnDemandWithinTheLimit(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r := newRecorder()
	q, _ := newTestQueue(t, 3, r)
	items := []string{"a", "b", "c", "d", "e", "f"}
	for _, item := range items {
		r.hold(item)
		q.Add(item)
	}
	polltest.Eventually(t, "three workers busy", func() bool { _, active, _, _ := r.snapshot(); return active == 3 })

	q.SetMaxWorkers(5)
	polltest.Eventually(t, "five workers busy", func() bool { _, active, _, _ := r.snapshot(); return active == 5 })
	q.SetMaxWorkers(1)
	for _, item := range items {
		r.release(item)
	}
	polltest.Eventually(t, "queue drained", q.idle)

	ran, _, peak, overlap := r.snapshot()
	slices.Sort(ran)
	if diff := cmp.Diff(items, ran); diff != "" {
		t.Errorf("items run (-want +got):\n%s", diff)
	}
	if peak != 5 || len(overlap) > 0 {
		t.Errorf("peak workers %d (want 5), items held twice: %v", peak, overlap)
	}
	// An idle queue holds no goroutine: goleak checks it on return.
}

func TestWorkQueueCreatesItsSeriesOnFirstUse(t *testing.T) {
	r := newRecorder()
	q, p := newTestQueue(t, 1, r)
	if created, _ := p.counts(); created != 0 {
		t.Fatalf("series created %d times before any work, want 0", created)
	}
	q.Add("a")
	polltest.Eventually(t, "queue drained", q.idle)
	if created, deleted := p.counts(); created != 1 || deleted != 0 {
		t.Errorf("series created %d and deleted %d times after one item, want 1 and 0", created, deleted)
	}
}

func TestWorkQueueAddAfterKeepsTheEarlierDelay(t *testing.T) {
	r := newRecorder()
	q, p := newTestQueue(t, 2, r)
	q.AddAfter("later-first", time.Hour)
	q.AddAfter("later-first", time.Millisecond)
	q.AddAfter("sooner-first", time.Millisecond)
	q.AddAfter("sooner-first", time.Hour)
	q.AddAfter("never", time.Hour)
	polltest.Eventually(t, "both items run", func() bool { ran, _, _, _ := r.snapshot(); return len(ran) == 2 })

	ran, _, _, _ := r.snapshot()
	slices.Sort(ran)
	if diff := cmp.Diff([]string{"later-first", "sooner-first"}, ran); diff != "" {
		t.Errorf("items run (-want +got):\n%s", diff)
	}
	q.mu.Lock()
	waiting := len(q.delayed)
	q.mu.Unlock()
	if waiting != 1 {
		t.Errorf("%d items wait, want 1 (never)", waiting)
	}
	if got := testutil.ToFloat64(p.retries); got != 5 {
		t.Errorf("retries = %v, want 5", got)
	}
	if created, _ := p.counts(); created != 1 {
		t.Errorf("series created %d times, want 1", created)
	}
}

func TestWorkQueueShutDownWaitsForHeldItemsAndDropsTheRest(t *testing.T) {
	r := newRecorder()
	q, p := newTestQueue(t, 1, r)
	r.hold("held")
	q.Add("held")
	polltest.Eventually(t, "item held", func() bool { _, active, _, _ := r.snapshot(); return active == 1 })
	q.Add("queued")

	if unfinished, _ := p.inFlight(time.Now()); unfinished <= 0 {
		t.Errorf("unfinished work = %v while an item is held, want > 0", unfinished)
	}
	if got := testutil.ToFloat64(p.depth); got != 1 {
		t.Errorf("depth = %v, want 1", got)
	}
	// Added after the depth is read, which it joins once due.
	q.AddAfter("delayed", 10*time.Millisecond)

	done := make(chan struct{})
	go func() {
		q.ShutDown()
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("ShutDown returned while an item was held")
	case <-time.After(50 * time.Millisecond):
	}
	r.release("held")
	<-done
	q.Add("after")
	time.Sleep(30 * time.Millisecond) // past the delayed item's due time

	ran, _, _, _ := r.snapshot()
	if diff := cmp.Diff([]string{"held"}, ran); diff != "" {
		t.Errorf("items run (-want +got):\n%s", diff)
	}
	if created, deleted := p.counts(); created != 1 || deleted != 1 {
		t.Errorf("series created %d and deleted %d times by the end, want 1 and 1", created, deleted)
	}
}
