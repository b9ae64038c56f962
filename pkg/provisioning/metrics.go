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
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/provfleet/provfleet/internal/workqueue"
)

const (
	labelProvisioner = "provisioner"
	labelClass       = "class"
	labelQueue       = "name"
	labelOperation   = "operation"
	labelSource      = "source"
	labelResult      = "result"

	// provisionSubsystem prefixes the provision and delete series as
	// sig-storage-lib-external-provisioner's controller does, so dashboards
	// and alerts made for it keep matching.
	provisionSubsystem = "controller"
)

// Metrics holds the metric vectors of every controller sharing one registry.
// Each series carries the provisioner label, so a stopped controller can delete
// exactly its own; the work queues' series also carry the queue name, which
// ends in ":<provisioner>".
type Metrics struct {
	provisionTotal    *prometheus.CounterVec
	provisionFailed   *prometheus.CounterVec
	provisionDuration *prometheus.HistogramVec
	deleteTotal       *prometheus.CounterVec
	deleteFailed      *prometheus.CounterVec
	deleteDuration    *prometheus.HistogramVec
	expandTotal       *prometheus.CounterVec
	panics            *prometheus.CounterVec

	queueDepth        *prometheus.GaugeVec
	queueAdds         *prometheus.CounterVec
	queueLatency      *prometheus.HistogramVec
	queueWorkDuration *prometheus.HistogramVec
	queueRetries      *prometheus.CounterVec
	inFlight          *inFlightCollector

	// overdueCalls counts the backend calls past their deadline, also those
	// of stopped controllers; a series exists while its count is positive.
	overdueCalls *prometheus.GaugeVec
	overdueMu    sync.Mutex
	overdue      map[[2]string]int

	// The last probe of each leading controller's backend.
	backendUp      *prometheus.GaugeVec
	availableBytes *prometheus.GaugeVec
	totalBytes     *prometheus.GaugeVec
	// The capacity budget of each leading controller's backend, as its last
	// successful probe read it: a used and limit pair for each limit set.
	usedBytes    *prometheus.GaugeVec
	limitBytes   *prometheus.GaugeVec
	usedVolumes  *prometheus.GaugeVec
	limitVolumes *prometheus.GaugeVec
}

// NewMetrics creates the metric vectors and registers them with reg. Call it
// once per registry and share the result between controllers.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "provisioner_backend_panics_total",
			Help: "Total number of panics recovered from a backend.",
		}, []string{labelProvisioner, labelOperation}),
		overdueCalls: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "provisioner_backend_calls_stuck",
			Help: "Number of backend calls running past their deadline, which ignore its cancellation.",
		}, []string{labelProvisioner, labelOperation}),
		overdue: map[[2]string]int{},
	}
	m.declareOperationMetrics()
	m.declareQueueMetrics()
	m.declareProbeMetrics()
	collectors := []prometheus.Collector{m.inFlight, m.overdueCalls}
	for _, c := range m.collectors() {
		collectors = append(collectors, c)
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register provisioning metrics: %w", err)
		}
	}
	return m, nil
}

// declareOperationMetrics declares the series of provision and delete
// attempts, named as the upstream library names them.
func (m *Metrics) declareOperationMetrics() {
	byClassAndSource := []string{labelProvisioner, labelClass, labelSource}
	byClass := []string{labelProvisioner, labelClass}
	m.provisionTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: provisionSubsystem, Name: "persistentvolumeclaim_provision_total",
		Help: "Total number of persistent volumes provisioned successfully, by storage class and data source kind of the claim.",
	}, byClassAndSource)
	m.provisionFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: provisionSubsystem, Name: "persistentvolumeclaim_provision_failed_total",
		Help: "Total number of failed provision attempts, by storage class and data source kind of the claim.",
	}, byClassAndSource)
	m.provisionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: provisionSubsystem, Name: "persistentvolumeclaim_provision_duration_seconds",
		Help:    "Latency in seconds of successful provision attempts, by storage class and data source kind of the claim.",
		Buckets: prometheus.DefBuckets,
	}, byClassAndSource)
	m.deleteTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: provisionSubsystem, Name: "persistentvolume_delete_total",
		Help: "Total number of persistent volumes deleted successfully, by storage class.",
	}, byClass)
	m.deleteFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: provisionSubsystem, Name: "persistentvolume_delete_failed_total",
		Help: "Total number of failed delete attempts, by storage class.",
	}, byClass)
	m.deleteDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: provisionSubsystem, Name: "persistentvolume_delete_duration_seconds",
		Help:    "Latency in seconds of successful delete attempts, by storage class.",
		Buckets: prometheus.DefBuckets,
	}, byClass)
	m.expandTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: provisionSubsystem, Name: "persistentvolumeclaim_expand_total",
		Help: "Total number of volume expansions of claims, by storage class and result: succeeded, infeasible (refused for the budget or the size), failed (to be retried), not_allowed (the class does not allow expansion), unsupported (the backend cannot expand).",
	}, []string{labelProvisioner, labelClass, labelResult})
}

// declareProbeMetrics declares the series of the backends' probes, which
// exist while a controller leads.
func (m *Metrics) declareProbeMetrics() {
	byProvisioner := []string{labelProvisioner}
	m.backendUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "provisioner_backend_up",
		Help: "1 when the last probe of a provisioner's backend succeeded, 0 when it failed.",
	}, byProvisioner)
	m.availableBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "provisioner_backend_available_bytes",
		Help: "Bytes new volumes may still use on a provisioner's backend, as its last successful probe found.",
	}, byProvisioner)
	m.totalBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "provisioner_backend_total_bytes",
		Help: "Size in bytes of a provisioner's backend storage, as its last successful probe found.",
	}, byProvisioner)
	m.declareBudgetMetrics()
}

// declareBudgetMetrics declares the series of the backends' capacity
// budgets, which exist while a controller leads and its budget sets a limit.
func (m *Metrics) declareBudgetMetrics() {
	byProvisioner := []string{labelProvisioner}
	m.usedBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "provisioner_capacity_used_bytes",
		Help: "Bytes the volumes of a provisioner request against its capacity budget's storage limit.",
	}, byProvisioner)
	m.limitBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "provisioner_capacity_limit_bytes",
		Help: "Storage limit in bytes of a provisioner's capacity budget.",
	}, byProvisioner)
	m.usedVolumes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "provisioner_capacity_used_volumes",
		Help: "Volumes of a provisioner counted against its capacity budget's volume limit.",
	}, byProvisioner)
	m.limitVolumes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "provisioner_capacity_limit_volumes",
		Help: "Volume limit of a provisioner's capacity budget.",
	}, byProvisioner)
}

// observeProbe records one probe of a backend.
func (m *Metrics) observeProbe(provisionerName string, space Space, err error) {
	if err != nil {
		m.backendUp.WithLabelValues(provisionerName).Set(0)
		return
	}
	m.backendUp.WithLabelValues(provisionerName).Set(1)
	m.availableBytes.WithLabelValues(provisionerName).Set(float64(space.AvailableBytes))
	m.totalBytes.WithLabelValues(provisionerName).Set(float64(space.TotalBytes))
}

// observeBudget records the capacity budget a probe read: the used and limit
// pair of each limit set, none for a backend without a budget (nil).
func (m *Metrics) observeBudget(provisionerName string, budget *Budget) {
	if budget == nil {
		budget = &Budget{}
	}
	setPair(m.usedBytes, m.limitBytes, provisionerName, budget.UsedBytes, budget.LimitBytes)
	setPair(m.usedVolumes, m.limitVolumes, provisionerName, budget.UsedVolumes, budget.LimitVolumes)
}

// setPair sets the used and limit series of provisionerName, or deletes both
// when there is no limit.
func setPair(used, limit *prometheus.GaugeVec, provisionerName string, usedValue, limitValue int64) {
	if limitValue <= 0 {
		used.DeleteLabelValues(provisionerName)
		limit.DeleteLabelValues(provisionerName)
		return
	}
	used.WithLabelValues(provisionerName).Set(float64(usedValue))
	limit.WithLabelValues(provisionerName).Set(float64(limitValue))
}

// deleteHealthSeries removes the probe series of one provisioner, which
// stopped leading.
func (m *Metrics) deleteHealthSeries(provisionerName string) {
	for _, c := range m.probeCollectors() {
		c.DeletePartialMatch(prometheus.Labels{labelProvisioner: provisionerName})
	}
}

// declareQueueMetrics declares the work queues' series, named as client-go's
// workqueue metrics are, with the provisioner as a label.
func (m *Metrics) declareQueueMetrics() {
	byQueue := []string{labelProvisioner, labelQueue}
	m.queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "depth",
		Help: "Current depth of a provisioner's work queue.",
	}, byQueue)
	m.queueAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "adds_total",
		Help: "Total number of adds handled by a provisioner's work queue.",
	}, byQueue)
	m.queueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: "queue_duration_seconds",
		Help:    "How long in seconds an item stays in a work queue before being requested.",
		Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
	}, byQueue)
	m.queueWorkDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: "work_duration_seconds",
		Help:    "How long in seconds processing an item from a work queue takes.",
		Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
	}, byQueue)
	m.queueRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "retries_total",
		Help: "Total number of retries handled by a provisioner's work queue.",
	}, byQueue)
	m.inFlight = newInFlightCollector(byQueue)
}

type partialDeleter interface {
	prometheus.Collector
	DeletePartialMatch(labels prometheus.Labels) int
}

// probeCollectors are the vectors of what the probes found.
func (m *Metrics) probeCollectors() []partialDeleter {
	return []partialDeleter{m.backendUp, m.availableBytes, m.totalBytes, m.usedBytes, m.limitBytes, m.usedVolumes, m.limitVolumes}
}

func (m *Metrics) collectors() []partialDeleter {
	return append([]partialDeleter{
		m.provisionTotal, m.provisionFailed, m.provisionDuration,
		m.deleteTotal, m.deleteFailed, m.deleteDuration, m.expandTotal, m.panics,
		m.queueDepth, m.queueAdds, m.queueLatency, m.queueWorkDuration, m.queueRetries,
	}, m.probeCollectors()...)
}

// deleteSeries removes every series of one provisioner.
func (m *Metrics) deleteSeries(provisionerName string) {
	for _, c := range m.collectors() {
		c.DeletePartialMatch(prometheus.Labels{labelProvisioner: provisionerName})
	}
}

// observeProvision records one provision attempt; source is the kind of the
// claim's spec.dataSource, empty for none.
func (m *Metrics) observeProvision(provisionerName, class, source string, start time.Time, err error) {
	if err != nil {
		m.provisionFailed.WithLabelValues(provisionerName, class, source).Inc()
		return
	}
	m.provisionDuration.WithLabelValues(provisionerName, class, source).Observe(time.Since(start).Seconds())
	m.provisionTotal.WithLabelValues(provisionerName, class, source).Inc()
}

func (m *Metrics) observeDelete(provisionerName, class string, start time.Time, err error) {
	if err != nil {
		m.deleteFailed.WithLabelValues(provisionerName, class).Inc()
		return
	}
	m.deleteDuration.WithLabelValues(provisionerName, class).Observe(time.Since(start).Seconds())
	m.deleteTotal.WithLabelValues(provisionerName, class).Inc()
}

// observeResize counts one expansion of a claim by its result; a nil m
// counts nothing.
func (m *Metrics) observeResize(provisionerName, class, result string) {
	if m == nil {
		return
	}
	m.expandTotal.WithLabelValues(provisionerName, class, result).Inc()
}

// DeleteResizeSeries removes the expansion series of one provisioner, for
// a caller that runs a Resizer outside a Controller, which deletes every
// series of its own when it stops.
func (m *Metrics) DeleteResizeSeries(provisionerName string) {
	if m == nil {
		return
	}
	m.expandTotal.DeletePartialMatch(prometheus.Labels{labelProvisioner: provisionerName})
}

func (m *Metrics) countPanic(provisionerName, operation string) {
	m.panics.WithLabelValues(provisionerName, operation).Inc()
}

// addOverdue counts a backend call that outlived its deadline.
func (m *Metrics) addOverdue(provisionerName, operation string) {
	m.adjustOverdue([2]string{provisionerName, operation}, 1)
}

// removeOverdue uncounts an overdue backend call that returned.
func (m *Metrics) removeOverdue(provisionerName, operation string) {
	m.adjustOverdue([2]string{provisionerName, operation}, -1)
}

// adjustOverdue changes the count of overdue calls of key by delta; a series
// exists while its count is positive.
func (m *Metrics) adjustOverdue(key [2]string, delta int) {
	m.overdueMu.Lock()
	defer m.overdueMu.Unlock()
	m.overdue[key] += delta
	if m.overdue[key] > 0 {
		m.overdueCalls.WithLabelValues(key[:]...).Set(float64(m.overdue[key]))
		return
	}
	delete(m.overdue, key)
	m.overdueCalls.DeleteLabelValues(key[:]...)
}

// queueName names one work queue of a provisioner.
func queueName(kind, provisionerName string) string {
	return kind + ":" + provisionerName
}

// queueLabels splits a queue name made by queueName back into its labels.
func queueLabels(name string) []string {
	_, provisionerName, _ := strings.Cut(name, ":")
	return []string{provisionerName, name}
}

// queueMetricsProvider makes the series of a provisioner's work queues in
// the vectors of m.
type queueMetricsProvider struct{ m *Metrics }

// NewQueueMetrics creates the series of the queue name, whose in-progress
// work inFlight reports at scrape time.
func (p queueMetricsProvider) NewQueueMetrics(name string, inFlight workqueue.InFlight) workqueue.QueueMetrics {
	m := p.m
	labels := queueLabels(name)
	m.inFlight.add(name, inFlight)
	return workqueue.QueueMetrics{
		Depth:        m.queueDepth.WithLabelValues(labels...),
		Adds:         m.queueAdds.WithLabelValues(labels...),
		Retries:      m.queueRetries.WithLabelValues(labels...),
		Latency:      m.queueLatency.WithLabelValues(labels...),
		WorkDuration: m.queueWorkDuration.WithLabelValues(labels...),
		Delete: func() {
			m.inFlight.remove(name)
			for _, c := range []partialDeleter{m.queueDepth, m.queueAdds, m.queueRetries, m.queueLatency, m.queueWorkDuration} {
				c.DeletePartialMatch(prometheus.Labels{labelQueue: name})
			}
		},
	}
}

// inFlightCollector reports, when scraped, how long the held items of each
// queue have been worked on. Computing it on demand spares every queue the
// ticker that keeps client-go's equivalent gauges fresh.
type inFlightCollector struct {
	unfinished, longest *prometheus.Desc

	mu     sync.Mutex
	queues map[string]func(time.Time) (unfinished, longest float64)
}

func newInFlightCollector(labels []string) *inFlightCollector {
	return &inFlightCollector{
		unfinished: prometheus.NewDesc("workqueue_unfinished_work_seconds",
			"How many seconds of work in progress in a work queue has not been observed by work_duration yet.", labels, nil),
		longest: prometheus.NewDesc("workqueue_longest_running_processor_seconds",
			"How many seconds the longest running item of a work queue has been worked on.", labels, nil),
		queues: map[string]func(time.Time) (float64, float64){},
	}
}

func (c *inFlightCollector) add(name string, report func(time.Time) (float64, float64)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queues[name] = report
}

func (c *inFlightCollector) remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.queues, name)
}

func (c *inFlightCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.unfinished
	ch <- c.longest
}

func (c *inFlightCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	queues := maps.Clone(c.queues)
	c.mu.Unlock()
	now := time.Now()
	for name, report := range queues {
		unfinished, longest := report(now)
		labels := queueLabels(name)
		for desc, value := range map[*prometheus.Desc]float64{c.unfinished: unfinished, c.longest: longest} {
			metric, err := prometheus.NewConstMetric(desc, prometheus.GaugeValue, value, labels...)
			if err != nil {
				metric = prometheus.NewInvalidMetric(desc, err)
			}
			ch <- metric
		}
	}
}
