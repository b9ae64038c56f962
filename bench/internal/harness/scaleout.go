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
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/bench/internal/measure"
	"github.com/provfleet/provfleet/bench/internal/report"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// replicaLease are the manager's --replica-lease-* defaults, which the
// harness leaves: a killed replica's share must move within its duration
// and a retry period.
var replicaLease = defaultLease

// spreadPoll is how often the harness reads the provisioners' Leases while
// it waits for the spread to settle: a list of thousands of Leases.
const spreadPoll = 500 * time.Millisecond

// renewals is the request key of a Lease renewal, as ownRequests keys them.
const renewals = "update leases"

// scaleOutScenario is scenario 12: S12Provisioners idle provisioners on
// one manager replica, then on up to S12Replicas (each in the manager role
// alone, next to one node agent): each replica's memory, the spread of the
// leads and the idle requests; how soon the spread settles after the last
// replica joins and after one is SIGKILLed; last, the same on
// S12LongLease.
func (b *bench) scaleOutScenario(ctx context.Context) error {
	so := &scaleOut{sys: &provfleetSystem{b: b, managerRole: true}, mixes: map[string]map[string]float64{}}
	defer so.sys.stop(ctx)
	var err error
	if so.baseline, err = b.snapshot(ctx); err != nil {
		return err
	}
	defer func() { b.addSection(spreadMixSection(so.mixes)) }()
	// Bounded: a replica that cannot hold every Lease is a result.
	if so.note, err = b.startIdle(ctx, so.sys, b.tenants(so.sys.name(), b.cfg.S12Provisioners)); err != nil {
		return err
	}
	if err := b.spreadWindow(ctx, so, report.S12Idle); err != nil {
		return err
	}
	so.note = ""
	if b.cfg.S12Replicas < 2 {
		return nil
	}
	return b.spreadOut(ctx, so)
}

// scaleOut is a run of scenario 12: its system, the API baseline, the
// request mixes of its windows, and a note for the next window.
type scaleOut struct {
	sys      *provfleetSystem
	baseline apiSnapshot
	mixes    map[string]map[string]float64
	note     string
}

// spreadOut adds replicas up to S12Replicas, the last join timed, measures
// them idle, kills one and times the spread again, replaces it and
// measures the fleet idle on S12LongLease.
func (b *bench) spreadOut(ctx context.Context, so *scaleOut) error {
	sys := so.sys
	for sys.replicas() < b.cfg.S12Replicas-1 {
		if err := sys.addReplica(ctx); err != nil {
			return err
		}
		if _, err := b.waitSpread(ctx, sys, time.Now()); err != nil {
			return err
		}
	}
	if err := b.spreadChange(ctx, sys, report.S12Join, "from the start of the replica's process", sys.addReplica); err != nil {
		return err
	}
	if err := b.spreadWindow(ctx, so, report.S12Idle); err != nil {
		return err
	}
	kill := func(context.Context) error {
		sys.signal(0, syscall.SIGKILL)
		return nil
	}
	if err := b.spreadChange(ctx, sys, report.S12Kill, "from the SIGKILL of the oldest replica", kill); err != nil {
		return err
	}
	if err := sys.restart(ctx, 0); err != nil {
		return err
	}
	if err := b.setLease(ctx, sys, b.cfg.S12LongLease); err != nil {
		return err
	}
	if _, err := b.waitSpread(ctx, sys, time.Now()); err != nil {
		return err
	}
	return b.spreadWindow(ctx, so, report.S12IdleLongLease)
}

// spread is how the leads stood when a wait for the spread ended.
type spread struct {
	leads   leads
	took    time.Duration
	settled bool
}

// waitSpread waits until the spread of sys settled, at most
// S12SettleTimeout: a spread that did not settle is a result, which the
// returned spread says, not a failure.
func (b *bench) waitSpread(ctx context.Context, sys *provfleetSystem, since time.Time) (spread, error) {
	var s spread
	err := wait.PollUntilContextTimeout(ctx, spreadPoll, b.cfg.S12SettleTimeout, true, func(ctx context.Context) (bool, error) {
		l, err := b.leadsOf(ctx, sys)
		if err != nil {
			// A list cut by the wait's own deadline is no news.
			if ctx.Err() == nil {
				b.logf("%v", err)
			}
			return false, nil
		}
		s = spread{leads: l, took: time.Since(since), settled: l.settled()}
		return s.settled, nil
	})
	if ctx.Err() != nil {
		return s, fmt.Errorf("cannot wait for the spread to settle: %w", err)
	}
	if !s.settled {
		b.logf("the spread did not settle within %v: most %d, fewest %d, unled %d", b.cfg.S12SettleTimeout, s.leads.most(), s.leads.fewest(), s.leads.unled)
	}
	return s, nil
}

// leadsOf counts the provisioners of sys each live replica holds the Lease
// of.
func (b *bench) leadsOf(ctx context.Context, sys *provfleetSystem) (leads, error) {
	list, err := b.kube.CoordinationV1().Leases(managerNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return leads{}, fmt.Errorf("cannot list the Leases: %w", err)
	}
	holder := make(map[string]string, len(list.Items))
	for _, l := range list.Items {
		holder[l.Name] = ptr.Deref(l.Spec.HolderIdentity, "")
	}
	holders := make([]string, len(sys.tenants))
	for i, t := range sys.tenants {
		holders[i] = holder[provisioning.LeaseName(t.provisionerName)]
	}
	return countLeads(holders, sys.liveIDs()), nil
}

// spreadChange makes change (a replica joins or dies) and records how long
// until the spread settled, from when the change began (what from says).
func (b *bench) spreadChange(ctx context.Context, sys *provfleetSystem, scenario, from string, change func(context.Context) error) error {
	start := time.Now()
	if err := change(ctx); err != nil {
		return err
	}
	changed := time.Since(start)
	s, err := b.waitSpread(ctx, sys, start)
	if err != nil {
		return err
	}
	m := report.Measurement{
		Result:     report.Result{Scenario: scenario, System: sys.name(), Tenants: len(sys.tenants), Replicas: sys.replicas(), Seconds: s.took.Seconds()},
		Goroutines: -1, MostLeads: s.leads.most(), FewestLeads: s.leads.fewest(), Unsettled: !s.settled,
	}
	m.Note = fmt.Sprintf("%s (it took %.1f s) until every provisioner's Lease is held by a live replica and none holds more than %d; then %s",
		from, changed.Seconds(), s.leads.bound(), leadsNote(s.leads))
	if !s.settled {
		m.Note = fmt.Sprintf("not settled within %v: %s", b.cfg.S12SettleTimeout, leadsNote(s.leads))
	}
	b.record(m)
	return nil
}

func leadsNote(l leads) string {
	return fmt.Sprintf("leads per replica %v, unled %d", l.perReplica, l.unled)
}

// setLease sets the Lease times of every provisioner of sys and waits until
// each runs with them and has a leader.
func (b *bench) setLease(ctx context.Context, sys *provfleetSystem, lease LeaseTimes) error {
	b.logf("setting the Lease of %d provisioners to %v/%v/%v", len(sys.tenants), lease.Duration, lease.RenewDeadline, lease.RetryPeriod)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, t := range sys.tenants {
		g.Go(func() error {
			_, err := b.editConfig(gctx, t.name, func(pc *v1alpha1.ProvisionerConfig) {
				pc.Spec.LeaderElection = v1alpha1.LeaderElectionSpec{
					LeaseDuration: &metav1.Duration{Duration: lease.Duration},
					RenewDeadline: &metav1.Duration{Duration: lease.RenewDeadline},
					RetryPeriod:   &metav1.Duration{Duration: lease.RetryPeriod},
				}
			})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	sys.lease = lease
	return sys.waitLed(ctx)
}

// spreadWindow measures the idle replicas of sys over S12Window, after
// S3Settle: the largest replica's RSS and charge, each one's in the note,
// the leads, and the replicas' own requests, Lease renewals apart; mixes
// receives the window's requests per provisioner and minute.
func (b *bench) spreadWindow(ctx context.Context, so *scaleOut, scenario string) error {
	sys := so.sys
	time.Sleep(b.cfg.S3Settle)
	l, err := b.leadsOf(ctx, sys)
	if err != nil {
		return err
	}
	w, err := b.open(ctx, sys.pids())
	if err != nil {
		return err
	}
	before, err := ownRequests(ctx, sys.metricsURLs())
	if err != nil {
		return err
	}
	from := time.Now()
	time.Sleep(b.cfg.S12Window)
	after, err := ownRequests(ctx, sys.metricsURLs())
	if err != nil {
		return err
	}
	seconds := time.Since(from).Seconds()
	m := report.Measurement{Result: report.Result{Scenario: scenario, System: sys.name(), Tenants: len(sys.tenants), Replicas: len(w.pids)},
		MostLeads: l.most(), FewestLeads: l.fewest()}
	if err := b.closeIdle(ctx, sys, w, so.baseline, &m); err != nil {
		return err
	}
	m.Seconds = seconds
	sent := grownBy(before, after)
	m.Renewals = sent[renewals] / seconds
	m.Others = (sum(sent) - sent[renewals]) / seconds
	m.APIRPS = sum(sent) / seconds
	replicas := perReplica(w.pids)
	m.RSSMiB, m.ChargedMiB, m.ChargedBy = replicas[0].RSSMiB, replicas[0].ChargedMiB, replicas[0].ChargedBy
	m.Note = fmt.Sprintf("%slease %s; %s; per replica, largest first: RSS %s MiB, charged %s; api req/s: the replicas' own counter, %.2f renewals and %.2f others a second%s",
		noteOf(so.note), leaseOf(scenario, b.cfg), leadsNote(l), rssList(replicas), chargedList(replicas), m.Renewals, m.Others, sys.agentNote())
	b.record(m)
	perMinute := map[string]float64{}
	for k, v := range sent {
		perMinute[k] = v * 60 / seconds / float64(len(sys.tenants))
	}
	so.mixes[fmt.Sprintf("%s, %d replicas", leaseOf(scenario, b.cfg), len(w.pids))] = perMinute
	return nil
}

// noteOf is note as the start of a longer one.
func noteOf(note string) string {
	if note == "" {
		return ""
	}
	return note + "; "
}

// grownBy is what each count grew by from before to after.
func grownBy(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// perReplica is the RSS and charge of each of pids, the largest RSS first.
func perReplica(pids []int) []report.Measurement {
	out := make([]report.Measurement, 0, len(pids))
	for pid, u := range usage(pids) {
		var m report.Measurement
		m.RSSMiB = mib(u.RSS)
		setCharge(&m, map[int]measure.Usage{pid: u})
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b report.Measurement) int { return cmp.Compare(b.RSSMiB, a.RSSMiB) })
	if len(out) == 0 {
		return []report.Measurement{{}}
	}
	return out
}

func rssList(ms []report.Measurement) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("%.1f", m.RSSMiB)
	}
	return strings.Join(out, ", ")
}

func chargedList(ms []report.Measurement) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("%.1f MiB (%s)", m.ChargedMiB, m.ChargedBy)
	}
	return strings.Join(out, ", ")
}

// agentNote tells the node agent's RSS, which no replica's figure holds.
func (s *provfleetSystem) agentNote() string {
	if s.agent == nil || s.agent.exited() {
		return ""
	}
	u := usage([]int{s.agent.Pid()})[s.agent.Pid()]
	return fmt.Sprintf("; the node agent, a process of its own, not counted: RSS %.1f MiB", mib(u.RSS))
}

// leaseOf names the Lease times of a window of scenario 12.
func leaseOf(scenario string, cfg Config) string {
	lease := cfg.Lease
	if scenario == report.S12IdleLongLease {
		lease = cfg.S12LongLease
	}
	return leaseTimes(lease)
}

func leaseTimes(l LeaseTimes) string {
	return fmt.Sprintf("%v/%v/%v", l.Duration, l.RenewDeadline, l.RetryPeriod)
}

// spreadMixSection tabulates the replicas' own idle requests of each
// window of scenario 12.
func spreadMixSection(mixes map[string]map[string]float64) report.Section {
	intro := "The requests the manager replicas sent themselves in each idle window of s12, per provisioner and minute, by verb and resource, " +
		"from their provfleet_api_requests_total counters (watches left out); `update leases` are the Lease renewals, of the provisioners' " +
		"Leases and of the replicas' own. Columns: the provisioners' Lease (duration/renew deadline/retry period) and the replicas."
	return report.Section{Title: "Scenario 12: idle requests per provisioner and minute", Body: mixTable(intro, slices.Sorted(maps.Keys(mixes)), mixes)}
}

// throughputScenario is scenario 13: S13Claims claims of each of
// S13Tenants provisioners on NFS exports, provisioned by one replica, then
// by S13Replicas, each replica on the client budget S13QPS and S13Burst.
// NFS, because a provisioner's leader makes its volumes itself there,
// where a hostPath one's are made by the node's agent.
func (b *bench) throughputScenario(ctx context.Context) error {
	for _, replicas := range slices.Compact([]int{1, b.cfg.S13Replicas}) {
		if err := b.throughputRun(ctx, replicas); err != nil {
			return fmt.Errorf("%d replicas: %w", replicas, err)
		}
	}
	return nil
}

func (b *bench) throughputRun(ctx context.Context, replicas int) error {
	sys := &provfleetSystem{b: b, managerRole: true, budget: budget{b.cfg.S13QPS, b.cfg.S13Burst}}
	tenants := b.tenants(sys.name(), b.cfg.S13Tenants)
	stop, err := b.exports(ctx, sys, tenants)
	defer stop()
	if err != nil {
		return err
	}
	defer sys.stop(ctx)
	ns, baseline, err := b.begin(ctx, sys, tenants, replicas, b.cfg.Lease)
	if err != nil {
		return err
	}
	s, err := b.waitSpread(ctx, sys, time.Now())
	if err != nil {
		return err
	}
	time.Sleep(b.cfg.Settle)
	refs, _, err := b.provisionPhase(ctx, sys, report.S13Throughput, ns, baseline, tenants, b.cfg.S13Claims)
	if err != nil {
		return err
	}
	b.noteThroughput(s)
	if _, err := b.deleteClaims(ctx, refs); err != nil {
		return err
	}
	return b.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// noteThroughput adds the claims a second, the budget and the spread s to
// the note of the measurement just recorded.
func (b *bench) noteThroughput(s spread) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := &b.run.Measurements[len(b.run.Measurements)-1]
	m.MostLeads, m.FewestLeads = s.leads.most(), s.leads.fewest()
	settled := "settled"
	if !s.settled {
		settled = "not settled"
	}
	m.Note = fmt.Sprintf("%.2f claims/s (to the last PV); each replica on --kube-api-qps=%g --kube-api-burst=%d; spread %s before the claims: %s; %s",
		float64(m.Claims)/m.Seconds, b.cfg.S13QPS, b.cfg.S13Burst, settled, leadsNote(s.leads), m.Note)
}

// exports starts an NFS server of each tenant's own, on a folder of its
// own, and has sys put each tenant there: one server each, because the
// manager refuses tenants whose exports of one server nest. It returns
// what stops the servers, also on an error.
func (b *bench) exports(ctx context.Context, sys *provfleetSystem, tenants []tenant) (func(), error) {
	root := filepath.Join(b.cfg.Work, "nfs", strconv.Itoa(b.nextSeq()))
	var servers []*nfsserver.Server
	stop := func() {
		for _, s := range servers {
			if err := s.Stop(); err != nil {
				b.logf("%v", err)
			}
		}
	}
	backends := map[string]v1alpha1.NFSBackend{}
	for _, t := range tenants {
		dir := filepath.Join(root, t.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return stop, fmt.Errorf("cannot create the NFS export's folder: %w", err)
		}
		server, err := nfsserver.Start(ctx, nfsserver.Options{Dir: dir, Path: nfsExportPath})
		if err != nil {
			return stop, err
		}
		servers = append(servers, server)
		if backends[t.name], err = exportOf(server); err != nil {
			return stop, err
		}
	}
	sys.backend = func(t tenant) v1alpha1.BackendSpec {
		nfs := backends[t.name]
		return v1alpha1.BackendSpec{NFS: &nfs}
	}
	return stop, nil
}
