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

// Sum adds the values of the counter, gauge or untyped series of name whose
// labels keep accepts (nil: all series). A missing family sums to 0.
func (m Metrics) Sum(name string, keep func(labels map[string]string) bool) float64 {
	family, ok := m[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, metric := range family.GetMetric() {
		if keep != nil {
			labels := make(map[string]string, len(metric.GetLabel()))
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if !keep(labels) {
				continue
			}
		}
		switch {
		case metric.Counter != nil:
			sum += metric.GetCounter().GetValue()
		case metric.Gauge != nil:
			sum += metric.GetGauge().GetValue()
		case metric.Untyped != nil:
			sum += metric.GetUntyped().GetValue()
		}
	}
	return sum
}
