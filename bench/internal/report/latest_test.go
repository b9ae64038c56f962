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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestUpdateJSONLKeepsOtherScenarios is a smoke run of scenario 1 recorded
// into a latest.jsonl that holds rows of other scenarios, one of them
// written before rows carried a date and a commit.
func TestUpdateJSONLKeepsOtherScenarios(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latest.jsonl")
	previous := strings.Join([]string{
		// Written before rows carried their date and commit.
		`{"scenario":"s3-idle","system":"provfleet","tenants":100,"claims":0,"seconds":20,"p50_ms":0,"p99_ms":0,"rss_mib":58.9,"cpu_s":0.49,"watches":4,"api_rps":19.2,"replicas":2}`,
		`{"scenario":"s1-provision","system":"provfleet","tenants":1,"claims":500,"seconds":10.49,"p50_ms":3200,"p99_ms":9000,"rss_mib":65,"cpu_s":3,"watches":4,"api_rps":95,"replicas":1,"requests_per_claim":2.7,"date":"2026-12-01T10:00:00Z","commit":"4d16a97"}`,
		`{"scenario":"s1-provision","system":"provfleet","tenants":1,"claims":3,"seconds":0.5,"p50_ms":100,"p99_ms":200,"rss_mib":50,"cpu_s":0.1,"watches":4,"api_rps":10,"replicas":1,"date":"2026-12-01T09:00:00Z","commit":"4d16a97"}`,
		`{"scenario":"s9-nodes-crowded","system":"upstream","tenants":1,"claims":10000,"seconds":20,"p50_ms":0,"p99_ms":0,"rss_mib":159.2,"cpu_s":0.08,"watches":3,"api_rps":0,"replicas":1,"date":"2026-12-01T21:51:00Z","commit":"7d0bf0e"}`,
	}, "\n") + "\n"
	if err := os.WriteFile(path, []byte(previous), 0o644); err != nil {
		t.Fatal(err)
	}
	run := &Run{Started: time.Date(2026, 12, 2, 12, 30, 0, 0, time.UTC), Commit: "abc1234", Measurements: []Measurement{
		{Result: Result{Scenario: S1Provision, System: SystemProvfleet, Tenants: 1, Claims: 3, Replicas: 1, Seconds: 0.4, P50MS: 90, P99MS: 150, RSSMiB: 51, CPUS: 0.1, Watches: 4, APIRPS: 12, RequestsPerClaim: 1.3}},
		{Result: Result{Scenario: S1Provision, System: SystemLimit, Tenants: 1, Claims: 3, Replicas: 1, Seconds: 0.1, P50MS: 50, P99MS: 60, RSSMiB: 40, CPUS: 0.01, APIRPS: 30}},
	}}
	if err := UpdateJSONL(path, run.Results()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ReadJSONL(f)
	if err != nil {
		t.Fatalf("the merged file is malformed: %v", err)
	}
	const at = "2026-12-02T12:30:00Z"
	want := []Result{
		{Scenario: S1Provision, System: SystemLimit, Tenants: 1, Claims: 3, Replicas: 1, Seconds: 0.1, P50MS: 50, P99MS: 60, RSSMiB: 40, CPUS: 0.01, APIRPS: 30, Date: at, Commit: "abc1234"},
		// The smoke run measured 3 claims: the full run's row stays.
		{Scenario: S1Provision, System: SystemProvfleet, Tenants: 1, Claims: 3, Replicas: 1, Seconds: 0.4, P50MS: 90, P99MS: 150, RSSMiB: 51, CPUS: 0.1, Watches: 4, APIRPS: 12, RequestsPerClaim: 1.3, Date: at, Commit: "abc1234"},
		{Scenario: S1Provision, System: SystemProvfleet, Tenants: 1, Claims: 500, Replicas: 1, Seconds: 10.49, P50MS: 3200, P99MS: 9000, RSSMiB: 65, CPUS: 3, Watches: 4, APIRPS: 95, RequestsPerClaim: 2.7, Date: "2026-12-01T10:00:00Z", Commit: "4d16a97"},
		{Scenario: S3Idle, System: SystemProvfleet, Tenants: 100, Replicas: 2, Seconds: 20, RSSMiB: 58.9, CPUS: 0.49, Watches: 4, APIRPS: 19.2, Date: Unknown, Commit: Unknown},
		{Scenario: S9NodesCrowded, System: SystemUpstream, Tenants: 1, Claims: 10000, Replicas: 1, Seconds: 20, RSSMiB: 159.2, CPUS: 0.08, Watches: 3, Date: "2026-12-01T21:51:00Z", Commit: "7d0bf0e"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("latest.jsonl after the run (-want +got):\n%s", diff)
	}
}

func TestUpdateJSONLStartsAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latest.jsonl")
	row := Result{Scenario: S5Retune, System: SystemProvfleet, Tenants: 1, Replicas: 1, Seconds: 1, Date: "2026-12-02T12:30:00Z", Commit: "abc1234"}
	if err := UpdateJSONL(path, []Result{row}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSONL(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Result{row}, got); diff != "" {
		t.Errorf("latest.jsonl (-want +got):\n%s", diff)
	}
}

func TestUpdateJSONLRefusesAMalformedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latest.jsonl")
	const broken = "{\"scenario\":\"s1-provision\"}\n"
	if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	row := Result{Scenario: S5Retune, System: SystemProvfleet, Tenants: 1, Replicas: 1, Date: "2026-12-02T12:30:00Z", Commit: "abc1234"}
	if err := UpdateJSONL(path, []Result{row}); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("error %v, want one about line 1", err)
	}
	data, err := os.ReadFile(path)
	if err != nil || string(data) != broken {
		t.Errorf("the file was changed to %q (%v); want it left as it was", data, err)
	}
}
