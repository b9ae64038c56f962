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
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseStat(t *testing.T) {
	tests := map[string]struct {
		line    string
		want    time.Duration
		wantErr bool
	}{
		"plain name": {
			line: "42 (manager) S 1 42 42 0 -1 4194560 1 0 0 0 250 130 0 0 20 0 12 0 100 1000 200",
			want: 3800 * time.Millisecond,
		},
		"name with spaces and parentheses": {
			line: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 1 1 1",
			want: 100 * time.Millisecond,
		},
		"too short":       {line: "7 (x) R 1 2 3", wantErr: true},
		"no command name": {line: "7 x R", wantErr: true},
		"not a number":    {line: "7 (x) R 1 7 7 0 -1 0 0 0 0 0 a 5 0", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.line))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CPU time (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	tests := map[string]struct {
		status  string
		want    map[string]uint64
		wantErr bool
	}{
		"both": {
			status: "Name:\tmanager\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nThreads:\t9\n",
			want:   map[string]uint64{"VmRSS": 10 << 20, "VmHWM": 20 << 20},
		},
		"anonymous and file": {
			status: "VmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nRssAnon:\t    4096 kB\nRssFile:\t    6144 kB\nRssShmem:\t       0 kB\n",
			want:   map[string]uint64{"VmRSS": 10 << 20, "VmHWM": 20 << 20, "RssAnon": 4 << 20, "RssFile": 6 << 20},
		},
		"kernel thread": {status: "Name:\tkthreadd\nThreads:\t1\n", wantErr: true},
		"no peak":       {status: "VmRSS:\t1 kB\n", wantErr: true},
		"odd unit":      {status: "VmHWM:\t1 MB\nVmRSS:\t1 kB\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseStatus([]byte(tc.status))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("memory (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadUsageOfThisProcess(t *testing.T) {
	u, err := ReadUsage("/proc", os.Getpid())
	if err != nil {
		t.Skipf("no proc filesystem: %v", err)
	}
	if u.RSS == 0 || u.PeakRSS < u.RSS {
		t.Errorf("RSS %d, peak %d: want a positive RSS no larger than its peak", u.RSS, u.PeakRSS)
	}
	if u.RSSAnon == 0 || u.RSSFile == 0 || u.RSSAnon+u.RSSFile > u.RSS {
		t.Errorf("RSS %d of which anonymous %d and file %d: want two positive parts within it", u.RSS, u.RSSAnon, u.RSSFile)
	}
	if u.PSS == 0 || u.PSS > u.RSS || u.PSSAnon+u.PSSFile > u.PSS {
		t.Errorf("PSS %d (anonymous %d, file %d) next to RSS %d: want a positive PSS within the RSS and its parts within it", u.PSS, u.PSSAnon, u.PSSFile, u.RSS)
	}
}

func TestReadUsageOfAMissingProcess(t *testing.T) {
	if _, err := ReadUsage(t.TempDir(), 1); err == nil {
		t.Error("want an error for a process that does not exist")
	}
}

func TestReadUsageFromAProcTree(t *testing.T) {
	const (
		stat   = "9 (peer) S 1 9 9 0 -1 0 0 0 0 0 100 50 0 0 20 0 5 0 1 1 1"
		status = "VmHWM:\t2048 kB\nVmRSS:\t1024 kB\n"
	)
	tests := map[string]struct {
		files   map[string]string
		want    Usage
		wantErr bool
	}{
		"no smaps_rollup": {
			files: map[string]string{"stat": stat, "status": status},
			want:  Usage{CPU: 1500 * time.Millisecond, RSS: 1 << 20, PeakRSS: 2 << 20},
		},
		"smaps_rollup": {
			files: map[string]string{"stat": stat, "status": status, "smaps_rollup": "00400000-7ffd0000 ---p 00000000 00:00 0   [rollup]\n" +
				"Rss:                1024 kB\nPss:                 768 kB\nPss_Dirty:            256 kB\nPss_Anon:             256 kB\nPss_File:             512 kB\n"},
			want: Usage{CPU: 1500 * time.Millisecond, RSS: 1 << 20, PeakRSS: 2 << 20, PSS: 768 << 10, PSSAnon: 256 << 10, PSSFile: 512 << 10},
		},
		"smaps_rollup before Linux 5.9, without the parts": {
			files: map[string]string{"stat": stat, "status": status, "smaps_rollup": "Rss:   1024 kB\nPss:   768 kB\n"},
			want:  Usage{CPU: 1500 * time.Millisecond, RSS: 1 << 20, PeakRSS: 2 << 20, PSS: 768 << 10},
		},
		"smaps_rollup without Pss": {
			files:   map[string]string{"stat": stat, "status": status, "smaps_rollup": "Rss:   1024 kB\n"},
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "9")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ReadUsage(root, 9)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

const apiserverMetrics = `# HELP apiserver_longrunning_requests Gauge of all active long-running apiserver requests.
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="persistentvolumes",scope="cluster",subresource="",verb="WATCH",version="v1"} 3
apiserver_longrunning_requests{component="apiserver",group="",resource="persistentvolumeclaims",scope="cluster",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="coordination.k8s.io",resource="leases",scope="namespace",subresource="",verb="WATCH",version="v1"} 7
# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",verb="GET",resource="leases"} 10
apiserver_request_total{code="200",verb="PUT",resource="leases"} 32
`

func TestMetricsSum(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(apiserverMetrics))
	if err != nil {
		t.Fatal(err)
	}
	volumesAndClaims := func(l map[string]string) bool {
		return l["verb"] == "WATCH" && (l["resource"] == "persistentvolumes" || l["resource"] == "persistentvolumeclaims")
	}
	tests := map[string]struct {
		name string
		keep func(map[string]string) bool
		want float64
	}{
		"gauge, some series": {name: "apiserver_longrunning_requests", keep: volumesAndClaims, want: 5},
		"gauge, all series":  {name: "apiserver_longrunning_requests", want: 12},
		"counter":            {name: "apiserver_request_total", keep: func(l map[string]string) bool { return l["verb"] == "PUT" }, want: 32},
		"missing family":     {name: "go_goroutines", want: 0},
		"no series is kept":  {name: "apiserver_request_total", keep: func(map[string]string) bool { return false }, want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, m.Sum(tc.name, tc.keep)); diff != "" {
				t.Errorf("sum (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetricsSumBy(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(apiserverMetrics))
	if err != nil {
		t.Fatal(err)
	}
	got := m.SumBy("apiserver_longrunning_requests", func(l map[string]string) string {
		if l["group"] == "coordination.k8s.io" {
			return ""
		}
		return l["verb"] + " " + l["scope"]
	})
	want := map[string]float64{"WATCH cluster": 5}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
}

func TestParseMetricsOfNamedFamilies(t *testing.T) {
	scrape := apiserverMetrics + `# HELP apiserver_request_duration_seconds Response latency.
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="GET",le="0.1"} 4
apiserver_request_duration_seconds_bucket{verb="GET",le="+Inf"} 5
apiserver_request_duration_seconds_sum{verb="GET"} 0.3
apiserver_request_duration_seconds_count{verb="GET"} 5
# HELP apiserver_request_total_extra A family whose name extends another's.
# TYPE apiserver_request_total_extra counter
apiserver_request_total_extra 9
go_goroutines 12
`
	tests := map[string]struct {
		names []string
		want  []string
	}{
		"all families": {
			want: []string{"apiserver_longrunning_requests", "apiserver_request_duration_seconds", "apiserver_request_total", "apiserver_request_total_extra", "go_goroutines"},
		},
		"one counter": {names: []string{"apiserver_request_total"}, want: []string{"apiserver_request_total"}},
		"a histogram and an untyped series": {
			names: []string{"apiserver_request_duration_seconds", "go_goroutines"},
			want:  []string{"apiserver_request_duration_seconds", "go_goroutines"},
		},
		"absent family": {names: []string{"etcd_requests_total"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, err := ParseMetrics(strings.NewReader(scrape), tc.names...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, slices.Sorted(maps.Keys(m))); diff != "" {
				t.Errorf("families (-want +got):\n%s", diff)
			}
		})
	}
	m, err := ParseMetrics(strings.NewReader(scrape), "apiserver_request_total", "apiserver_request_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(float64(42), m.Sum("apiserver_request_total", nil)); diff != "" {
		t.Errorf("sum of the kept counter (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(uint64(5), m["apiserver_request_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleCount()); diff != "" {
		t.Errorf("count of the kept histogram (-want +got):\n%s", diff)
	}
}

func TestParseMetricsRejectsGarbage(t *testing.T) {
	if _, err := ParseMetrics(strings.NewReader("not metrics {")); err == nil {
		t.Error("want an error")
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i
	}
	tests := map[string]struct {
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		"none":                {p: 50, want: 0},
		"one":                 {samples: ms(7), p: 99, want: 7 * time.Millisecond},
		"median of unsorted":  {samples: ms(5, 1, 3), p: 50, want: 3 * time.Millisecond},
		"p99 of 100":          {samples: ms(hundred...), p: 99, want: 99 * time.Millisecond},
		"p50 of 100":          {samples: ms(hundred...), p: 50, want: 50 * time.Millisecond},
		"p100 is the maximum": {samples: ms(2, 9, 4), p: 100, want: 9 * time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Percentile(tc.samples, tc.p)); diff != "" {
				t.Errorf("percentile (-want +got):\n%s", diff)
			}
		})
	}
}
