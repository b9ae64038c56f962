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

package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestJSONLRoundTrip(t *testing.T) {
	in := []Result{
		{Scenario: S1Provision, System: SystemProvfleet, Tenants: 1, Claims: 500, Seconds: 12.5, P50MS: 80, P99MS: 300, RSSMiB: 60, CPUS: 4.2, Watches: 4, APIRPS: 90, Replicas: 1,
			RequestsPerClaim: 1.5, Date: "2026-12-02T12:00:00Z", Commit: "4d16a97"},
		{Scenario: S3Idle, System: SystemUpstream, Tenants: 100, Replicas: 2, Date: "2026-12-02T12:00:00Z", Commit: Unknown},
		{Scenario: S8Memory, System: SystemProvfleet, Tenants: 1, Claims: 10000, RSSMiB: 138, Replicas: 1, ChargedMiB: 120.5, ChargedBy: "pss", Date: "2026-12-02T12:00:00Z", Commit: "4d16a97"},
		{Scenario: S3Idle, System: SystemProvfleet, Tenants: 1, Replicas: 2, RSSMiB: 100, ChargedMiB: 90, ChargedBy: "memory.current+pss", Date: "2026-12-02T12:00:00Z", Commit: "4d16a97"},
	}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, in); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(buf.String(), "\n")
	want := `{"scenario":"s1-provision","system":"provfleet","tenants":1,"claims":500,"seconds":12.5,"p50_ms":80,"p99_ms":300,"rss_mib":60,"cpu_s":4.2,"watches":4,"api_rps":90,"replicas":1,"requests_per_claim":1.5,"date":"2026-12-02T12:00:00Z","commit":"4d16a97"}`
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("first line (-want +got):\n%s", diff)
	}
	out, err := ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
}

func TestReadJSONLRejects(t *testing.T) {
	const good = `"scenario":"s1-provision","system":"limit","tenants":1,"claims":5,"seconds":1,"p50_ms":1,"p99_ms":2,"rss_mib":1,"cpu_s":1,"watches":0,"api_rps":1,"replicas":1,"date":"2026-12-02T12:00:00Z","commit":"4d16a97"`
	tests := map[string]struct {
		line, wantErr string
	}{
		"missing field":                       {line: `{"scenario":"s1-provision"}`, wantErr: `no field "system"`},
		"extra field":                         {line: `{` + good + `,"goroutines":3}`, wantErr: `field "goroutines" is not one of`},
		"charged memory without its source":   {line: `{` + good + `,"charged_mib":3}`, wantErr: `charged_mib 3 by ""`},
		"charged memory of an unknown source": {line: `{` + good + `,"charged_mib":3,"charged_by":"rss"}`, wantErr: `charged_mib 3 by "rss"`},
		"a source without charged memory":     {line: `{` + good + `,"charged_by":"pss"}`, wantErr: `charged_mib 0 by "pss"`},
		"a joined source, one unknown":        {line: `{` + good + `,"charged_mib":3,"charged_by":"memory.current+rss"}`, wantErr: `charged_mib 3 by "memory.current+rss"`},
		"no commit":                           {line: `{` + strings.Replace(good, `,"commit":"4d16a97"`, "", 1) + `}`, wantErr: `no field "commit"`},
		"unknown system":                      {line: `{` + strings.Replace(good, `"limit"`, `"other"`, 1) + `}`, wantErr: `system "other"`},
		"negative":                            {line: `{` + strings.Replace(good, `"cpu_s":1`, `"cpu_s":-1`, 1) + `}`, wantErr: "cpu_s is -1"},
		"wrong type":                          {line: `{` + strings.Replace(good, `"tenants":1`, `"tenants":"1"`, 1) + `}`, wantErr: "cannot unmarshal"},
		"p99 below p50":                       {line: `{` + strings.Replace(good, `"p99_ms":2`, `"p99_ms":0.5`, 1) + `}`, wantErr: "p99_ms 0.5 below"},
		"not JSON":                            {line: `scenario=1`, wantErr: "cannot parse"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ReadJSONL(strings.NewReader("{" + good + "}\n" + tc.line + "\n"))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "line 2") {
				t.Errorf("error %v, want one about line 2 containing %q", err, tc.wantErr)
			}
		})
	}
}

func measurement(scenario, system string, tenants, replicas int, set func(*Result)) Measurement {
	m := Measurement{Result: Result{Scenario: scenario, System: system, Tenants: tenants, Replicas: replicas}, Goroutines: -1}
	if set != nil {
		set(&m.Result)
	}
	return m
}

func TestRatios(t *testing.T) {
	run := &Run{
		LeaseTimeout: 17 * time.Second,
		FloodClaims:  2000,
		Measurements: []Measurement{
			measurement(S3Idle, SystemProvfleet, 1, 1, func(r *Result) { r.RSSMiB = 50; r.Watches = 4 }),
			measurement(S3Idle, SystemProvfleet, 100, 1, func(r *Result) { r.RSSMiB = 59.9; r.Watches = 4 }),
			measurement(S3Idle, SystemProvfleet, 100, 2, func(r *Result) { r.APIRPS = 30 }),
			measurement(S3Idle, SystemUpstream, 100, 1, func(r *Result) { r.RSSMiB = 2900 }),
			measurement(S2Provision, SystemProvfleet, 50, 1, func(r *Result) { r.CPUS = 10; r.Seconds = 13 }),
			measurement(S2Provision, SystemUpstream, 50, 1, func(r *Result) { r.CPUS = 40 }),
			measurement(S2Provision, SystemLimit, 50, 1, func(r *Result) { r.Seconds = 10 }),
			measurement(S4Alone, SystemProvfleet, 1, 1, func(r *Result) { r.P99MS = 100 }),
			measurement(S4Noisy, SystemProvfleet, 2, 1, func(r *Result) { r.P99MS = 105 }),
			measurement(S4Settled, SystemProvfleet, 2, 1, func(r *Result) { r.P99MS = 120 }),
			measurement(S4Hostile, SystemProvfleet, 2, 1, func(r *Result) { r.P99MS = 108 }),
			measurement(S4Flood, SystemProvfleet, 2, 1, func(r *Result) { r.P99MS = 111 }),
			measurement(S4Flood, SystemUpstream, 2, 1, func(r *Result) { r.P99MS = 90 }),
			measurement(S6SIGKILL, SystemProvfleet, 1, 2, func(r *Result) { r.Seconds = 16 }),
			measurement(S8Memory, SystemProvfleet, 1, 1, func(r *Result) { r.Claims = 10000; r.RSSMiB = 38.5 }),
		},
	}
	type row struct{ Value, Verdict string }
	got := map[string]row{}
	for _, r := range Ratios(run) {
		got[r.What] = row{r.Value, r.verdict()}
	}
	want := map[string]row{
		"s3 idle RSS, 100 provisioners: provfleet / upstream":                            {"0.0207", "yes"},
		"s3 provfleet RSS per extra idle provisioner (1 → 100)":                          {"102 KiB", "**no**"},
		"s3 provfleet extra watches (1 → 100 provisioners)":                              {"0", "yes"},
		"s3 apiserver req/s per provisioner, 100 provisioners, 2 replicas":               {"0.3", "**no**"},
		"s2 CPU to provision: provfleet / upstream":                                      {"0.25", "**no**"},
		"s2 time until all PVs exist: provfleet / limit":                                 {"1.3", "**no**"},
		"s4 good tenant's p99: with noisy neighbour / alone (provfleet)":                 {"1.05", "yes"},
		"s4 good tenant's p99: next to a neighbour already failing / alone (provfleet)":  {"1.2", "**no**"},
		"s4 good tenant's p99: next to a hostile NFS server / alone (provfleet)":         {"1.08", "yes"},
		"s4 good tenant's p99: next to a flood of 2000 valid claims / alone (provfleet)": {"1.11", "**no**"},
		"s5 re-tune in effect, p99 over the edits":                                       {"-", "n/a"},
		"s6-sigterm pending claims provisioned again after the signal (provfleet)":       {"-", "n/a"},
		"s6-sigkill pending claims provisioned again after the signal (provfleet)":       {"16 s", "yes"},
		"s8 idle RSS of one provfleet process next to 10000 claims and PVs":              {"38.5 MiB", "yes"},
		"s8 RSS next to 10000 claims and PVs: provfleet / upstream":                      {"-", "n/a"},
		"s8 time to Ready next to 10000 claims and PVs: provfleet / upstream":            {"-", "n/a"},
		"s12 spread settled after a replica joined":                                      {"-", "n/a"},
		"s12 spread settled after a replica was SIGKILLed":                               {"-", "n/a"},
		"s13 claims/s on a limited API budget per replica: 0 replicas / 1":               {"-", "n/a"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ratios (-want +got):\n%s", diff)
	}
}

func TestWriteMarkdown(t *testing.T) {
	run := &Run{
		Started:  time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC),
		Machine:  "2 CPUs",
		Settings: []string{"QPS 100"},
		Measurements: []Measurement{
			{Result: Result{Scenario: S1Provision, System: SystemProvfleet, Tenants: 1, Claims: 5, Replicas: 1, Seconds: 1.5, P50MS: 10, P99MS: 20, RSSMiB: 55.25, CPUS: 0.5, Watches: 4, APIRPS: 12.5},
				BoundP50MS: 30, BoundP99MS: 40, Goroutines: 90, Note: "n"},
		},
		Sections: []Section{{Title: "Profile", Body: "top\n"}},
	}
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, run); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# provfleet benchmark, 2026-03-01 12:30 UTC",
		"- QPS 100",
		"| s1-provision | provfleet | 1 | 5 | 1 | 1.50 | 10 | 20 | 30 / 40 | 55.2 | - | 0.50 | 90 | 4 | 12.50 | n |",
		"| s2 CPU to provision: provfleet / upstream | - | ≤ 0.2 | n/a |",
		"## Profile\n\ntop\n",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestNFSSection(t *testing.T) {
	claims := func(n int, seconds, cpu float64) func(*Result) {
		return func(r *Result) { r.Claims, r.Seconds, r.CPUS, r.P50MS, r.P99MS = n, seconds, cpu, 10, 20 }
	}
	header := "| phase | backend | claims | seconds | / limit | p50 ms | p99 ms | CPU ms per claim |\n|---|---|--:|--:|--:|--:|--:|--:|\n"
	tests := map[string]struct {
		ms   []Measurement
		want string
	}{
		"nfs and hostPath": {
			ms: []Measurement{
				measurement(S1Provision, SystemProvfleet, 1, 1, claims(500, 10, 2)),
				measurement(S1Provision, SystemLimit, 1, 1, claims(500, 5, 1)),
				measurement(S7NFSProvision, SystemProvfleet, 1, 1, claims(500, 12, 4)),
				measurement(S7NFSProvision, SystemLimit, 1, 1, claims(500, 4, 1)),
				measurement(S7NFSDelete, SystemProvfleet, 1, 1, claims(500, 8, 3)),
			},
			want: header +
				"| provision | nfs | 500 | 12.00 | 3.00 | 10 | 20 | 8.00 |\n" +
				"| provision | hostPath | 500 | 10.00 | 2.00 | 10 | 20 | 4.00 |\n" +
				"| delete | nfs | 500 | 8.00 | - | 10 | 20 | 6.00 |\n",
		},
		"nothing of s7": {
			ms:   []Measurement{measurement(S3Idle, SystemProvfleet, 1, 1, nil)},
			want: header,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NFSSection(tc.ms)
			_, table, _ := strings.Cut(s.Body, "\n\n")
			if diff := cmp.Diff(tc.want, table); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRatiosScaleOut(t *testing.T) {
	idle := func(scenario string, replicas int, rss, renewals, others float64, most, fewest int) Measurement {
		m := measurement(scenario, SystemProvfleet, 2000, replicas, func(r *Result) { r.RSSMiB = rss })
		m.Renewals, m.Others, m.MostLeads, m.FewestLeads = renewals, others, most, fewest
		return m
	}
	type row struct{ Value, Verdict string }
	tests := map[string]struct {
		measurements []Measurement
		want         map[string]row
	}{
		"one replica within its memory, only renewals": {
			measurements: []Measurement{idle(S12Idle, 1, 180, 333, 0, 2000, 2000)},
			want: map[string]row{
				"s12 RSS of the one replica, 2000 provisioners, default Lease":                                                               {"180 MiB", "yes"},
				"s12 idle requests/s per provisioner beyond Lease renewals (renewals 0.167/s), 2000 provisioners, 1 replicas, default Lease": {"0", "yes"},
			},
		},
		"three replicas, one over its memory, spread too wide, other requests": {
			measurements: []Measurement{idle(S12IdleLongLease, 3, 201, 66, 4, 700, 600)},
			want: map[string]row{
				"s12 RSS of the largest of 3 replicas, 2000 provisioners, Lease 60s/40s/5s":                                                     {"201 MiB", "**no**"},
				"s12 idle requests/s per provisioner beyond Lease renewals (renewals 0.033/s), 2000 provisioners, 3 replicas, Lease 60s/40s/5s": {"0.002", "**no**"},
				"s12 provisioners led by one replica, most / fewest, 2000 on 3 replicas, Lease 60s/40s/5s":                                      {"700 / 600", "**no**"},
			},
		},
		"the spread settled in time after a join, not after a kill": {
			measurements: []Measurement{
				measurement(S12Join, SystemProvfleet, 2000, 3, func(r *Result) { r.Seconds = 9 }),
				measurement(S12Kill, SystemProvfleet, 2000, 2, func(r *Result) { r.Seconds = 40 }),
			},
			want: map[string]row{
				"s12 spread settled after a replica joined (2 → 3 replicas, 2000 provisioners)":        {"9 s", "yes"},
				"s12 spread settled after a replica was SIGKILLed (3 → 2 replicas, 2000 provisioners)": {"40 s", "**no**"},
			},
		},
		"a wait that gave up before the spread settled": {
			measurements: []Measurement{func() Measurement {
				m := measurement(S12Join, SystemProvfleet, 2000, 3, func(r *Result) { r.Seconds = 10 })
				m.Unsettled = true
				return m
			}()},
			want: map[string]row{"s12 spread settled after a replica joined (2 → 3 replicas, 2000 provisioners)": {"10 s", "**no**"}},
		},
		"throughput tripled": {
			measurements: []Measurement{
				measurement(S13Throughput, SystemProvfleet, 60, 1, func(r *Result) { r.Seconds = 90 }),
				measurement(S13Throughput, SystemProvfleet, 60, 3, func(r *Result) { r.Seconds = 30 }),
			},
			want: map[string]row{"s13 claims/s on a limited API budget per replica: 3 replicas / 1": {"3", "yes"}},
		},
		"throughput with one replica only": {
			measurements: []Measurement{measurement(S13Throughput, SystemProvfleet, 60, 1, func(r *Result) { r.Seconds = 90 })},
			want:         map[string]row{"s13 claims/s on a limited API budget per replica: 0 replicas / 1": {"-", "n/a"}},
		},
		"s8 against the peer, at each count": {
			measurements: []Measurement{
				measurement(S8Memory, SystemProvfleet, 1, 1, func(r *Result) { r.Claims = 20000; r.RSSMiB = 60; r.Seconds = 3 }),
				measurement(S8Memory, SystemUpstream, 1, 1, func(r *Result) { r.Claims = 20000; r.RSSMiB = 100; r.Seconds = 4 }),
				measurement(S8Memory, SystemProvfleet, 1, 1, func(r *Result) { r.Claims = 10000; r.RSSMiB = 30; r.Seconds = 1 }),
			},
			want: map[string]row{
				"s8 RSS next to 20000 claims and PVs: provfleet / upstream":           {"0.6", "**no**"},
				"s8 time to Ready next to 20000 claims and PVs: provfleet / upstream": {"0.75", "**no**"},
				"s8 RSS next to 10000 claims and PVs: provfleet / upstream":           {"-", "n/a"},
				"s8 time to Ready next to 10000 claims and PVs: provfleet / upstream": {"-", "n/a"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			run := &Run{SpreadTimeout: 17 * time.Second, LongLease: "60s/40s/5s", Measurements: tc.measurements}
			got := map[string]row{}
			for _, r := range Ratios(run) {
				if strings.HasPrefix(r.What, "s12") || strings.HasPrefix(r.What, "s13") || strings.HasPrefix(r.What, "s8 RSS") || strings.HasPrefix(r.What, "s8 time") {
					got[r.What] = row{r.Value, r.verdict()}
				}
			}
			for what := range got {
				if _, ok := tc.want[what]; !ok && got[what].Verdict == "n/a" {
					delete(got, what)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ratios (-want +got):\n%s", diff)
			}
		})
	}
}
