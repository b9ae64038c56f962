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
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/bench/internal/measure"
	"github.com/provfleet/provfleet/bench/internal/report"
)

const (
	// annSelectedNode is where the scheduler writes a claim's node; no
	// scheduler runs, so the harness writes it at creation.
	annSelectedNode = "volume.kubernetes.io/selected-node"
	// annVolumeNode is where the hostPath backend records a volume's node.
	annVolumeNode = "hostpath.provfleet.io/node"
	hostnameLabel = "kubernetes.io/hostname"
)

// nodeSystem is provfleet's node agents or the peer's per-node processes,
// serving one WaitForFirstConsumer class on simulated nodes whose disks are
// folders of root.
type nodeSystem interface {
	name() string
	// setup makes what the processes serve; teardown removes it.
	setup(ctx context.Context, t tenant, root string, nodes []string) error
	teardown(ctx context.Context)
	// startCentral starts what serves no node of its own: nil for none.
	startCentral(ctx context.Context) (*process, error)
	// startNode starts the process of node, its disk at dir; the process
	// is returned also on an error, for the caller to stop.
	startNode(ctx context.Context, node, dir string) (*process, error)
	// waitServing waits until n nodes are served.
	waitServing(ctx context.Context, n int) error
}

// nodesCase is one run of scenario 9: claims spread over nodes (none: the
// agent idles next to the claims and PVs already there), the idle agent
// recorded as agentScenario.
type nodesCase struct {
	nodes         []string
	claims        int
	agentScenario string
	// crowd are the claims and PVs of no node around the agent.
	crowd int
}

// nodesScenario is scenario 9: node agents on simulated nodes, against one
// peer process per node, and the limit; then one idle agent next to
// S9Crowd claims and PVs of no node of its own.
func (b *bench) nodesScenario(ctx context.Context) error {
	nodes, err := b.createNodes(ctx, b.cfg.S9Nodes)
	defer b.deleteNodes(ctx, nodes)
	if err != nil {
		return err
	}
	full := nodesCase{nodes: nodes, claims: b.cfg.S9Claims, agentScenario: report.S9NodesAgent}
	for _, sys := range b.nodeSystems() {
		if err := b.nodesRun(ctx, sys, full); err != nil {
			return fmt.Errorf("%s on %d nodes: %w", sys.name(), len(nodes), err)
		}
	}
	if err := b.nodesLimit(ctx, len(nodes)); err != nil {
		return err
	}
	if b.cfg.S9Crowd == 0 {
		return nil
	}
	return b.crowdedRun(ctx, nodes[:1])
}

func (b *bench) nodeSystems() []nodeSystem {
	return []nodeSystem{&agentSystem{b: b}, &peerNodeSystem{b: b}}
}

// crowdedRun measures one idle agent of each system next to S9Crowd claims
// and PVs that no node of its own holds.
func (b *bench) crowdedRun(ctx context.Context, nodes []string) error {
	ns, err := b.namespace(ctx)
	if err != nil {
		return err
	}
	defer b.deleteBoundPairs(ctx, ns)
	if err := b.createBoundPairs(ctx, ns, 0, b.cfg.S9Crowd); err != nil {
		return err
	}
	if err := b.waitAllBound(ctx, ns, b.cfg.S9Crowd); err != nil {
		return err
	}
	for _, sys := range b.nodeSystems() {
		if err := b.nodesRun(ctx, sys, nodesCase{nodes: nodes, agentScenario: report.S9NodesCrowded, crowd: b.cfg.S9Crowd}); err != nil {
			return fmt.Errorf("%s next to %d claims and PVs: %w", sys.name(), b.cfg.S9Crowd, err)
		}
	}
	return nil
}

// createNodes creates n Node objects, each labelled with its hostname as a
// kubelet labels its own; it returns the names made, also on an error.
func (b *bench) createNodes(ctx context.Context, n int) ([]string, error) {
	seq := b.nextSeq()
	var names []string
	for i := range n {
		name := fmt.Sprintf("bench-%d-node-%d", seq, i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hostnameLabel: name}}}
		if _, err := b.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return names, fmt.Errorf("cannot create Node %s: %w", name, err)
		}
		names = append(names, name)
	}
	return names, nil
}

func (b *bench) deleteNodes(ctx context.Context, names []string) {
	for _, name := range names {
		if err := b.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			b.logf("cannot delete Node %s: %v", name, err)
		}
	}
}

// nodesRun starts sys on the nodes of c (the central process first, the
// first node's process last, so the watches each opens are told apart),
// provisions the claims of c, checks where each volume landed, and
// measures the idle processes.
func (b *bench) nodesRun(ctx context.Context, sys nodeSystem, c nodesCase) error {
	t := b.tenants("nodes-"+sys.name(), 1)[0]
	root := filepath.Join(b.cfg.Work, "nodes", t.name)
	if err := b.createNodeClass(ctx, t); err != nil {
		return err
	}
	defer b.deleteClasses(ctx, []tenant{t})
	baseline, err := b.snapshot(ctx)
	if err != nil {
		return err
	}
	// Deferred first, run last: the processes remove their finalizers
	// while the teardown deletes what they serve.
	var procs []*process
	defer func() { stopAll(procs) }()
	if err := sys.setup(ctx, t, root, c.nodes); err != nil {
		return err
	}
	defer sys.teardown(ctx)
	fleet, err := b.startNodeFleet(ctx, sys, root, c.nodes, baseline, &procs)
	if err != nil {
		return err
	}
	if c.claims > 0 {
		refs, err := b.nodesProvision(ctx, sys, t, root, c, pidsOf(procs), fleet.central)
		defer b.deleteNodeClaims(ctx, refs)
		if err != nil {
			return err
		}
	}
	return b.nodesIdle(ctx, sys, c, fleet)
}

// nodeFleet are the processes measured idle, and the watches each opened.
type nodeFleet struct {
	central, agent               *process
	centralWatches, agentWatches int
}

// startNodeFleet starts the central process, then every node's; procs
// receives each process started.
func (b *bench) startNodeFleet(ctx context.Context, sys nodeSystem, root string, nodes []string, baseline apiSnapshot, procs *[]*process) (nodeFleet, error) {
	var f nodeFleet
	central, err := sys.startCentral(ctx)
	if central != nil {
		*procs = append(*procs, central)
		f.central = central
	}
	if err != nil {
		return f, err
	}
	before, err := b.settledSnapshot(ctx)
	if err != nil {
		return f, err
	}
	f.centralWatches = max(before.watches-baseline.watches, 0)
	for i := range nodes {
		// The first node's process starts last, alone.
		node := nodes[(i+1)%len(nodes)]
		if i == len(nodes)-1 {
			if before, err = b.settledSnapshot(ctx); err != nil {
				return f, err
			}
		}
		dir := filepath.Join(root, node)
		if err := os.MkdirAll(filepath.Join(dir, "volumes"), 0o755); err != nil {
			return f, fmt.Errorf("cannot create the disk of node %s: %w", node, err)
		}
		p, err := sys.startNode(ctx, node, dir)
		if p != nil {
			*procs = append(*procs, p)
			f.agent = p
		}
		if err != nil {
			return f, err
		}
		if err := sys.waitServing(ctx, i+1); err != nil {
			return f, err
		}
	}
	after, err := b.settledSnapshot(ctx)
	f.agentWatches = max(after.watches-before.watches, 0)
	return f, err
}

// settledSnapshot takes a snapshot once what just started had S3Settle to
// open its watches.
func (b *bench) settledSnapshot(ctx context.Context) (apiSnapshot, error) {
	time.Sleep(b.cfg.S3Settle)
	return b.snapshot(ctx)
}

func pidsOf(procs []*process) []int {
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.Pid()
	}
	return pids
}

func stopAll(procs []*process) {
	for _, p := range procs {
		if !p.exited() {
			_ = p.Terminate(30 * time.Second)
		}
	}
}

func (b *bench) createNodeClass(ctx context.Context, t tenant) error {
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: t.name},
		Provisioner:       t.provisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if _, err := b.kube.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cannot create StorageClass %s: %w", t.name, err)
	}
	return nil
}

// nodesProvision creates the claims of c at once, claim i on node i mod
// len(nodes), waits until every one is Bound, records how long that took
// and checks where each volume landed. pids are every process of sys,
// central among them where sys has one.
func (b *bench) nodesProvision(ctx context.Context, sys nodeSystem, t tenant, root string, c nodesCase, pids []int, central *process) ([]claimRef, error) {
	ns, err := b.namespace(ctx)
	if err != nil {
		return nil, err
	}
	baseline, err := b.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	w, err := b.open(ctx, pids)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	refs, err := b.createPlacedClaims(ctx, ns, t.name, c)
	if err != nil {
		return refs, err
	}
	st, err := b.waitProvisioned(ctx, refs, start)
	if err != nil {
		return refs, err
	}
	m := report.Measurement{
		Result:     report.Result{Scenario: report.S9NodesProvision, System: sys.name(), Tenants: len(c.nodes), Claims: len(refs), Replicas: 1},
		Goroutines: -1,
	}
	m.Seconds = slices.Max(st.toBound).Seconds()
	latencies(&m, st.toPV, st.toBound)
	if err := b.close(ctx, w, baseline, &m); err != nil {
		return refs, err
	}
	note, err := b.checkPlacement(ctx, ns, root, c)
	m.Note = "latency from the start of the burst to the PV (p50/p99) and to Bound (seconds: the last); " + peaks(pids, central) + "; " + note
	b.record(m)
	return refs, err
}

// peaks tells the highest peak RSS (VmHWM) of one process of pids: the
// central one's apart, where there is one.
func peaks(pids []int, central *process) string {
	var centralPeak, nodePeak uint64
	for pid, u := range usage(pids) {
		if central != nil && pid == central.Pid() {
			centralPeak = u.PeakRSS
			continue
		}
		nodePeak = max(nodePeak, u.PeakRSS)
	}
	if central == nil {
		return fmt.Sprintf("peak RSS of one process: up to %.1f MiB", mib(nodePeak))
	}
	return fmt.Sprintf("peak RSS of one process: central %.1f MiB, node processes up to %.1f MiB", mib(centralPeak), mib(nodePeak))
}

// createPlacedClaims creates the claims of c in ns, each already placed on
// its node as the scheduler would.
func (b *bench) createPlacedClaims(ctx context.Context, ns, class string, c nodesCase) ([]claimRef, error) {
	refs := make([]claimRef, c.claims)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range refs {
		refs[i] = claimRef{ns, fmt.Sprintf("claim-%d", i)}
		g.Go(func() error {
			claim := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{
					Name: refs[i].name, Namespace: ns,
					Annotations: map[string]string{annSelectedNode: c.nodes[i%len(c.nodes)]},
				},
				Spec: corev1.PersistentVolumeClaimSpec{
					StorageClassName: ptr.To(class),
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
					},
				},
			}
			if _, err := b.kube.CoreV1().PersistentVolumeClaims(ns).Create(gctx, claim, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("cannot create claim %s: %w", claim.Name, err)
			}
			return nil
		})
	}
	return refs, g.Wait()
}

func (b *bench) deleteNodeClaims(ctx context.Context, refs []claimRef) {
	if _, err := b.deleteClaims(ctx, refs); err != nil {
		b.logf("%v", err)
	}
}

// nodesIdle measures the fleet's first node's process (and the central
// one) idle, as scenario 8 measures its provisioner.
func (b *bench) nodesIdle(ctx context.Context, sys nodeSystem, c nodesCase, f nodeFleet) error {
	type idle struct {
		scenario string
		p        *process
		watches  int
	}
	measured := []idle{{c.agentScenario, f.agent, f.agentWatches}}
	if f.central != nil && c.claims > 0 {
		measured = append(measured, idle{report.S9NodesManager, f.central, f.centralWatches})
	}
	time.Sleep(b.cfg.S3Settle)
	for _, m := range measured {
		before, err := b.openIdle(ctx, m.p)
		if err != nil {
			return err
		}
		time.Sleep(b.cfg.S3Window)
		r := report.Measurement{Result: report.Result{Scenario: m.scenario, System: sys.name(), Tenants: len(c.nodes), Claims: c.claims + c.crowd, Replicas: 1}}
		if err := b.closeIdleProcess(ctx, m.p, before, &r); err != nil {
			return err
		}
		r.Watches = m.watches
		b.record(r)
	}
	return nil
}

// idleStart is what a process's idle window is measured from.
type idleStart struct {
	at       time.Time
	cpu      time.Duration
	requests float64
}

func (b *bench) openIdle(ctx context.Context, p *process) (idleStart, error) {
	own, err := ownRequests(ctx, []string{p.metricsURL})
	if err != nil {
		return idleStart{}, err
	}
	return idleStart{at: time.Now(), cpu: usage([]int{p.Pid()})[p.Pid()].CPU, requests: sum(own)}, nil
}

// closeIdleProcess fills m for one process: its RSS now, CPU and own API
// requests a second over the window (Leases included, watches not), its
// goroutines and live heap.
func (b *bench) closeIdleProcess(ctx context.Context, p *process, from idleStart, m *report.Measurement) error {
	own, err := ownRequests(ctx, []string{p.metricsURL})
	if err != nil {
		return err
	}
	seconds := time.Since(from.at).Seconds()
	u := usage([]int{p.Pid()})[p.Pid()]
	m.Seconds = seconds
	m.RSSMiB = mib(u.RSS)
	m.CPUS = (u.CPU - from.cpu).Seconds()
	m.APIRPS = (sum(own) - from.requests) / seconds
	m.Goroutines = goroutines(ctx, []string{p.metricsURL})
	setCharge(m, map[int]measure.Usage{p.Pid(): u})
	m.Note = fmt.Sprintf("one process; RSS %.1f MiB anonymous, %.1f MiB mapped from files, peak %.1f MiB; PSS %.1f MiB anonymous, %.1f MiB from files; "+
		"watches: those its start opened; requests: its own counter",
		mib(u.RSSAnon), mib(u.RSSFile), mib(u.PeakRSS), mib(u.PSSAnon), mib(u.PSSFile))
	if heap := b.liveHeap(ctx, p.Pid()); heap != "" {
		m.Note += "; " + heap
	}
	return nil
}

func sum(m map[string]float64) float64 {
	total := 0.0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		total += m[k]
	}
	return total
}

// nodesLimit runs the limit for as many volumes as scenario 9's claims, then
// removes them.
func (b *bench) nodesLimit(ctx context.Context, nodes int) error {
	prefix := fmt.Sprintf("limit-%d", b.nextSeq())
	if _, _, err := b.limitPhase(ctx, limitBurst{scenario: report.S9NodesProvision, prefix: prefix, tenants: nodes, count: b.cfg.S9Claims,
		at: func(v volumeTimes) time.Time { return v.created }}); err != nil {
		return err
	}
	// Left alone, its volumes would crowd the idle agent that follows.
	cmd := exec.CommandContext(ctx, b.bins.limit, "--kubeconfig="+b.kubeconfigs.limit, "--prefix="+prefix,
		"--count="+strconv.Itoa(b.cfg.S9Claims), "--dir="+filepath.Join(b.volumes, prefix), "--delete")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cannot delete the limit's volumes: %w\n%s", err, out)
	}
	return nil
}
