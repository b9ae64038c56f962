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

import "time"

// MetricsProvider makes the metric series of a queue, like client-go's
// MetricsProvider, but for one queue at a time: a provisioner's queues use a
// provider of their own and delete their series when shut down.
type MetricsProvider interface {
	// NewQueueMetrics is called on the first use of the queue name, so that a
	// queue that never had work has no series. inFlight reports the queue's
	// work in progress, for the provider to read when it is scraped.
	NewQueueMetrics(name string, inFlight InFlight) QueueMetrics
}

// InFlight reports the seconds the items held by workers have been worked on
// at now, summed and the longest.
type InFlight func(now time.Time) (unfinished, longest float64)

// QueueMetrics are the series of one queue.
type QueueMetrics struct {
	Depth         GaugeMetric
	Adds, Retries CounterMetric
	// Latency observes how long an item waited in the queue, WorkDuration how
	// long a worker held it, both in seconds.
	Latency, WorkDuration HistogramMetric
	// Delete removes the series, once the queue was shut down.
	Delete func()
}

// GaugeMetric is a gauge a queue moves up and down.
type GaugeMetric interface {
	Inc()
	Dec()
}

// CounterMetric is a counter a queue increments.
type CounterMetric interface {
	Inc()
}

// HistogramMetric is a histogram a queue observes values with.
type HistogramMetric interface {
	Observe(float64)
}

// noMetric counts nothing, for queues made without a MetricsProvider.
type noMetric struct{}

func (noMetric) Inc()            {}
func (noMetric) Dec()            {}
func (noMetric) Observe(float64) {}

var noMetrics = QueueMetrics{
	Depth: noMetric{}, Adds: noMetric{}, Retries: noMetric{},
	Latency: noMetric{}, WorkDuration: noMetric{},
	Delete: func() {},
}
