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
	"fmt"
	"math"
	"slices"
	"time"
)

// replicaRSSLimit is the most one manager replica of scenario 12 may hold.
const replicaRSSLimit = 200

// scaleOut lists scenario 12's targets: each idle window's replica RSS,
// requests beyond Lease renewals and spread, and how soon the spread
// settled after a join and after a kill, against spreadTimeout.
func (r *ratios) scaleOut(spreadTimeout time.Duration, longLease string) {
	for i := range r.ms {
		m := &r.ms[i]
		if m.System != SystemProvfleet || (m.Scenario != S12Idle && m.Scenario != S12IdleLongLease) {
			continue
		}
		lease := "default Lease"
		if m.Scenario == S12IdleLongLease {
			lease = "Lease " + longLease
		}
		what := fmt.Sprintf("RSS of the largest of %d replicas", m.Replicas)
		if m.Replicas == 1 {
			what = "RSS of the one replica"
		}
		r.add(fmt.Sprintf("s12 %s, %d provisioners, %s", what, m.Tenants, lease), fmt.Sprintf("≤ %d MiB", replicaRSSLimit),
			figure{m.RSSMiB, true}, " MiB", m.RSSMiB <= replicaRSSLimit)
		others := m.Others / float64(m.Tenants)
		r.add(fmt.Sprintf("s12 idle requests/s per provisioner beyond Lease renewals (renewals %.3g/s), %d provisioners, %d replicas, %s",
			m.Renewals/float64(m.Tenants), m.Tenants, m.Replicas, lease), "0", figure{others, m.Tenants > 0}, "", others == 0)
		if m.Replicas > 1 {
			bound := (m.Tenants+m.Replicas-1)/m.Replicas + 1
			r.add(fmt.Sprintf("s12 provisioners led by one replica, most / fewest, %d on %d replicas, %s", m.Tenants, m.Replicas, lease),
				fmt.Sprintf("≤ %d (ceil(P/R)+1)", bound), figure{float64(m.MostLeads), true}, fmt.Sprintf(" / %d", m.FewestLeads), m.MostLeads <= bound)
		}
	}
	for _, c := range []struct{ scenario, what string }{
		{S12Join, "s12 spread settled after a replica joined"},
		{S12Kill, "s12 spread settled after a replica was SIGKILLed"},
	} {
		m := r.find(c.scenario, SystemProvfleet, -1, -1)
		v, settled := 0.0, false
		what := c.what
		if m != nil {
			v, settled = m.Seconds, !m.Unsettled
			what = fmt.Sprintf("%s (%d → %d replicas, %d provisioners)", c.what, joinedFrom(m), m.Replicas, m.Tenants)
		}
		r.add(what, fmt.Sprintf("≤ %v (replica Lease duration + retry period)", spreadTimeout), figure{v, m != nil && spreadTimeout > 0}, " s",
			settled && v <= spreadTimeout.Seconds())
	}
}

// joinedFrom is how many replicas ran before the change m measured.
func joinedFrom(m *Measurement) int {
	if m.Scenario == S12Join {
		return m.Replicas - 1
	}
	return m.Replicas + 1
}

// throughput compares the claims a second of the most replicas of scenario
// 13 with one replica's.
func (r *ratios) throughput() {
	one := r.find(S13Throughput, SystemProvfleet, -1, 1)
	most := r.largestReplicas(S13Throughput)
	v, replicas := math.NaN(), 0
	if one != nil && most != nil && most.Replicas > 1 {
		v, replicas = ratio(one, most, func(m *Measurement) float64 { return m.Seconds }), most.Replicas
	}
	r.add(fmt.Sprintf("s13 claims/s on a limited API budget per replica: %d replicas / 1", replicas), "> 2.5",
		figure{v, replicas > 1 && most.Seconds > 0}, "", v > 2.5)
}

// largestReplicas is provfleet's measurement of scenario with the most
// replicas, nil without one.
func (r *ratios) largestReplicas(scenario string) *Measurement {
	var out *Measurement
	for i := range r.ms {
		if m := &r.ms[i]; m.Scenario == scenario && m.System == SystemProvfleet && (out == nil || m.Replicas > out.Replicas) {
			out = m
		}
	}
	return out
}

// memoryAgainstPeer compares provfleet's idle RSS and time to Ready next
// to each count of claims and PVs of scenario 8 with the peer's.
func (r *ratios) memoryAgainstPeer() {
	var counts []int
	for _, m := range r.ms {
		if m.Scenario == S8Memory && !slices.Contains(counts, m.Claims) {
			counts = append(counts, m.Claims)
		}
	}
	slices.Sort(counts)
	for _, n := range counts {
		pf, up := r.findClaims(S8Memory, SystemProvfleet, n), r.findClaims(S8Memory, SystemUpstream, n)
		for _, f := range []struct {
			what  string
			field func(*Measurement) float64
		}{
			{"RSS", func(m *Measurement) float64 { return m.RSSMiB }},
			{"time to Ready", func(m *Measurement) float64 { return m.Seconds }},
		} {
			v := ratio(pf, up, f.field)
			r.add(fmt.Sprintf("s8 %s next to %d claims and PVs: provfleet / upstream", f.what, n), "≤ 0.5",
				figure{v, pf != nil && up != nil && f.field(up) > 0}, "", v <= 0.5)
		}
	}
}

// findClaims returns the first measurement of scenario and system with
// claims.
func (r *ratios) findClaims(scenario, system string, claims int) *Measurement {
	for i := range r.ms {
		if m := &r.ms[i]; m.Scenario == scenario && m.System == system && m.Claims == claims {
			return m
		}
	}
	return nil
}
