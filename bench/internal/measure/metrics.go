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

package measure

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics are the metric families of one scrape, by name.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics parses Prometheus text exposition. Given names, it parses
// only those families: most of a scrape as large as the apiserver's is
// lines the caller never reads, and parsing them is what costs.
func ParseMetrics(r io.Reader, names ...string) (Metrics, error) {
	if len(names) > 0 {
		var err error
		if r, err = keepFamilies(r, names); err != nil {
			return nil, err
		}
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("cannot parse metrics: %w", err)
	}
	return families, nil
}

// keepFamilies returns the lines of r that belong to the named families.
func keepFamilies(r io.Reader, names []string) (io.Reader, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	var kept bytes.Buffer
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for scanner.Scan() {
		if line := scanner.Bytes(); belongs(line, want) {
			kept.Write(line)
			kept.WriteByte('\n')
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("cannot read metrics: %w", err)
	}
	return &kept, nil
}

// belongs reports whether a line of text exposition, a HELP or TYPE
// comment or a sample, is of one of the families in want; a histogram's or
// summary's samples carry a suffix.
func belongs(line []byte, want map[string]bool) bool {
	if rest, ok := bytes.CutPrefix(line, []byte("# ")); ok {
		fields := bytes.Fields(rest)
		return len(fields) >= 2 && (string(fields[0]) == "HELP" || string(fields[0]) == "TYPE") && want[string(fields[1])]
	}
	name := line
	if i := bytes.IndexAny(line, "{ "); i >= 0 {
		name = line[:i]
	}
	if want[string(name)] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := bytes.CutSuffix(name, []byte(suffix)); ok && want[string(base)] {
			return true
		}
	}
	return false
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
