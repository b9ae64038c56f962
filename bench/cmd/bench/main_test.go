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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/provfleet/provfleet/bench/internal/report"
)

func TestConfigScenario4(t *testing.T) {
	type s4 struct {
		Cases               []string
		Rounds, Flood, Good int
		Scenarios           []int
	}
	tests := map[string]struct {
		args    []string
		want    s4
		wantErr string
	}{
		"defaults": {
			want: s4{Rounds: 4, Flood: 2000, Good: 50, Scenarios: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}},
		},
		"the flood against the good tenant alone, in more rounds": {
			args: []string{"-scenarios=4", "-s4-cases=alone, flood", "-s4-rounds=20", "-s4-flood=1000"},
			want: s4{Cases: []string{report.S4Alone, report.S4Flood}, Rounds: 20, Flood: 1000, Good: 50, Scenarios: []int{4}},
		},
		"smoke keeps the cases": {
			args: []string{"-smoke", "-s4-cases=flood"},
			want: s4{Cases: []string{report.S4Flood}, Rounds: 1, Flood: 5, Good: 2, Scenarios: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}},
		},
		"a case by its scenario name": {
			args:    []string{"-s4-cases=s4-flood"},
			wantErr: `cannot parse -s4-cases: no case "s4-flood", only alone, noisy, settled, hostile, flood`,
		},
		"no case": {
			args:    []string{"-s4-cases=alone,"},
			wantErr: `no case ""`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := config(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := s4{Cases: cfg.S4Cases, Rounds: cfg.S4Rounds, Flood: cfg.S4Flood, Good: cfg.S4Good, Scenarios: cfg.Scenarios}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("scenario 4 (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigScenario11(t *testing.T) {
	tests := map[string]struct {
		args []string
		want int
	}{
		"a GiB by default":       {want: 1 << 30},
		"a few MiB in the smoke": {args: []string{"-smoke"}, want: 4 << 20},
		"as the flag says":       {args: []string{"-scenarios=11", "-s11-bytes=1048576"}, want: 1 << 20},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := config(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cfg.S11Bytes); diff != "" {
				t.Errorf("tree bytes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigScaleOut(t *testing.T) {
	type scaleOut struct {
		S8                                  []int
		Provisioners, Replicas              int
		Window                              time.Duration
		Tenants, Claims, ThroughputReplicas int
		QPS                                 float32
		Burst                               int
	}
	tests := map[string]struct {
		args    []string
		want    scaleOut
		wantErr string
	}{
		"the issue's sizes by default": {
			want: scaleOut{S8: []int{10000, 20000}, Provisioners: 2000, Replicas: 3, Window: time.Minute,
				Tenants: 60, Claims: 10, ThroughputReplicas: 3, QPS: 10, Burst: 10},
		},
		"small sizes from the flags": {
			args: []string{"-s8-objects=500", "-s12-provisioners=60", "-s12-replicas=1", "-s12-window=5s",
				"-s13-tenants=6", "-s13-claims=5", "-s13-replicas=2", "-s13-qps=3", "-s13-burst=4"},
			want: scaleOut{S8: []int{500}, Provisioners: 60, Replicas: 1, Window: 5 * time.Second,
				Tenants: 6, Claims: 5, ThroughputReplicas: 2, QPS: 3, Burst: 4},
		},
		"s8 counts that are not numbers": {
			args:    []string{"-s8-objects=500,many"},
			wantErr: "cannot parse -s8-objects",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := config(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := scaleOut{S8: cfg.S8Counts, Provisioners: cfg.S12Provisioners, Replicas: cfg.S12Replicas, Window: cfg.S12Window,
				Tenants: cfg.S13Tenants, Claims: cfg.S13Claims, ThroughputReplicas: cfg.S13Replicas, QPS: cfg.S13QPS, Burst: cfg.S13Burst}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("scenarios 8, 12 and 13 (-want +got):\n%s", diff)
			}
		})
	}
}
