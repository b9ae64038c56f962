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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// workQueue is one controller's queue of one kind of item, with its workers.
// It keeps the contract of client-go's work queue: an item waits in the queue
// once however often it is added, no two workers hold the same item, and an
// item added while a worker holds it runs again afterwards. Unlike client-go's
// queue it starts workers only while it has items and delays items with
// runtime timers, so an idle queue holds no goroutine: one process can run
// hundreds of idle provisioners.
type workQueue[K comparable] struct {
	process func(K)
	name    string
	// allMetrics holds the queue's series, created on first use: a queue that
	// never had work costs none.
	allMetrics *Metrics

	mu         sync.Mutex
	order      []K
	dirty      map[K]time.Time // items to process, and when they were added
	processing map[K]time.Time // items workers hold, and since when
	delayed    map[K]*delayedItem
	metrics    *queueMetrics
	maxWorkers int
	workers    int
	shutDown   bool
	// stopped is closed once the queue is shut down and no worker is left.
	stopped chan struct{}
}

type delayedItem struct {
	timer *time.Timer
	due   time.Time
}

// newWorkQueue returns a queue named name (see queueName) whose items are
// handed to process by up to workers goroutines at a time. Without m it keeps
// no metric series.
func newWorkQueue[K comparable](m *Metrics, name string, workers int, process func(K)) *workQueue[K] {
	return &workQueue[K]{
		process:    process,
		name:       name,
		allMetrics: m,
		dirty:      map[K]time.Time{},
		processing: map[K]time.Time{},
		delayed:    map[K]*delayedItem{},
		maxWorkers: workers,
		stopped:    make(chan struct{}),
	}
}

// series returns the queue's metric series; callers hold q.mu.
func (q *workQueue[K]) series() *queueMetrics {
	switch {
	case q.metrics != nil:
	case q.allMetrics == nil:
		q.metrics = discardQueueMetrics
	default:
		q.metrics = q.allMetrics.queueMetrics(q.name, q.inFlight)
	}
	return q.metrics
}

// discardQueueMetrics are the series of queues made without Metrics: they
// are counted nowhere.
var discardQueueMetrics = &queueMetrics{
	depth:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "discarded"}),
	adds:         prometheus.NewCounter(prometheus.CounterOpts{Name: "discarded"}),
	retries:      prometheus.NewCounter(prometheus.CounterOpts{Name: "discarded"}),
	latency:      prometheus.NewHistogram(prometheus.HistogramOpts{Name: "discarded"}),
	workDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "discarded"}),
	forget:       func() {},
}

// Add queues item unless it is queued already.
func (q *workQueue[K]) Add(item K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.add(item)
}

// AddAfter queues item once delay has passed, and counts a retry. Of two
// delays pending for one item, the earlier wins.
func (q *workQueue[K]) AddAfter(item K, delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutDown {
		return
	}
	q.series().retries.Inc()
	if delay <= 0 {
		q.add(item)
		return
	}
	due := time.Now().Add(delay)
	if pending, ok := q.delayed[item]; ok {
		if !due.Before(pending.due) {
			return
		}
		pending.timer.Stop()
	}
	entry := &delayedItem{due: due}
	entry.timer = time.AfterFunc(delay, func() { q.fire(item, entry) })
	q.delayed[item] = entry
}

func (q *workQueue[K]) fire(item K, entry *delayedItem) {
	q.mu.Lock()
	defer q.mu.Unlock()
	// A timer stopped too late still fires; only the item's current one counts.
	if q.delayed[item] != entry {
		return
	}
	delete(q.delayed, item)
	q.add(item)
}

// add queues item; callers hold q.mu.
func (q *workQueue[K]) add(item K) {
	if q.shutDown {
		return
	}
	if _, queued := q.dirty[item]; queued {
		return
	}
	q.series().adds.Inc()
	q.dirty[item] = time.Now()
	if _, held := q.processing[item]; held {
		// The worker holding it queues it again when done.
		return
	}
	q.order = append(q.order, item)
	q.series().depth.Inc()
	q.startWorkers()
}

// setWorkers changes how many workers may run at once. Extra workers stop as
// they finish their current item.
func (q *workQueue[K]) setWorkers(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.maxWorkers = n
	q.startWorkers()
}

// startWorkers starts a worker for each queued item that no running worker
// will take, within the limit; callers hold q.mu.
func (q *workQueue[K]) startWorkers() {
	if q.shutDown {
		return
	}
	for q.workers < q.maxWorkers && q.workers < len(q.order)+len(q.processing) {
		q.workers++
		go q.work()
	}
}

// work processes items until the queue is empty, then ends.
func (q *workQueue[K]) work() {
	for {
		q.mu.Lock()
		if q.shutDown || len(q.order) == 0 || q.workers > q.maxWorkers {
			q.workers--
			if q.shutDown && q.workers == 0 {
				close(q.stopped)
			}
			q.mu.Unlock()
			return
		}
		item := q.order[0]
		var zero K
		q.order[0] = zero
		q.order = q.order[1:]
		if len(q.order) == 0 {
			// Let the drained backing array go.
			q.order = nil
		}
		start := time.Now()
		q.series().depth.Dec()
		q.series().latency.Observe(start.Sub(q.dirty[item]).Seconds())
		delete(q.dirty, item)
		q.processing[item] = start
		q.mu.Unlock()

		q.process(item)

		q.mu.Lock()
		q.series().workDuration.Observe(time.Since(start).Seconds())
		delete(q.processing, item)
		if _, again := q.dirty[item]; again && !q.shutDown {
			q.order = append(q.order, item)
			q.series().depth.Inc()
		}
		q.mu.Unlock()
	}
}

// inFlight reports the seconds the held items have been worked on, summed and
// the longest.
func (q *workQueue[K]) inFlight(now time.Time) (unfinished, longest float64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, start := range q.processing {
		s := now.Sub(start).Seconds()
		unfinished += s
		longest = max(longest, s)
	}
	return unfinished, longest
}

// ShutDown drops the queued and delayed items, waits for the workers to
// finish their current item and deletes the queue's metric series. Adds
// after it are ignored, so no series is created after it.
func (q *workQueue[K]) ShutDown() {
	shutDown(nil, q)
}

// stopper is a work queue of any item type, for shutDown.
type stopper interface {
	stop() (idle <-chan struct{}, forget func())
}

// stop drops the queued and delayed items and starts no worker any more; it
// returns what is closed once the workers finished, and what deletes the
// queue's metric series.
func (q *workQueue[K]) stop() (<-chan struct{}, func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.shutDown {
		q.shutDown = true
		if q.workers == 0 {
			close(q.stopped)
		}
	}
	for _, entry := range q.delayed {
		entry.timer.Stop()
	}
	clear(q.delayed)
	clear(q.dirty)
	q.order = nil
	metrics := q.metrics
	return q.stopped, func() {
		if metrics != nil {
			metrics.forget()
		}
	}
}

// shutDown shuts every queue down at once and waits for their workers to
// finish their current item, or until giveUp is closed. It deletes the
// queues' metric series either way. It returns what is closed once the
// workers of each queue it gave up on finished: they finish their item later
// and then end.
func shutDown(giveUp <-chan struct{}, queues ...stopper) (busy []<-chan struct{}) {
	idle := make([]<-chan struct{}, len(queues))
	forget := make([]func(), len(queues))
	for i, q := range queues {
		idle[i], forget[i] = q.stop()
	}
	defer func() {
		for _, f := range forget {
			f()
		}
	}()
	for _, ch := range idle {
		select {
		case <-ch:
		case <-giveUp:
			// Workers that finished just now count as finished.
			select {
			case <-ch:
			default:
				busy = append(busy, ch)
			}
		}
	}
	return busy
}
