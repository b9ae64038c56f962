package measure

import (
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics are the metric families of one scrape, by name.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics parses Prometheus text exposition.
func ParseMetrics(r io.Reader) (Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("cannot parse metrics: %w", err)
	}
	return families, nil
}

// SumBy adds the series of name into groups: key names a series's group,
// "" leaves it out.
func (m Metrics) SumBy(name string, key func(labels map[string]string) string) map[string]float64 {
	out := map[string]float64{}
	for _, metric := range m.family(name) {
		if k := key(labelsOf(metric)); k != "" {
			out[k] += value(metric)
		}
	}
	return out
}

// Sum adds the values of the counter, gauge or untyped series of name whose
// labels keep accepts (nil: all series). A missing family sums to 0.
func (m Metrics) Sum(name string, keep func(labels map[string]string) bool) float64 {
	var sum float64
	for _, metric := range m.family(name) {
		if keep == nil || keep(labelsOf(metric)) {
			sum += value(metric)
		}
	}
	return sum
}

func (m Metrics) family(name string) []*dto.Metric {
	if family, ok := m[name]; ok {
		return family.GetMetric()
	}
	return nil
}

func labelsOf(metric *dto.Metric) map[string]string {
	labels := make(map[string]string, len(metric.GetLabel()))
	for _, l := range metric.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

// value is the value of a counter, gauge or untyped series; 0 for others.
func value(metric *dto.Metric) float64 {
	switch {
	case metric.Counter != nil:
		return metric.GetCounter().GetValue()
	case metric.Gauge != nil:
		return metric.GetGauge().GetValue()
	case metric.Untyped != nil:
		return metric.GetUntyped().GetValue()
	}
	return 0
}
