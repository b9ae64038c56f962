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

package chaos

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// kind is a kind of disruption.
type kind string

const (
	kindKill       kind = "kill"
	kindRoll       kind = "rolling update"
	kindPartition  kind = "partition"
	kindNFSRestart kind = "NFS server restart"
	kindConfig     kind = "config change"
	kindNode       kind = "node removal"
)

// event is one disruption of the schedule: its kind, when it starts, and
// two draws in [0, 1) that choose its target and shape.
type event struct {
	At          time.Duration
	Kind        kind
	Pick, Shape float64
}

// schedule draws the disruptions of a run of duration d from seed: for
// each kind, arrivals at the mean interval of every (a Poisson process),
// and one at a random time when none arrived, so that a short run has each
// kind. Every disruption starts in the first 80% of the run, so that it
// can end before the faults are turned off.
func schedule(seed uint64, d time.Duration, every Intervals) []event {
	rng := rand.New(rand.NewPCG(seed, 0x7363686564756c65)) //nolint:gosec // a replayable schedule, no secret
	last := time.Duration(float64(d) * 0.8)
	var events []event
	for _, k := range []struct {
		kind kind
		mean time.Duration
	}{
		{kindKill, every.Kill}, {kindRoll, every.Roll}, {kindPartition, every.Partition},
		{kindNFSRestart, every.NFSRestart}, {kindConfig, every.Config}, {kindNode, every.Node},
	} {
		n := 0
		for at := arrival(rng, k.mean); at < last; at += arrival(rng, k.mean) {
			events = append(events, event{At: at, Kind: k.kind, Pick: rng.Float64(), Shape: rng.Float64()})
			n++
		}
		if n == 0 {
			at := time.Duration(float64(d) * (0.1 + 0.6*rng.Float64()))
			events = append(events, event{At: at, Kind: k.kind, Pick: rng.Float64(), Shape: rng.Float64()})
		}
	}
	slices.SortStableFunc(events, func(a, b event) int { return int(a.At - b.At) })
	return events
}

// arrival is the time to the next arrival of a Poisson process of mean
// interval mean.
func arrival(rng *rand.Rand, mean time.Duration) time.Duration {
	return time.Duration(-math.Log(1-rng.Float64()) * float64(mean))
}

// between maps x in [0, 1) onto [lo, hi).
func between(x float64, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(x*float64(hi-lo))
}
