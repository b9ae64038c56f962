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

package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/provfleet/provfleet/bench/internal/measure"
	"github.com/provfleet/provfleet/bench/internal/report"
	"github.com/provfleet/provfleet/internal/testenv/childproc"
)

// process is a child the harness started and can measure and signal.
type process struct {
	*childproc.Process
	metricsURL string
}

// startProcess runs binary with args, its output in logPath, in its own
// process group so a Ctrl-C reaches the harness first.
func startProcess(name, binary, logPath, metricsURL string, env []string, args ...string) (*process, error) {
	p, err := childproc.Start(name, binary, args, childproc.Options{Env: env, LogPath: logPath})
	if err != nil {
		return nil, err
	}
	return &process{Process: p, metricsURL: metricsURL}, nil
}

func (p *process) exited() bool {
	exited, _ := p.Exited()
	return exited
}

// usage reads the /proc usage of pids; processes that are gone are skipped.
func usage(pids []int) map[int]measure.Usage {
	out := make(map[int]measure.Usage, len(pids))
	for _, pid := range pids {
		if u, err := measure.ReadUsage("/proc", pid); err == nil {
			out[pid] = u
		}
	}
	return out
}

// total sums usages.
func total(usages map[int]measure.Usage) measure.Usage {
	var sum measure.Usage
	for _, u := range usages {
		sum.CPU += u.CPU
		sum.RSS += u.RSS
		sum.PeakRSS += u.PeakRSS
	}
	return sum
}

// setCharge sets the charged memory of m, summed over usages (see
// measure.ReadCharge); ChargedBy joins the sources with "+" where they
// differ between processes.
func setCharge(m *report.Measurement, usages map[int]measure.Usage) {
	var sum uint64
	var by []string
	for pid, u := range usages {
		c, err := measure.ReadCharge("/proc", pid, u)
		if err != nil || c.Bytes == 0 {
			continue // the process is gone, or the kernel tells no PSS
		}
		sum += c.Bytes
		if !slices.Contains(by, c.By) {
			by = append(by, c.By)
		}
	}
	slices.Sort(by)
	m.ChargedMiB, m.ChargedBy = mib(sum), strings.Join(by, "+")
}

// cpuSince is the CPU time spent since before by the processes still alive;
// a process that exited in between is left out, its last seconds unknown.
func cpuSince(before, after map[int]measure.Usage) time.Duration {
	var sum time.Duration
	for pid, a := range after {
		if b, ok := before[pid]; ok {
			sum += a.CPU - b.CPU
		}
	}
	return sum
}

// goroutines sums go_goroutines over the /metrics endpoints at urls; -1 when
// one cannot be read.
func goroutines(ctx context.Context, urls []string) int {
	sum := 0
	for _, url := range urls {
		m, err := scrape(ctx, http.DefaultClient, url, "go_goroutines")
		if err != nil {
			return -1
		}
		sum += int(m.Sum("go_goroutines", nil))
	}
	return sum
}

// httpOK reports whether a GET of url answers 200.
func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// scrape reads the named families (none: all) from the /metrics at url.
func scrape(ctx context.Context, client *http.Client, url string, families ...string) (measure.Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, errors.New("cannot scrape " + url + ": " + resp.Status)
	}
	return measure.ParseMetrics(resp.Body, families...)
}
