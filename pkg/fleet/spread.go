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
	"cmp"
	"hash/fnv"
	"slices"
)

// spread gives each of names (ProvisionerConfig names) to one of replicas
// (identities, at least one) and returns the owner of each name.
//
// It is rendezvous hashing with bounded load: every pair of name and
// replica has a weight, a name goes to the heaviest replica that has room,
// and a replica has room for ceil(len(names)/len(replicas)). Names are taken
// in an order of their own weights, so that the result depends on the sets
// alone and every replica that sees the same sets computes the same spread
// without talking to the others. A replica that joins or leaves moves about
// the share it takes or leaves behind, and few more: a name moves only when
// its heaviest replica with room changes (spread_test.go measures it).
func spread(names, replicas []string) map[string]string {
	owners := make(map[string]string, len(names))
	if len(replicas) == 0 {
		return owners
	}
	room := (len(names) + len(replicas) - 1) / len(replicas)
	type weighted struct {
		name   string
		weight uint64
	}
	order := make([]weighted, len(names))
	for i, name := range names {
		order[i] = weighted{name, weight("", name)}
	}
	slices.SortFunc(order, func(a, b weighted) int {
		return cmp.Or(cmp.Compare(a.weight, b.weight), cmp.Compare(a.name, b.name))
	})
	load := make(map[string]int, len(replicas))
	ranked := make([]weighted, len(replicas))
	for _, n := range order {
		for i, replica := range replicas {
			ranked[i] = weighted{replica, weight(replica, n.name)}
		}
		slices.SortFunc(ranked, func(a, b weighted) int {
			return cmp.Or(cmp.Compare(b.weight, a.weight), cmp.Compare(a.name, b.name))
		})
		for _, replica := range ranked {
			if load[replica.name] < room {
				load[replica.name]++
				owners[n.name] = replica.name
				break
			}
		}
	}
	return owners
}

// weight is the rendezvous weight of name on replica: FNV-1a of both, mixed
// by the finalizer of SplitMix64 so that names that differ in one character
// get unrelated weights.
func weight(replica, name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(replica))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(name))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
