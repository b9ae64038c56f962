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

package fleet

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func names(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// loads counts the names of each replica.
func loads(owners map[string]string) map[string]int {
	out := map[string]int{}
	for _, replica := range owners {
		out[replica]++
	}
	return out
}

func TestSpreadSmallCases(t *testing.T) {
	for _, tc := range []struct {
		name     string
		names    []string
		replicas []string
		want     map[string]int
	}{
		{name: "no replica", names: []string{"a", "b"}, want: map[string]int{}},
		{name: "no name", replicas: []string{"r1", "r2"}, want: map[string]int{}},
		{name: "one replica takes all", names: []string{"a", "b", "c"}, replicas: []string{"r1"}, want: map[string]int{"r1": 3}},
		{name: "even", names: names("p", 4), replicas: []string{"r1", "r2"}, want: map[string]int{"r1": 2, "r2": 2}},
		{name: "more replicas than names", names: []string{"a"}, replicas: []string{"r1", "r2", "r3"}, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owners := spread(tc.names, tc.replicas)
			if len(owners) != len(tc.names) && len(tc.replicas) > 0 {
				t.Fatalf("%d of %d names spread", len(owners), len(tc.names))
			}
			if tc.want == nil {
				return
			}
			if diff := cmp.Diff(tc.want, loads(owners)); diff != "" {
				t.Errorf("names per replica (-want +got):\n%s", diff)
			}
		})
	}
}

// Every replica computes the spread alone: the same sets in any order
// give the same owners.
func TestSpreadDependsOnTheSetsAlone(t *testing.T) {
	ns := names("provfleet.io/tenant", 50)
	reversed := make([]string, len(ns))
	for i, n := range ns {
		reversed[len(ns)-1-i] = n
	}
	a := spread(ns, []string{"r1", "r2", "r3"})
	b := spread(reversed, []string{"r3", "r1", "r2"})
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("spread of the same sets in another order (-first +second):\n%s", diff)
	}
}

// The bound: each replica owns at most ceil(P/R); and a replica
// that joins or leaves moves little more than the share it takes or
// leaves.
func TestSpreadBalancesAndMovesLittle(t *testing.T) {
	replicas := names("manager-7d9f5c_3c2e", 5)
	for _, p := range []int{1, 7, 60, 61, 2000} {
		ns := names("provfleet.io/tenant", p)
		for r := 1; r <= len(replicas); r++ {
			owners := spread(ns, replicas[:r])
			room := (p + r - 1) / r
			for replica, n := range loads(owners) {
				if n > room {
					t.Errorf("P=%d R=%d: %s owns %d, more than %d", p, r, replica, n, room)
				}
			}
			if r == 1 {
				continue
			}
			// From r-1 to r replicas (a join) and back (a leave).
			before := spread(ns, replicas[:r-1])
			moved := 0
			for name, owner := range owners {
				if before[name] != owner {
					moved++
				}
			}
			// The joiner must take its share; allow a tenth more, and
			// one per replica, for the bound that pushes names on.
			share := loads(owners)[replicas[r-1]]
			if limit := share + share/10 + r; moved > limit {
				t.Errorf("P=%d %d->%d replicas: %d names moved, the joiner took %d (limit %d)", p, r-1, r, moved, share, limit)
			}
		}
	}
}

// A ProvisionerConfig created or deleted moves few others.
func TestSpreadMovesLittleWhenNamesChange(t *testing.T) {
	replicas := []string{"r1", "r2", "r3"}
	ns := names("provfleet.io/tenant", 60)
	before := spread(ns, replicas)
	for _, tc := range []struct {
		name  string
		names []string
	}{
		{name: "one more", names: append(ns[:60:60], "provfleet.io/new")},
		{name: "one fewer", names: ns[1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after := spread(tc.names, replicas)
			moved := 0
			for name, owner := range after {
				if old, ok := before[name]; ok && old != owner {
					moved++
				}
			}
			if moved > 3 {
				t.Errorf("%d of the other names moved", moved)
			}
		})
	}
}
