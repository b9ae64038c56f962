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

import "slices"

// leads is how many provisioners each live replica of a fleet leads, by its
// provisioners' Lease holders.
type leads struct {
	// perReplica counts, in the order of the live replicas, the
	// provisioners each one holds the Lease of.
	perReplica []int
	// unled are the provisioners whose Lease no live replica holds: none
	// holds it, or a replica that is gone, until it expires.
	unled int
}

// countLeads counts the provisioners that holders (one per provisioner,
// empty where none holds its Lease) give each of live.
func countLeads(holders, live []string) leads {
	l := leads{perReplica: make([]int, len(live))}
	for _, h := range holders {
		i := slices.Index(live, h)
		if h == "" || i < 0 {
			l.unled++
			continue
		}
		l.perReplica[i]++
	}
	return l
}

// settled reports whether the spread is done: every provisioner led by a
// live replica and none leading more than ceil(P/R)+1, the bounded load of
// the spread plus one hand-over in flight.
func (l leads) settled() bool {
	if l.unled > 0 || len(l.perReplica) == 0 {
		return false
	}
	return slices.Max(l.perReplica) <= l.bound()
}

// bound is ceil(P/R)+1 for the P provisioners and R live replicas.
func (l leads) bound() int {
	p, r := l.unled, len(l.perReplica)
	for _, n := range l.perReplica {
		p += n
	}
	return (p+r-1)/r + 1
}

// most and fewest are the largest and smallest count of provisioners one
// live replica leads; both 0 without a replica.
func (l leads) most() int {
	if len(l.perReplica) == 0 {
		return 0
	}
	return slices.Max(l.perReplica)
}

func (l leads) fewest() int {
	if len(l.perReplica) == 0 {
		return 0
	}
	return slices.Min(l.perReplica)
}
