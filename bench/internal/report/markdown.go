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
	"cmp"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Scenario names, as they appear in the results.
const (
	S1Provision = "s1-provision"
	S1Delete    = "s1-delete"
	S2Provision = "s2-provision"
	S2Delete    = "s2-delete"
	S3Idle      = "s3-idle"
	S4Alone     = "s4-alone"
	S4Noisy     = "s4-noisy"
	S4Settled   = "s4-settled"
	S5Retune    = "s5-retune"
	S6SIGTERM   = "s6-sigterm"
	S6SIGKILL   = "s6-sigkill"
	// S7NFSProvision and S7NFSDelete are scenario 1 on an NFS export that
	// the manager reaches through its own NFSv3 client.
	S7NFSProvision = "s7-nfs-provision"
	S7NFSDelete    = "s7-nfs-delete"
	// S8Memory is one idle provisioner in a cluster full of claims and PVs
	// that it does not serve.
	S8Memory = "s8-memory"
	// S9NodesProvision is claims spread over simulated nodes, each served by
	// its own node agent or peer process; S9NodesAgent, S9NodesManager and
	// S9NodesCrowded are one idle agent (or peer process), the manager, and
	// one agent in a cluster full of claims and PVs of other nodes.
	S9NodesProvision = "s9-nodes-provision"
	S9NodesAgent     = "s9-nodes-agent"
	S9NodesManager   = "s9-nodes-manager"
	S9NodesCrowded   = "s9-nodes-crowded"
	// S10TreeDelete, with the backend's name after it, is one volume whose
	// directory holds a deep or wide tree deleted, in the harness's process.
	S10TreeDelete = "s10-tree-delete"
	// S11Clone, with the backend's name after it, is a volume holding a
	// tree of mixed file sizes cloned by a claim whose data source is its
	// claim.
	S11Clone = "s11-clone"
	// S4Hostile is scenario 4's good tenant next to an NFS provisioner
	// whose server answers every call with the worst replies (provfleet
	// only: the peer has no NFS client).
	S4Hostile = "s4-hostile"
	// S4Flood is scenario 4's good tenant next to a second tenant of the
	// same system whose many valid claims, all in one namespace, were
	// created right before the good tenant's.
	S4Flood = "s4-flood"
	// S12Idle is a fleet of many idle provisioners spread over one or more
	// manager replicas, at the default Lease times; S12IdleLongLease the
	// same with a longer Lease. S12Join and S12Kill are the time until the
	// spread settled after a replica joined and after one was SIGKILLed.
	S12Idle          = "s12-idle"
	S12IdleLongLease = "s12-idle-long-lease"
	S12Join          = "s12-join"
	S12Kill          = "s12-kill"
	// S13Throughput is many provisioners' claims provisioned by one and by
	// several replicas, each on a low API budget of its own.
	S13Throughput = "s13-throughput"
)

// S4Cases are the cases of scenario 4, in the order each round runs them.
var S4Cases = []string{S4Alone, S4Noisy, S4Settled, S4Hostile, S4Flood}

// Measurement is a Result plus what only the Markdown shows.
type Measurement struct {
	Result
	// BoundP50MS and BoundP99MS run from the storage-provisioner annotation
	// to the claim's Bound phase.
	BoundP50MS, BoundP99MS float64
	// Goroutines are summed over the system's processes; -1: not measured.
	Goroutines int
	Note       string
	// Renewals and Others split the system's own idle requests a second
	// (S12Idle, S12IdleLongLease): Lease renewals, and everything else.
	Renewals, Others float64
	// MostLeads and FewestLeads are the most and fewest provisioners one
	// replica leads (scenario 12).
	MostLeads, FewestLeads int
	// Unsettled marks a wait for the spread (S12Join, S12Kill) that ended
	// before the spread settled.
	Unsettled bool
}

// Run is everything one benchmark run reports.
type Run struct {
	Started time.Time
	// Commit is the commit the run measured (git describe).
	Commit   string
	Machine  string
	Settings []string
	// LeaseTimeout is leaseDuration + retryPeriod of the failover scenario.
	LeaseTimeout time.Duration
	// FloodClaims are the flooding tenant's claims of S4Flood.
	FloodClaims int
	// SpreadTimeout is how soon the spread must settle after a replica
	// joined or was killed: the replicas' membership Lease duration plus a
	// retry period.
	SpreadTimeout time.Duration
	// LongLease are the Lease times of S12IdleLongLease, as the settings
	// print them.
	LongLease    string
	Measurements []Measurement
	// Sections are further Markdown sections (profiles, notes), by title.
	Sections []Section
}

// Section is a titled block of Markdown.
type Section struct {
	Title, Body string
}

// Results returns the JSONL view of the measurements, each dated with the
// run's start and commit.
func (r *Run) Results() []Result {
	out := make([]Result, len(r.Measurements))
	for i, m := range r.Measurements {
		out[i] = m.Result
		out[i].Date = r.Started.UTC().Format(time.RFC3339)
		out[i].Commit = cmp.Or(r.Commit, Unknown)
	}
	return out
}

// WriteMarkdown writes the run as a document a person reads.
func WriteMarkdown(w io.Writer, run *Run) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# provfleet benchmark, %s\n\n", run.Started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "Commit: %s\n\nMachine: %s\n\n", cmp.Or(run.Commit, Unknown), run.Machine)
	for _, s := range run.Settings {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	b.WriteString("\n## Ratios against the targets\n\n")
	b.WriteString("| what | value | target | met |\n|---|---|---|---|\n")
	for _, r := range Ratios(run) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.What, r.Value, r.Target, r.verdict())
	}
	b.WriteString("\n## Measurements\n\n")
	b.WriteString("Latencies run from the moment the harness sees a claim carry the storage-provisioner annotation " +
		"to the moment it sees the PV (and, in `bound`, the claim Bound); for `limit` from the start of the burst to each PV. " +
		"`seconds` is the phase's wall time. RSS is the peak (VmHWM) summed over the system's processes, except in s3-idle and s8-memory where it is the " +
		"current RSS after the idle window (in s8-memory `claims` counts the claims in the cluster, each with its PV, and `seconds` is the time from the start " +
		"until the provisioner led and was Ready), and in s12-idle that of the largest replica. `charged MiB`, in the idle and memory scenarios, " +
		"is what the kernel charges for the processes' memory, summed, and where it comes from: `memory.current` (or, under cgroup v1, `memory.usage_in_bytes`) " +
		"of a cgroup that holds the process alone, page cache and kernel memory included, as a container's limit counts it; else `pss`, the proportional set size " +
		"of /proc/<pid>/smaps_rollup, in which a page mapped by several processes counts as a share of it and page cache no process maps counts nowhere. CPU is user+system seconds spent in the phase. `watches` are the apiserver's open WATCH " +
		"requests on claims, volumes, classes and nodes less those open before the system started; `api req/s` are the requests of the " +
		"system's ServiceAccounts per second (apiserver flow-control metrics).\n\n")
	b.WriteString("| scenario | system | tenants | claims | replicas | seconds | p50 ms | p99 ms | bound p50/p99 ms | RSS MiB | charged MiB | CPU s | goroutines | watches | api req/s | note |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, m := range run.Measurements {
		goroutines := "-"
		if m.Goroutines >= 0 {
			goroutines = fmt.Sprint(m.Goroutines)
		}
		bound := "-"
		if m.BoundP99MS > 0 {
			bound = fmt.Sprintf("%.0f / %.0f", m.BoundP50MS, m.BoundP99MS)
		}
		charged := "-"
		if m.ChargedBy != "" {
			charged = fmt.Sprintf("%.1f (%s)", m.ChargedMiB, m.ChargedBy)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %.2f | %.0f | %.0f | %s | %.1f | %s | %.2f | %s | %d | %.2f | %s |\n",
			m.Scenario, m.System, m.Tenants, m.Claims, m.Replicas, m.Seconds, m.P50MS, m.P99MS, bound,
			m.RSSMiB, charged, m.CPUS, goroutines, m.Watches, m.APIRPS, m.Note)
	}
	for _, s := range run.Sections {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n", s.Title, strings.TrimSpace(s.Body))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Ratio is one figure a target is stated in.
type Ratio struct {
	What, Value, Target string
	// Met is nil when the run lacks what the target compares.
	Met *bool
}

func (r Ratio) verdict() string {
	switch {
	case r.Met == nil:
		return "n/a"
	case *r.Met:
		return "yes"
	default:
		return "**no**"
	}
}

// Ratios computes the targets from a run. A target whose inputs the
// run lacks is listed as not applicable.
func Ratios(run *Run) []Ratio {
	r := &ratios{ms: run.Measurements}
	r.idleRSS()
	n := r.idleGrowth()
	r.idleRequests(n)
	r.provisioning()
	r.noisyNeighbour(run.FloodClaims)
	r.retune()
	r.failover(run.LeaseTimeout)
	r.memory()
	r.memoryAgainstPeer()
	r.scaleOut(run.SpreadTimeout, run.LongLease)
	r.throughput()
	return r.out
}

// ratios gathers the targets computed from a run's measurements.
type ratios struct {
	ms  []Measurement
	out []Ratio
}

// find returns the first measurement of scenario and system with tenants
// and replicas, either of which matches any when below 0.
func (r *ratios) find(scenario, system string, tenants, replicas int) *Measurement {
	for i := range r.ms {
		m := &r.ms[i]
		if m.Scenario == scenario && m.System == system && (tenants < 0 || m.Tenants == tenants) && (replicas < 0 || m.Replicas == replicas) {
			return m
		}
	}
	return nil
}

// largest returns the measurement with the most tenants of those that
// match, nil if none does.
func (r *ratios) largest(match func(*Measurement) bool) *Measurement {
	var largest *Measurement
	for i := range r.ms {
		if m := &r.ms[i]; match(m) && (largest == nil || m.Tenants > largest.Tenants) {
			largest = m
		}
	}
	return largest
}

// figure is the value of a target, known when the run had its inputs.
type figure struct {
	value float64
	known bool
}

// add lists a target; its value counts only when known and a number.
func (r *ratios) add(what, target string, f figure, unit string, met bool) {
	ratio := Ratio{What: what, Target: target, Value: "-"}
	if f.known && !math.IsNaN(f.value) && !math.IsInf(f.value, 0) {
		ratio.Value = fmt.Sprintf("%.3g%s", f.value, unit)
		ratio.Met = &met
	}
	r.out = append(r.out, ratio)
}

// idleRSS compares the RSS of the largest idle fleet both systems ran with
// one replica.
func (r *ratios) idleRSS() {
	var idleN int
	for _, m := range r.ms {
		if m.Scenario == S3Idle && m.System == SystemUpstream && m.Replicas == 1 && m.Tenants > idleN && r.find(S3Idle, SystemProvfleet, m.Tenants, 1) != nil {
			idleN = m.Tenants
		}
	}
	pf, up := r.find(S3Idle, SystemProvfleet, idleN, 1), r.find(S3Idle, SystemUpstream, idleN, 1)
	v := ratio(pf, up, func(m *Measurement) float64 { return m.RSSMiB })
	r.add(fmt.Sprintf("s3 idle RSS, %d provisioners: provfleet / upstream", idleN), "≤ 0.2", figure{v, pf != nil && up != nil && up.RSSMiB > 0}, "", v <= 0.2)
}

// idleGrowth is what each idle provisioner beyond the first adds to
// provfleet with one replica; it returns the size of the largest fleet, 0
// without one.
func (r *ratios) idleGrowth() int {
	largest := r.largest(func(m *Measurement) bool {
		return m.Scenario == S3Idle && m.System == SystemProvfleet && m.Replicas == 1 && m.Tenants > 1
	})
	one := r.find(S3Idle, SystemProvfleet, 1, 1)
	ok := largest != nil && one != nil
	var perExtra, extraWatches float64
	n := 0
	if ok {
		n = largest.Tenants
		perExtra = (largest.RSSMiB - one.RSSMiB) * 1024 / float64(n-1)
		extraWatches = float64(largest.Watches - one.Watches)
	}
	r.add(fmt.Sprintf("s3 provfleet RSS per extra idle provisioner (1 → %d)", n), "< 100 KiB", figure{perExtra, ok}, " KiB", perExtra < 100)
	r.add(fmt.Sprintf("s3 provfleet extra watches (1 → %d provisioners)", n), "0", figure{extraWatches, ok}, "", extraWatches <= 0)
	return n
}

// idleRequests is the request rate per provisioner of provfleet's largest
// idle fleet with two replicas; without one, the title names n.
func (r *ratios) idleRequests(n int) {
	two := r.largest(func(m *Measurement) bool {
		return m.Scenario == S3Idle && m.System == SystemProvfleet && m.Replicas == 2
	})
	ok := two != nil && two.Tenants > 0
	var perProvisioner float64
	if ok {
		n = two.Tenants
		perProvisioner = two.APIRPS / float64(n)
	}
	r.add(fmt.Sprintf("s3 apiserver req/s per provisioner, %d provisioners, 2 replicas", n), "≤ 0.2", figure{perProvisioner, ok}, "", perProvisioner <= 0.2)
}

// provisioning compares scenario 2's CPU with the peer's and its time with
// the limit's.
func (r *ratios) provisioning() {
	pf, up := r.find(S2Provision, SystemProvfleet, -1, -1), r.find(S2Provision, SystemUpstream, -1, -1)
	v := ratio(pf, up, func(m *Measurement) float64 { return m.CPUS })
	r.add("s2 CPU to provision: provfleet / upstream", "≤ 0.2", figure{v, pf != nil && up != nil && up.CPUS > 0}, "", v <= 0.2)
	lim := r.find(S2Provision, SystemLimit, -1, -1)
	v = ratio(pf, lim, func(m *Measurement) float64 { return m.Seconds })
	r.add("s2 time until all PVs exist: provfleet / limit", "≤ 1.2", figure{v, pf != nil && lim != nil && lim.Seconds > 0}, "", v <= 1.2)
}

// noisyNeighbour compares the good tenant's p99 next to a failing, hostile
// or flooding tenant (of flood claims) with its p99 alone.
func (r *ratios) noisyNeighbour(flood int) {
	alone := r.find(S4Alone, SystemProvfleet, -1, -1)
	for _, c := range []struct{ scenario, what string }{
		{S4Noisy, "s4 good tenant's p99: with noisy neighbour / alone (provfleet)"},
		{S4Settled, "s4 good tenant's p99: next to a neighbour already failing / alone (provfleet)"},
		{S4Hostile, "s4 good tenant's p99: next to a hostile NFS server / alone (provfleet)"},
		{S4Flood, fmt.Sprintf("s4 good tenant's p99: next to a flood of %d valid claims / alone (provfleet)", flood)},
	} {
		next := r.find(c.scenario, SystemProvfleet, -1, -1)
		v := ratio(next, alone, func(m *Measurement) float64 { return m.P99MS })
		r.add(c.what, "≤ 1.1", figure{v, alone != nil && next != nil && alone.P99MS > 0}, "", v <= 1.1)
	}
}

func (r *ratios) retune() {
	retune := r.find(S5Retune, SystemProvfleet, -1, -1)
	v := 0.0
	if retune != nil {
		v = retune.P99MS / 1000
	}
	r.add("s5 re-tune in effect, p99 over the edits", "≤ 2 s", figure{v, retune != nil}, " s", v <= 2)
}

// failover is how long provfleet's pending claims waited after each signal.
func (r *ratios) failover(leaseTimeout time.Duration) {
	for _, f := range []struct {
		scenario, target string
		limit            time.Duration
	}{
		{S6SIGTERM, "≤ 3 s", 3 * time.Second},
		{S6SIGKILL, fmt.Sprintf("≤ %v (leaseDuration + retryPeriod)", leaseTimeout), leaseTimeout},
	} {
		m := r.find(f.scenario, SystemProvfleet, -1, -1)
		v := 0.0
		if m != nil {
			v = m.Seconds
		}
		r.add(f.scenario+" pending claims provisioned again after the signal (provfleet)", f.target, figure{v, m != nil && f.limit > 0}, " s", v <= f.limit.Seconds())
	}
}

func ratio(a, b *Measurement, field func(*Measurement) float64) float64 {
	if a == nil || b == nil {
		return math.NaN()
	}
	return field(a) / field(b)
}

// memory is the idle RSS of one provfleet process in the cluster full of
// claims and PVs of scenario 8.
func (r *ratios) memory() {
	m := r.find(S8Memory, SystemProvfleet, -1, -1)
	var rss float64
	claims := 0
	if m != nil {
		rss, claims = m.RSSMiB, m.Claims
	}
	r.add(fmt.Sprintf("s8 idle RSS of one provfleet process next to %d claims and PVs", claims), "< 40 MiB", figure{rss, m != nil}, " MiB", rss < 40)
}
