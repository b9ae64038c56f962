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
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/provfleet/provfleet/bench/internal/measure"
	"github.com/provfleet/provfleet/bench/internal/report"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/pkg/generated/clientset/versioned"
)

const (
	managerNamespace  = "provfleet-system"
	upstreamNamespace = "bench-upstream"
	limitNamespace    = "bench-limit"
	// pprofEnv is read by the profiling file the benchmark adds to its
	// build of the manager.
	pprofEnv = "PROVFLEET_BENCH_PPROF"
	// The PV binder at the setting, so the provisioner and not the
	// binder is what gets measured.
	binderQPS, binderBurst = 1000, 2000
)

var (
	//go:embed assets/peers-rbac.yaml
	peersRBAC []byte
	//go:embed assets/pprof.go.txt
	pprofSource []byte
)

// bench is one run: a control plane, the binaries and the measurements.
type bench struct {
	cfg     Config
	env     *testenv.Environment
	kube    kubernetes.Interface
	pcfg    versioned.Interface
	tracker *tracker
	volumes string
	bins    struct{ manager, upstream, limit string }
	// kubeconfigs of the systems' ServiceAccounts.
	kubeconfigs struct{ manager, agent, upstream, limit string }
	run         *report.Run
	pprofAddrs  map[int]string
	// profiled holds the cases of scenario 4 of which a round was
	// profiled.
	profiled sync.Map

	// mu guards what the systems of a scenario touch when they run at once.
	mu  sync.Mutex
	seq int
}

// Run builds the systems, starts a fresh control plane, runs the configured
// scenarios, writes <UTC date>.md to cfg.Out and merges its rows into
// latest.jsonl there (report.UpdateJSONL). It returns
// the run, also when a scenario failed (with the error).
func Run(ctx context.Context, cfg Config) (*report.Run, error) {
	cfg = withDefaults(cfg)
	for _, dir := range []string{cfg.Out, filepath.Join(cfg.Work, "logs"), filepath.Join(cfg.Work, "volumes"), cfg.BinDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cannot create %s: %w", dir, err)
		}
	}
	b := newBench(cfg)
	b.run.Commit = commitOf(ctx, cfg.RepoRoot)
	if !needsControlPlane(cfg.Scenarios) {
		runErr := b.scenarios(ctx)
		return b.run, errors.Join(runErr, b.write())
	}
	err := b.buildAndStart(ctx)
	if b.env != nil {
		defer b.env.Stop()
	}
	if err != nil {
		return nil, err
	}
	defer b.tracker.stop()
	if err := b.setup(ctx); err != nil {
		return nil, err
	}
	runErr := b.scenarios(ctx)
	if runErr != nil {
		b.env.DumpLogs(cfg.Log)
	}
	if err := b.write(); err != nil {
		return b.run, err
	}
	return b.run, runErr
}

// needsControlPlane reports whether any of scenarios needs the control
// plane and the systems: every one but scenario 10, which deletes trees
// through the backends in the harness's own process.
func needsControlPlane(scenarios []int) bool {
	return slices.ContainsFunc(scenarios, func(n int) bool { return n != 10 })
}

// withDefaults fills what cfg leaves empty: no log, the control plane
// binaries of the repository, the binaries under Work.
func withDefaults(cfg Config) Config {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.ControlPlaneBin == "" {
		cfg.ControlPlaneBin = filepath.Join(cfg.RepoRoot, "_output", "controlplane")
	}
	if cfg.BinDir == "" {
		cfg.BinDir = filepath.Join(cfg.Work, "bin")
	}
	return cfg
}

func newBench(cfg Config) *bench {
	return &bench{
		cfg:        cfg,
		tracker:    newTracker(),
		volumes:    filepath.Join(cfg.Work, "volumes"),
		pprofAddrs: map[int]string{},
		run: &report.Run{
			Started:       time.Now().UTC(),
			Machine:       machine(),
			LeaseTimeout:  cfg.S6Lease.Duration + cfg.S6Lease.RetryPeriod,
			FloodClaims:   cfg.S4Flood,
			SpreadTimeout: replicaLease.Duration + replicaLease.RetryPeriod,
			LongLease:     leaseTimes(cfg.S12LongLease),
			Settings:      settings(cfg),
		},
	}
}

// buildAndStart builds the manager, the peer and the limit while it starts
// the control plane. The caller stops b.env when set, also on an error.
func (b *bench) buildAndStart(ctx context.Context) error {
	b.logf("building the manager, the peer and the limit; starting the control plane")
	// Neither needs the other: the build is seconds when cached, minutes
	// when not, the control plane seconds.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return b.build(gctx) })
	g.Go(func() error {
		var err error
		b.env, err = testenv.Start(gctx, testenv.Options{
			BinDir:                 b.cfg.ControlPlaneBin,
			CRDDir:                 filepath.Join(b.cfg.RepoRoot, "crds"),
			ControllerManagerQPS:   binderQPS,
			ControllerManagerBurst: binderBurst,
		})
		return err
	})
	return g.Wait()
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.cfg.Log, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (b *bench) addSection(s report.Section) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.run.Sections = append(b.run.Sections, s)
}

func (b *bench) nextSeq() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	return b.seq
}

// poll checks cond every 100ms until it holds, fails, or WaitTimeout passes.
func (b *bench) poll(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	return b.pollEvery(ctx, 100*time.Millisecond, what, cond)
}

func (b *bench) pollEvery(ctx context.Context, interval time.Duration, what string, cond wait.ConditionWithContextFunc) error {
	if err := wait.PollUntilContextTimeout(ctx, interval, b.cfg.WaitTimeout, true, cond); err != nil {
		return fmt.Errorf("cannot wait for %s: %w", what, err)
	}
	return nil
}

// build compiles the manager (with the profiling endpoint added through an
// overlay, the source tree untouched), the peer and the limit, both modules
// at once. Into a BinDir kept between runs, go build relinks only what
// changed. Every binary is built as the image builds the manager (static,
// no build paths or symbol tables: hack/image), so memory is measured of what
// runs in a cluster. `make bench-smoke` builds the same into the smoke run's
// BinDir first, so that its timeout does not time the compiler: keep the
// flags, the overlay and the names alike.
func (b *bench) build(ctx context.Context) error {
	binDir := b.cfg.BinDir
	pprofFile := filepath.Join(binDir, "pprof.go")
	if err := os.WriteFile(pprofFile, pprofSource, 0o644); err != nil {
		return fmt.Errorf("cannot write the profiling overlay: %w", err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(b.cfg.RepoRoot, "cmd", "manager", "zz_bench_pprof.go"): pprofFile},
	})
	if err != nil {
		return fmt.Errorf("cannot encode the overlay: %w", err)
	}
	overlayFile := filepath.Join(binDir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		return fmt.Errorf("cannot write the overlay: %w", err)
	}
	b.bins.manager = filepath.Join(binDir, "manager")
	b.bins.upstream = filepath.Join(binDir, "upstream")
	b.bins.limit = filepath.Join(binDir, "limit")
	builds := []struct {
		dir  string
		args []string
	}{
		{b.cfg.RepoRoot, []string{"build", "-trimpath", "-ldflags=-s -w", "-overlay=" + overlayFile, "-o", b.bins.manager, "./cmd/manager"}},
		{filepath.Join(b.cfg.RepoRoot, "bench"), []string{"build", "-trimpath", "-ldflags=-s -w", "-o", binDir + "/", "./cmd/upstream", "./cmd/limit"}},
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, build := range builds {
		g.Go(func() error {
			cmd := exec.CommandContext(gctx, "go", build.args...)
			cmd.Dir = build.dir
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("cannot go %s: %w\n%s", strings.Join(build.args, " "), err, out)
			}
			return nil
		})
	}
	return g.Wait()
}

// setup makes the clients, the systems' ServiceAccounts and the harness's
// watches.
func (b *bench) setup(ctx context.Context) error {
	admin := b.env.Config()
	// The harness creates claims "at once": its own budget must not be what
	// paces them.
	admin.QPS, admin.Burst = 2000, 4000
	var err error
	if b.kube, err = kubernetes.NewForConfig(admin); err != nil {
		return fmt.Errorf("cannot build the admin client: %w", err)
	}
	if b.pcfg, err = versioned.NewForConfig(admin); err != nil {
		return fmt.Errorf("cannot build the ProvisionerConfig client: %w", err)
	}
	deploy := filepath.Join(b.cfg.RepoRoot, "examples", "deploy")
	rbac := filepath.Join(b.cfg.Work, "peers-rbac.yaml")
	if err := os.WriteFile(rbac, peersRBAC, 0o644); err != nil {
		return fmt.Errorf("cannot write the peers' RBAC: %w", err)
	}
	accounts := []struct {
		namespace, name string
		manifests       []string
		path            *string
	}{
		{managerNamespace, "provfleet", []string{filepath.Join(deploy, "namespace.yaml"), filepath.Join(deploy, "rbac.yaml")}, &b.kubeconfigs.manager},
		{testenv.NodeAgentNamespace, testenv.NodeAgentServiceAccount, testenv.DeployManifests(b.cfg.RepoRoot, "namespace.yaml", "node-rbac.yaml"), &b.kubeconfigs.agent},
		{upstreamNamespace, "upstream", []string{rbac}, &b.kubeconfigs.upstream},
		{limitNamespace, "limit", []string{rbac}, &b.kubeconfigs.limit},
	}
	for _, a := range accounts {
		config, err := b.env.ServiceAccountConfig(ctx, a.namespace, a.name, a.manifests...)
		if err != nil {
			return err
		}
		*a.path = filepath.Join(b.cfg.Work, a.name+".kubeconfig")
		if err := testenv.WriteKubeconfig(*a.path, config); err != nil {
			return err
		}
	}
	return b.tracker.start(ctx, b.kube)
}

// apiserverMetrics scrapes the families a snapshot reads from the
// apiserver's own /metrics.
func (b *bench) apiserverMetrics(ctx context.Context) (measure.Metrics, error) {
	body, err := b.kube.Discovery().RESTClient().Get().AbsPath("/metrics").Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot scrape the apiserver: %w", err)
	}
	defer body.Close()
	return measure.ParseMetrics(body, longrunningRequests, dispatchedRequests, requestsTotal)
}

// The apiserver's metric families a snapshot reads.
const (
	longrunningRequests = "apiserver_longrunning_requests"
	dispatchedRequests  = "apiserver_flowcontrol_dispatched_requests_total"
	requestsTotal       = "apiserver_request_total"
)

// watchedResources are the resources whose watches the issue counts.
var watchedResources = map[string]bool{"persistentvolumeclaims": true, "persistentvolumes": true, "storageclasses": true, "nodes": true}

// apiSnapshot is what the apiserver's metrics say at one moment.
type apiSnapshot struct {
	at time.Time
	// watches open on claims, volumes, classes and nodes.
	watches int
	// requests dispatched for ServiceAccounts: only the system under test
	// runs under one (the harness and the binder are exempt).
	requests float64
	// all counts every client's requests by verb and resource; the systems
	// differ only in what their provisioners send.
	all map[string]float64
}

func (b *bench) snapshot(ctx context.Context) (apiSnapshot, error) {
	m, err := b.apiserverMetrics(ctx)
	if err != nil {
		return apiSnapshot{}, err
	}
	return apiSnapshot{
		at: time.Now(),
		watches: int(m.Sum(longrunningRequests, func(l map[string]string) bool {
			return l["verb"] == "WATCH" && watchedResources[l["resource"]]
		})),
		requests: m.Sum(dispatchedRequests, func(l map[string]string) bool {
			return l["flow_schema"] == "service-accounts"
		}),
		all: m.SumBy(requestsTotal, func(l map[string]string) string {
			if l["verb"] == "WATCH" || l["resource"] == "" {
				return ""
			}
			return l["verb"] + " " + l["resource"]
		}),
	}, nil
}

// rate is the system's requests a second between two snapshots.
func rate(from, to apiSnapshot) float64 {
	seconds := to.at.Sub(from.at).Seconds()
	if seconds <= 0 {
		return 0
	}
	return (to.requests - from.requests) / seconds
}

func machine() string {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%d CPUs, %s, Linux %s, control plane v1.37.2 on loopback (etcd without fsync)",
		runtime.NumCPU(), runtime.Version(), strings.TrimSpace(string(kernel)))
}

func settings(cfg Config) []string {
	out := []string{
		fmt.Sprintf("client budget of every system: QPS %g, burst %d (the manager's for its whole fleet, each peer process's, the limit's)", cfg.QPS, cfg.Burst),
		fmt.Sprintf("kube-controller-manager (PV binder) at --kube-api-qps=%d --kube-api-burst=%d", binderQPS, binderBurst),
		fmt.Sprintf("s1: %d claims; s2: %d tenants x %d claims; s3: %v provisioners (peer up to %d processes), %v settle, %v window; s5: %d edits; s6: %d claims per failover, lease %v/%v/%v",
			cfg.S1Claims, cfg.S2Tenants, cfg.S2Claims, cfg.S3Counts, cfg.S3PeerMax, cfg.S3Settle, cfg.S3Window, cfg.S5Edits, cfg.S6Claims,
			cfg.S6Lease.Duration, cfg.S6Lease.RenewDeadline, cfg.S6Lease.RetryPeriod),
		fmt.Sprintf("s4: %d good claims alone and next to %d failing claims, %d valid claims of a flooding tenant (in one namespace); cases %s, in turn, %d rounds pooled",
			cfg.S4Good, cfg.S4Bad, cfg.S4Flood, strings.Join(s4Cases(cfg), ", "), cfg.S4Rounds),
		fmt.Sprintf("both provisioners use provfleet's hostPath backend (the peer through an adapter to the library's interface), 4 workers, the PV finalizer on, Lease %v/%v/%v except in s6",
			cfg.Lease.Duration, cfg.Lease.RenewDeadline, cfg.Lease.RetryPeriod),
		fmt.Sprintf("s7: %d claims of one tenant on the nfs backend with no mount, against an NFSv3 server (go-nfs) on loopback in the harness's process; provfleet and the limit only",
			cfg.S7Claims),
		fmt.Sprintf("s8: one idle provisioner of each system, %v settle, %v window, next to %v claims in turn (each with a kubectl last-applied annotation) and as many PVs bound to them, made by the harness and served by neither",
			cfg.S3Settle, cfg.S3Window, cfg.S8Counts),
		fmt.Sprintf("s12: %d idle hostPath provisioners on manager replicas in the manager role alone (a node agent of their one node apart), 1 replica, then up to %d; "+
			"windows of %v after %v settle; spread settled: every provisioner's Lease held by a live replica, none holding more than ceil(P/R)+1, waited for at most %v; "+
			"the last window with every provisioner's Lease at %s (a renewal every renew deadline less two retry periods); the replicas' own Lease at the manager's defaults",
			cfg.S12Provisioners, cfg.S12Replicas, cfg.S12Window, cfg.S3Settle, cfg.S12SettleTimeout, leaseTimes(cfg.S12LongLease)),
		fmt.Sprintf("s13: %d provisioners x %d claims on NFS exports (one go-nfs server each, in the harness's process), on 1 and on %d manager replicas, each replica at --kube-api-qps=%g --kube-api-burst=%d",
			cfg.S13Tenants, cfg.S13Claims, cfg.S13Replicas, cfg.S13QPS, cfg.S13Burst),
		fmt.Sprintf("s11: a tree of %d MiB of mixed file sizes cloned on hostPath and on NFS (no mount, the go-nfs server in the harness's process), next to cp -a of it on the same file system",
			cfg.S11Bytes>>20),
		fmt.Sprintf("s9: %d nodes, a node agent and a peer process each, %d claims placed evenly on them (WaitForFirstConsumer, selected-node set at creation), the idle agent also next to %d claims and PVs of no node of its own",
			cfg.S9Nodes, cfg.S9Claims, cfg.S9Crowd),
	}
	if cfg.SystemsAtOnce {
		out = append(out, "the systems of each scenario ran at the same time: each one's figures include the others' load")
	}
	return out
}

// commitOf names the commit of the repository at root, with -dirty when its
// files differ from it; report.Unknown when git cannot tell.
func commitOf(ctx context.Context, root string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "describe", "--always", "--dirty", "--abbrev=7").Output()
	if err != nil {
		return report.Unknown
	}
	return strings.TrimSpace(string(out))
}

// write stores the run as <UTC date>.md in cfg.Out and merges its rows into
// latest.jsonl there.
func (b *bench) write() error {
	md, err := os.Create(filepath.Join(b.cfg.Out, b.run.Started.Format("2006-01-02")+".md"))
	if err != nil {
		return fmt.Errorf("cannot create the results table: %w", err)
	}
	defer md.Close()
	if err := report.WriteMarkdown(md, b.run); err != nil {
		return fmt.Errorf("cannot write the results table: %w", err)
	}
	return report.UpdateJSONL(filepath.Join(b.cfg.Out, "latest.jsonl"), b.run.Results())
}
