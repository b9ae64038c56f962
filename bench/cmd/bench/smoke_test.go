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

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/provfleet/provfleet/bench/internal/report"
)

// TestSmoke runs every scenario at toy size against a real control plane and
// checks that the harness produced well-formed results for each scenario and
// system; no figure is judged.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var stdout bytes.Buffer
	// The binaries outlive the test, so the next run relinks only what changed.
	args := []string{"-smoke", "-out", out, "-work", t.TempDir(), "-bin", filepath.Join(root, "_output", "bench-smoke", "bin")}
	if err := run(context.Background(), args, &stdout); err != nil {
		t.Fatalf("the smoke run failed: %v\n%s", err, stdout.String())
	}
	f, err := os.Open(filepath.Join(out, "latest.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	results, err := report.ReadJSONL(f)
	if err != nil {
		t.Fatalf("latest.jsonl is malformed: %v", err)
	}
	type key struct{ scenario, system string }
	got := map[key]bool{}
	for _, r := range results {
		got[key{r.Scenario, r.System}] = true
		if r.Claims > 0 && r.Seconds <= 0 {
			t.Errorf("%s/%s provisioned %d claims in %v seconds", r.Scenario, r.System, r.Claims, r.Seconds)
		}
	}
	var missing []key
	for _, want := range []struct{ scenarios, systems []string }{
		{
			[]string{report.S1Provision, report.S1Delete, report.S2Provision, report.S2Delete},
			[]string{report.SystemProvfleet, report.SystemUpstream, report.SystemLimit},
		},
		{
			[]string{report.S3Idle, report.S4Alone, report.S4Noisy, report.S4Settled, report.S4Flood, report.S5Retune, report.S6SIGTERM, report.S6SIGKILL, report.S8Memory},
			[]string{report.SystemProvfleet, report.SystemUpstream},
		},
		{
			[]string{report.S9NodesProvision},
			[]string{report.SystemProvfleet, report.SystemUpstream, report.SystemLimit},
		},
		{
			[]string{report.S9NodesAgent, report.S9NodesCrowded},
			[]string{report.SystemProvfleet, report.SystemUpstream},
		},
		// Scale-out spreads provfleet's own replicas.
		{
			[]string{report.S12Idle, report.S12Join, report.S12Kill, report.S12IdleLongLease, report.S13Throughput},
			[]string{report.SystemProvfleet},
		},
		// The peer has no process that serves no node.
		{[]string{report.S9NodesManager}, []string{report.SystemProvfleet}},
		// The peer has no NFS client.
		{[]string{report.S4Hostile}, []string{report.SystemProvfleet}},
		// The NFS scenario runs no peer: its backend is provfleet's own.
		{
			[]string{report.S7NFSProvision, report.S7NFSDelete},
			[]string{report.SystemProvfleet, report.SystemLimit},
		},
	} {
		for _, scenario := range want.scenarios {
			for _, system := range want.systems {
				if k := (key{scenario, system}); !got[k] {
					missing = append(missing, k)
				}
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("no result for %v", missing)
	}
	mds, err := filepath.Glob(filepath.Join(out, "*.md"))
	if err != nil || len(mds) != 1 {
		t.Fatalf("want one Markdown table in %s, got %v (%v)", out, mds, err)
	}
	md, err := os.ReadFile(mds[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Ratios against the targets", "## Measurements", "| s3-idle | provfleet |", "## NFS against hostPath and the limit", "| provision | nfs | ", "## Scenario 11: cloning a volume"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("the Markdown table lacks %q", want)
		}
	}
	if !slices.ContainsFunc(results, func(r report.Result) bool {
		return r.System == report.SystemProvfleet && r.Scenario == report.S3Idle && r.Replicas == 2
	}) {
		t.Error("no idle measurement of provfleet with two replicas")
	}
}
