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
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCountLeads(t *testing.T) {
	tests := map[string]struct {
		holders, live []string
		want          leads
	}{
		"every provisioner led by one replica": {
			holders: []string{"a", "a", "a"}, live: []string{"a"},
			want: leads{perReplica: []int{3}},
		},
		"a replica that leads nothing counts as zero": {
			holders: []string{"a", "b", "a"}, live: []string{"a", "b", "c"},
			want: leads{perReplica: []int{2, 1, 0}},
		},
		"a killed replica's Leases are unled until taken": {
			holders: []string{"a", "dead", "b", "dead"}, live: []string{"a", "b"},
			want: leads{perReplica: []int{1, 1}, unled: 2},
		},
		"a released Lease is unled": {
			holders: []string{"", "a"}, live: []string{"a"},
			want: leads{perReplica: []int{1}, unled: 1},
		},
		"no live replica": {
			holders: []string{"a"},
			want:    leads{perReplica: []int{}, unled: 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := countLeads(tc.holders, tc.live)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(leads{})); diff != "" {
				t.Errorf("leads (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLeadsSettled(t *testing.T) {
	type verdict struct {
		Settled             bool
		Bound, Most, Fewest int
	}
	tests := map[string]struct {
		l    leads
		want verdict
	}{
		"even": {
			l:    leads{perReplica: []int{3, 3, 3}},
			want: verdict{Settled: true, Bound: 4, Most: 3, Fewest: 3},
		},
		// 10 over 3: ceil is 4, one more for a hand-over in flight.
		"one above the ceiling": {
			l:    leads{perReplica: []int{5, 3, 2}},
			want: verdict{Settled: true, Bound: 5, Most: 5, Fewest: 2},
		},
		"two above the ceiling": {
			l:    leads{perReplica: []int{6, 2, 2}},
			want: verdict{Settled: false, Bound: 5, Most: 6, Fewest: 2},
		},
		"a joined replica that leads nothing yet": {
			l:    leads{perReplica: []int{1000, 1000, 0}},
			want: verdict{Settled: false, Bound: 668, Most: 1000, Fewest: 0},
		},
		"balanced but one provisioner unled": {
			l:    leads{perReplica: []int{3, 3}, unled: 1},
			want: verdict{Settled: false, Bound: 5, Most: 3, Fewest: 3},
		},
		"one replica leads all": {
			l:    leads{perReplica: []int{2000}},
			want: verdict{Settled: true, Bound: 2001, Most: 2000, Fewest: 2000},
		},
		"no replica": {
			l:    leads{unled: 4},
			want: verdict{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := verdict{Settled: tc.l.settled(), Most: tc.l.most(), Fewest: tc.l.fewest()}
			if len(tc.l.perReplica) > 0 {
				got.Bound = tc.l.bound()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
