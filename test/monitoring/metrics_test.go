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

package monitoring

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"

	"github.com/provfleet/provfleet/internal/apirequests"
	"github.com/provfleet/provfleet/pkg/fleet"
)

// metric is one metric family the manager exports.
type metric struct {
	Type   string
	Labels []string
}

// recorder is a Registerer that keeps what is registered, to describe
// every collector, also those with no series yet, which a Gather omits.
type recorder struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.Registerer.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// exported returns every metric family a manager in both roles registers,
// with what cmd/manager adds: the Go and process collectors and the API
// request counter.
func exported(t *testing.T) map[string]metric {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec := &recorder{Registerer: reg}
	rec.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if _, err := apirequests.NewCounter(rec); err != nil {
		t.Fatal(err)
	}
	// Nothing is sent before Run: no apiserver is needed.
	_, err := fleet.New(&rest.Config{Host: "http://127.0.0.1:1"}, fleet.Settings{
		Roles: fleet.Roles{Manager: true, Node: true}, Namespace: "provfleet-system", Identity: "replica-1",
		LeaderElection: true, NodeName: "node-1", HostPathRoot: "/", QPS: 10, Burst: 10, Registerer: rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	gathered, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	metrics := map[string]metric{}
	for _, c := range rec.collectors {
		for name, m := range describe(t, c) {
			m.Type = typeOf(c, name, gathered)
			metrics[name] = m
		}
	}
	return metrics
}

// descPattern reads the name and variable labels of a prometheus.Desc from
// its String, the one place client_golang shows them.
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", help: .*, variableLabels: \{([^}]*)\}\}$`)

// describe returns the families c describes, with their labels.
func describe(t *testing.T, c prometheus.Collector) map[string]metric {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	out := map[string]metric{}
	for desc := range ch {
		match := descPattern.FindStringSubmatch(desc.String())
		if match == nil {
			t.Fatalf("cannot read the name of %s: has client_golang's Desc.String changed?", desc)
		}
		var labels []string
		if match[2] != "" {
			labels = strings.Split(match[2], ",")
		}
		out[match[1]] = metric{Labels: labels}
	}
	return out
}

// typeOf returns the type of the family name of c: the collector's own for
// a vector, the gathered one otherwise; "" when neither tells.
func typeOf(c prometheus.Collector, name string, gathered []*dto.MetricFamily) string {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	}
	for _, family := range gathered {
		if family.GetName() == name {
			return strings.ToLower(family.GetType().String())
		}
	}
	return ""
}

// standard are the series of the Go and process collectors, which
// docs/metrics.md names by prefix only.
func standard(name string) bool {
	return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_")
}

// docRow matches a row of the table of metrics in docs/metrics.md.
var docRow = regexp.MustCompile("^\\| `([a-z_:]+)` \\| ([a-z]+) \\| ([^|]*) \\|")

// documentedMetrics returns the rows of the table of metrics in
// docs/metrics.md.
func documentedMetrics(t *testing.T) map[string]metric {
	t.Helper()
	data, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]metric{}
	for line := range strings.SplitSeq(string(data), "\n") {
		match := docRow.FindStringSubmatch(line)
		if match == nil {
			continue
		}
		var labels []string
		for _, label := range strings.Split(match[3], ",") {
			if label = strings.Trim(strings.TrimSpace(label), "`"); label != "" {
				labels = append(labels, label)
			}
		}
		rows[match[1]] = metric{Type: match[2], Labels: labels}
	}
	if len(rows) == 0 {
		t.Fatal("docs/metrics.md has no table of metrics")
	}
	return rows
}

// TestMetricsDocListsEveryMetric: the table of docs/metrics.md lists every
// metric family the manager exports but the standard ones, with its labels
// and its type where the registry tells it, and nothing else.
func TestMetricsDocListsEveryMetric(t *testing.T) {
	want := map[string]metric{}
	for name, m := range exported(t) {
		if !standard(name) {
			want[name] = m
		}
	}
	got := documentedMetrics(t)
	for name, m := range got {
		if w, ok := want[name]; ok && w.Type == "" {
			// Neither the collector nor a series tells the type: take the
			// documented one.
			w.Type = m.Type
			want[name] = w
		}
	}
	sortLabels := cmp.Transformer("sort", func(in []string) []string {
		out := slices.Clone(in)
		slices.Sort(out)
		return out
	})
	if diff := cmp.Diff(want, got, sortLabels); diff != "" {
		t.Errorf("docs/metrics.md's table of metrics against the registry (-exported +documented):\n%s", diff)
	}
}
