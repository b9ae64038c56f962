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
	"sync"
	"time"
)

// RateLimiter decides how long an item waits before it is queued again, like
// client-go's TypedRateLimiter.
type RateLimiter[T comparable] interface {
	// When records one more failure of item and returns its delay.
	When(item T) time.Duration
	// Forget clears the failures of item.
	Forget(item T)
	// NumRequeues is the number of failures of item.
	NumRequeues(item T) int
}

// Config names a queue and bounds its workers.
type Config struct {
	// Name labels the queue's metric series.
	Name string
	// MaxWorkers is how many workers may run at once.
	MaxWorkers int
	// MetricsProvider makes the queue's series on first use; nil keeps none.
	MetricsProvider MetricsProvider
}

// Queue is a rate-limited queue of one kind of item whose workers it starts
// itself: a worker for each queued item that no running worker will take,
// within MaxWorkers. A worker calls Get until it returns false, and Done for
// each item it got.
type Queue[K comparable] struct {
	limiter   RateLimiter[K]
	runWorker func()
	name      string
	provider  MetricsProvider

	mu         sync.Mutex
	order      []K
	dirty      map[K]time.Time // items to process, and when they were added
	processing map[K]time.Time // items workers hold, and since when
	delayed    map[K]*delayedItem
	metrics    *QueueMetrics // nil until the first use
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

// NewRateLimitingQueue returns a queue whose AddRateLimited delays items as
// limiter says, and whose workers, started on demand, run runWorker.
func NewRateLimitingQueue[K comparable](limiter RateLimiter[K], cfg Config, runWorker func()) *Queue[K] {
	return &Queue[K]{
		limiter:    limiter,
		runWorker:  runWorker,
		name:       cfg.Name,
		provider:   cfg.MetricsProvider,
		dirty:      map[K]time.Time{},
		processing: map[K]time.Time{},
		delayed:    map[K]*delayedItem{},
		maxWorkers: cfg.MaxWorkers,
		stopped:    make(chan struct{}),
	}
}

// series returns the queue's metric series; callers hold q.mu.
func (q *Queue[K]) series() *QueueMetrics {
	switch {
	case q.metrics != nil:
	case q.provider == nil:
		q.metrics = &noMetrics
	default:
		m := q.provider.NewQueueMetrics(q.name, q.inFlight)
		q.metrics = &m
	}
	return q.metrics
}

// Add queues item unless it is queued already.
func (q *Queue[K]) Add(item K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.add(item)
}

// AddRateLimited queues item after the delay the rate limiter gives it.
func (q *Queue[K]) AddRateLimited(item K) {
	q.AddAfter(item, q.limiter.When(item))
}

// Forget clears the failures the rate limiter counted for item.
func (q *Queue[K]) Forget(item K) {
	q.limiter.Forget(item)
}

// NumRequeues is how often the rate limiter delayed item since it was last
// forgotten.
func (q *Queue[K]) NumRequeues(item K) int {
	return q.limiter.NumRequeues(item)
}

// AddAfter queues item once delay has passed, and counts a retry. Of two
// delays pending for one item, the earlier wins.
func (q *Queue[K]) AddAfter(item K, delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutDown {
		return
	}
	q.series().Retries.Inc()
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

func (q *Queue[K]) fire(item K, entry *delayedItem) {
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
func (q *Queue[K]) add(item K) {
	if q.shutDown {
		return
	}
	if _, queued := q.dirty[item]; queued {
		return
	}
	q.series().Adds.Inc()
	q.dirty[item] = time.Now()
	if _, held := q.processing[item]; held {
		// Done queues it again.
		return
	}
	q.order = append(q.order, item)
	q.series().Depth.Inc()
	q.startWorkers()
}

// Len is the number of items queued and not held by a worker.
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

// Workers is the number of workers running now.
func (q *Queue[K]) Workers() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.workers
}

// MaxWorkers is how many workers may run at once.
func (q *Queue[K]) MaxWorkers() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.maxWorkers
}

// SetMaxWorkers changes how many workers may run at once. Extra workers end
// as they finish their current item.
func (q *Queue[K]) SetMaxWorkers(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.maxWorkers = n
	q.startWorkers()
}

// startWorkers starts a worker for each queued item that no running worker
// will take, within the limit; callers hold q.mu.
func (q *Queue[K]) startWorkers() {
	if q.shutDown {
		return
	}
	for q.workers < q.maxWorkers && q.workers < len(q.order)+len(q.processing) {
		q.workers++
		go q.runWorker()
	}
}

// Get hands the calling worker the next queued item, which it holds until
// Done. It returns false when the worker must end instead: the queue is shut
// down, has no item ready, or runs more workers than allowed. Only the
// workers the queue started call it, and each ends once it returned false.
func (q *Queue[K]) Get() (item K, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutDown || len(q.order) == 0 || q.workers > q.maxWorkers {
		q.workers--
		if q.shutDown && q.workers == 0 {
			close(q.stopped)
		}
		return item, false
	}
	item = q.order[0]
	var zero K
	q.order[0] = zero
	q.order = q.order[1:]
	if len(q.order) == 0 {
		// Let the drained backing array go.
		q.order = nil
	}
	start := time.Now()
	q.series().Depth.Dec()
	q.series().Latency.Observe(start.Sub(q.dirty[item]).Seconds())
	delete(q.dirty, item)
	q.processing[item] = start
	return item, true
}

// Done ends the processing of item; an item added meanwhile is queued again.
func (q *Queue[K]) Done(item K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.series().WorkDuration.Observe(time.Since(q.processing[item]).Seconds())
	delete(q.processing, item)
	if _, again := q.dirty[item]; again && !q.shutDown {
		q.order = append(q.order, item)
		q.series().Depth.Inc()
	}
}

// inFlight reports the seconds the held items have been worked on, summed and
// the longest.
func (q *Queue[K]) inFlight(now time.Time) (unfinished, longest float64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, start := range q.processing {
		s := now.Sub(start).Seconds()
		unfinished += s
		longest = max(longest, s)
	}
	return unfinished, longest
}
