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
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
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

func newTestQueue(t *testing.T, workers int, r *recorder) (*workQueue[string], *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	q := newWorkQueue(m, queueName("claims", "p"), workers, r.process)
	t.Cleanup(q.ShutDown)
	return q, reg
}

func (q *workQueue[K]) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.workers == 0 && len(q.order) == 0
}

func TestWorkQueueRunsAnItemOnceWhileQueuedAndAgainWhenAddedWhileHeld(t *testing.T) {
	r := newRecorder()
	q, _ := newTestQueue(t, 1, r)
	r.hold("a")
	q.Add("a")
	eventually(t, "a held", func() bool { _, active, _, _ := r.snapshot(); return active == 1 })
	for range 3 {
		q.Add("b")
		q.Add("a")
	}
	r.release("a")
	eventually(t, "queue drained", q.idle)

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
	eventually(t, "three workers busy", func() bool { _, active, _, _ := r.snapshot(); return active == 3 })

	q.setWorkers(5)
	eventually(t, "five workers busy", func() bool { _, active, _, _ := r.snapshot(); return active == 5 })
	q.setWorkers(1)
	for _, item := range items {
		r.release(item)
	}
	eventually(t, "queue drained", q.idle)

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
	q, reg := newTestQueue(t, 1, r)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("%d series before any work (err %v), want 0", n, err)
	}
	q.Add("a")
	eventually(t, "queue drained", q.idle)
	// depth, adds, retries, latency, work duration and the two in-flight gauges.
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 7 {
		t.Errorf("%d series after one item (err %v), want 7", n, err)
	}
}

func TestWorkQueueAddAfterKeepsTheEarlierDelay(t *testing.T) {
	r := newRecorder()
	q, reg := newTestQueue(t, 2, r)
	q.AddAfter("later-first", time.Hour)
	q.AddAfter("later-first", time.Millisecond)
	q.AddAfter("sooner-first", time.Millisecond)
	q.AddAfter("sooner-first", time.Hour)
	q.AddAfter("never", time.Hour)
	eventually(t, "both items run", func() bool { ran, _, _, _ := r.snapshot(); return len(ran) == 2 })

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
	if got := testutil.ToFloat64(q.metrics.retries); got != 5 {
		t.Errorf("retries = %v, want 5", got)
	}
	if got := testutil.CollectAndCount(reg, "workqueue_retries_total"); got != 1 {
		t.Errorf("%d retry series, want 1", got)
	}
}

func TestWorkQueueShutDownWaitsForHeldItemsAndDropsTheRest(t *testing.T) {
	r := newRecorder()
	q, reg := newTestQueue(t, 1, r)
	r.hold("held")
	q.Add("held")
	eventually(t, "item held", func() bool { _, active, _, _ := r.snapshot(); return active == 1 })
	q.Add("queued")
	q.AddAfter("delayed", 10*time.Millisecond)

	unfinished := gaugeValue(t, reg, "workqueue_unfinished_work_seconds")
	if unfinished <= 0 {
		t.Errorf("unfinished work = %v while an item is held, want > 0", unfinished)
	}
	if got := testutil.ToFloat64(q.metrics.depth); got != 1 {
		t.Errorf("depth = %v, want 1", got)
	}

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
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("%d series left after shut down (err %v), want 0", n, err)
	}
}

// gaugeValue returns the value of the one series of a gauge family in reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no single series of %s", name)
	return 0
}
