package provisioning

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

const (
	labelProvisioner = "provisioner"
	labelClass       = "class"
	labelQueue       = "name"
	labelOperation   = "operation"
)

// Metrics holds the metric vectors of every controller sharing one registry.
// Each series carries the provisioner label, so a stopped controller can delete
// exactly its own. Metrics also implements workqueue.MetricsProvider for the
// controllers' queues, whose names end in ":<provisioner>".
type Metrics struct {
	provisionTotal    *prometheus.CounterVec
	provisionFailed   *prometheus.CounterVec
	provisionDuration *prometheus.HistogramVec
	deleteTotal       *prometheus.CounterVec
	deleteFailed      *prometheus.CounterVec
	deleteDuration    *prometheus.HistogramVec
	panics            *prometheus.CounterVec

	queueDepth          *prometheus.GaugeVec
	queueAdds           *prometheus.CounterVec
	queueLatency        *prometheus.HistogramVec
	queueWorkDuration   *prometheus.HistogramVec
	queueUnfinished     *prometheus.GaugeVec
	queueLongestRunning *prometheus.GaugeVec
	queueRetries        *prometheus.CounterVec
}

var _ workqueue.MetricsProvider = (*Metrics)(nil)

// NewMetrics creates the metric vectors and registers them with reg. Call it
// once per registry and share the result between controllers.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	byClass := []string{labelProvisioner, labelClass}
	byQueue := []string{labelProvisioner, labelQueue}
	durations := prometheus.ExponentialBuckets(0.1, 2, 14)
	m := &Metrics{
		provisionTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "persistentvolumeclaim_provision_total",
			Help: "Total number of persistent volumes provisioned successfully.",
		}, byClass),
		provisionFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "persistentvolumeclaim_provision_failed_total",
			Help: "Total number of persistent volume provision failures.",
		}, byClass),
		provisionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "persistentvolumeclaim_provision_duration_seconds",
			Help:    "Latency in seconds to provision persistent volumes.",
			Buckets: durations,
		}, byClass),
		deleteTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "persistentvolume_delete_total",
			Help: "Total number of persistent volumes deleted successfully.",
		}, byClass),
		deleteFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "persistentvolume_delete_failed_total",
			Help: "Total number of persistent volume delete failures.",
		}, byClass),
		deleteDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "persistentvolume_delete_duration_seconds",
			Help:    "Latency in seconds to delete persistent volumes.",
			Buckets: durations,
		}, byClass),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "provisioner_backend_panics_total",
			Help: "Total number of panics recovered from a backend.",
		}, []string{labelProvisioner, labelOperation}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "depth",
			Help: "Current depth of a provisioner's work queue.",
		}, byQueue),
		queueAdds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "adds_total",
			Help: "Total number of adds handled by a provisioner's work queue.",
		}, byQueue),
		queueLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help:    "How long in seconds an item stays in a work queue before being requested.",
			Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
		}, byQueue),
		queueWorkDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "work_duration_seconds",
			Help:    "How long in seconds processing an item from a work queue takes.",
			Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
		}, byQueue),
		queueUnfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration.",
		}, byQueue),
		queueLongestRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "How many seconds the longest running processor of a work queue has been running.",
		}, byQueue),
		queueRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "retries_total",
			Help: "Total number of retries handled by a provisioner's work queue.",
		}, byQueue),
	}
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register provisioning metrics: %w", err)
		}
	}
	return m, nil
}

type partialDeleter interface {
	prometheus.Collector
	DeletePartialMatch(labels prometheus.Labels) int
}

func (m *Metrics) collectors() []partialDeleter {
	return []partialDeleter{
		m.provisionTotal, m.provisionFailed, m.provisionDuration,
		m.deleteTotal, m.deleteFailed, m.deleteDuration, m.panics,
		m.queueDepth, m.queueAdds, m.queueLatency, m.queueWorkDuration,
		m.queueUnfinished, m.queueLongestRunning, m.queueRetries,
	}
}

// deleteSeries removes every series of one provisioner.
func (m *Metrics) deleteSeries(provisionerName string) {
	for _, c := range m.collectors() {
		c.DeletePartialMatch(prometheus.Labels{labelProvisioner: provisionerName})
	}
}

// deleteQueueSeries removes the series of one work queue, so that a queue
// rebuilt under the same name does not inherit a stale depth.
func (m *Metrics) deleteQueueSeries(name string) {
	for _, c := range []partialDeleter{m.queueDepth, m.queueAdds, m.queueLatency, m.queueWorkDuration,
		m.queueUnfinished, m.queueLongestRunning, m.queueRetries} {
		c.DeletePartialMatch(prometheus.Labels{labelQueue: name})
	}
}

func (m *Metrics) observeProvision(provisionerName, class string, start time.Time, err error) {
	if err != nil {
		m.provisionFailed.WithLabelValues(provisionerName, class).Inc()
		return
	}
	m.provisionDuration.WithLabelValues(provisionerName, class).Observe(time.Since(start).Seconds())
	m.provisionTotal.WithLabelValues(provisionerName, class).Inc()
}

func (m *Metrics) observeDelete(provisionerName, class string, start time.Time, err error) {
	if err != nil {
		m.deleteFailed.WithLabelValues(provisionerName, class).Inc()
		return
	}
	m.deleteDuration.WithLabelValues(provisionerName, class).Observe(time.Since(start).Seconds())
	m.deleteTotal.WithLabelValues(provisionerName, class).Inc()
}

func (m *Metrics) countPanic(provisionerName, operation string) {
	m.panics.WithLabelValues(provisionerName, operation).Inc()
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

// NewDepthMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.queueDepth.WithLabelValues(queueLabels(name)...)
}

// NewAddsMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.queueAdds.WithLabelValues(queueLabels(name)...)
}

// NewLatencyMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.queueLatency.WithLabelValues(queueLabels(name)...)
}

// NewWorkDurationMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return m.queueWorkDuration.WithLabelValues(queueLabels(name)...)
}

// NewUnfinishedWorkSecondsMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.queueUnfinished.WithLabelValues(queueLabels(name)...)
}

// NewLongestRunningProcessorSecondsMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.queueLongestRunning.WithLabelValues(queueLabels(name)...)
}

// NewRetriesMetric implements workqueue.MetricsProvider.
func (m *Metrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.queueRetries.WithLabelValues(queueLabels(name)...)
}
