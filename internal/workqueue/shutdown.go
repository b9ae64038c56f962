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

// ShutDown drops the queued and delayed items, waits for the workers to
// finish their current item and deletes the queue's metric series. Adds
// after it are ignored, so no series is created after it.
func (q *Queue[K]) ShutDown() {
	ShutDownWithDrain(nil, q)
}

// Drainable is a queue of any item type, for ShutDownWithDrain.
type Drainable interface {
	stop() (idle <-chan struct{}, deleteMetrics func())
}

// stop drops the queued and delayed items and starts no worker any more; it
// returns what is closed once the workers finished, and what deletes the
// queue's metric series.
func (q *Queue[K]) stop() (<-chan struct{}, func()) {
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
			metrics.Delete()
		}
	}
}

// ShutDownWithDrain shuts every queue down at once and waits for their
// workers to finish their current item, or until giveUp is closed (nil: no
// bound). It deletes the queues' metric series either way. It returns what is
// closed once the workers of each queue it gave up on finished: they finish
// their item later and then end.
func ShutDownWithDrain(giveUp <-chan struct{}, queues ...Drainable) (busy []<-chan struct{}) {
	idle := make([]<-chan struct{}, len(queues))
	deleteMetrics := make([]func(), len(queues))
	for i, q := range queues {
		idle[i], deleteMetrics[i] = q.stop()
	}
	defer func() {
		for _, f := range deleteMetrics {
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
