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
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/provfleet/provfleet/internal/chaoshistory"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/faultproxy"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/generated/clientset/versioned"
)

// The simulated nodes, each with a disk (a folder) and a node agent.
var nodeNames = []string{"chaos-node-a", "chaos-node-b", "chaos-node-c"}

// Lease timings: short, so that failovers happen many times in a run,
// with a renew deadline that outlasts a request the proxy holds (holdLimit)
// and a retry, as the defaults (15s, 10s, 2s) outlast a slow apiserver's.
const (
	leaseDuration     = 10 * time.Second
	renewDeadline     = 8 * time.Second
	retryPeriod       = time.Second
	nodeLeaseDuration = 10 * time.Second
	// stopGrace is how long a process may drain after SIGTERM.
	stopGrace = 20 * time.Second
	holdLimit = 3 * time.Second
)

// auditPolicy records the creations and deletions of PersistentVolumes
// and nothing else: the history a run judges double provisioning by.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["persistentvolumes"]
  verbs: ["create", "delete"]
- level: None
`

// cluster is the run's control plane, its fault proxy, its NFS servers
// and its processes.
type cluster struct {
	opts  Options
	root  string // the repository
	env   *testenv.Environment
	kube  kubernetes.Interface
	pcfg  versioned.Interface
	proxy *faultproxy.Proxy

	// managerToken and agentTokens (by node) are the bearer tokens the
	// processes present through the proxy.
	managerToken string
	agentTokens  map[string]string

	nfs []*nfsServer

	mu        sync.Mutex
	processes map[string]*process // by identity
	exits     []unexpectedExit
	storeOff  bool            // processes start without store faults
	removed   map[string]bool // Nodes deleted for a while
}

// unexpectedExit is a process that ended without the run ending it.
type unexpectedExit struct {
	Identity string
	Err      string
	LogTail  string
}

func startCluster(ctx context.Context, opts Options) (*cluster, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	env, err := testenv.Start(ctx, testenv.Options{PVClaimBinderSyncPeriod: 2 * time.Second, AuditPolicy: auditPolicy})
	if err != nil {
		return nil, fmt.Errorf("cannot start the control plane: %w", err)
	}
	c := &cluster{opts: opts, root: root, env: env, agentTokens: map[string]string{}, processes: map[string]*process{}, removed: map[string]bool{}}
	if err := c.connect(ctx); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// connect makes the admin clients, the proxy and the processes' tokens.
func (c *cluster) connect(ctx context.Context) error {
	var err error
	if c.kube, err = kubernetes.NewForConfig(c.env.Config()); err != nil {
		return fmt.Errorf("cannot build the admin client: %w", err)
	}
	if c.pcfg, err = versioned.NewForConfig(c.env.Config()); err != nil {
		return fmt.Errorf("cannot build the admin client: %w", err)
	}
	upstream, err := url.Parse(c.env.Config().Host)
	if err != nil {
		return fmt.Errorf("cannot read the apiserver's address: %w", err)
	}
	transport, err := rest.TransportFor(rest.AnonymousClientConfig(c.env.Config()))
	if err != nil {
		return fmt.Errorf("cannot reach the apiserver: %w", err)
	}
	c.proxy, err = faultproxy.New(faultproxy.Options{
		// No faults until the fleet is up: chaos turns them on.
		Upstream: upstream, Transport: transport, Seed: c.opts.Seed,
		SlowDelay: 500 * time.Millisecond, WatchCutAfter: 10 * time.Second, HoldLimit: holdLimit,
	})
	if err != nil {
		return err
	}
	manager, err := c.env.ManagerServiceAccountConfig(ctx, c.root)
	if err != nil {
		return err
	}
	c.managerToken = manager.BearerToken
	for _, node := range nodeNames {
		agent, err := c.env.NodeAgentPodConfig(ctx, c.root, node)
		if err != nil {
			return err
		}
		c.agentTokens[node] = agent.BearerToken
		if err := os.MkdirAll(c.disk(node), 0o750); err != nil {
			return fmt.Errorf("cannot make the disk of %s: %w", node, err)
		}
	}
	return os.MkdirAll(filepath.Join(c.opts.WorkDir, "history"), 0o750)
}

// disk is the folder standing in for node's disk: its agent's
// --host-path-root.
func (c *cluster) disk(node string) string {
	return filepath.Join(c.opts.WorkDir, "nodes", node)
}

// stop ends every process (SIGKILL: a run that stops early has failed
// already), the NFS servers, the proxy and the control plane.
func (c *cluster) stop() {
	c.mu.Lock()
	processes := c.processes
	c.processes = map[string]*process{}
	c.mu.Unlock()
	for _, p := range processes {
		p.stopping.Store(true)
		p.proc.Kill()
	}
	for _, s := range c.nfs {
		_ = s.stop()
	}
	if c.proxy != nil {
		c.proxy.Close()
	}
	c.env.Stop()
}

// nfsServer is an NFS export behind a front that fails a share of the
// mutating calls; the server behind it can be restarted.
type nfsServer struct {
	dir    string
	front  *nfsserver.Hostile
	faults *nfsserver.Faults
	on     atomic.Bool

	mu      sync.Mutex
	address string
	server  *nfsserver.Server
}

// exportPath is the path each NFS server exports.
const exportPath = "/export"

func (c *cluster) startNFS(ctx context.Context, name string, seed uint64) (*nfsServer, error) {
	s := &nfsServer{dir: filepath.Join(c.opts.WorkDir, name)}
	s.on.Store(true)
	if err := os.MkdirAll(s.dir, 0o750); err != nil {
		return nil, fmt.Errorf("cannot make the export of %s: %w", name, err)
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	// The server keeps its address across restarts: the front's dropped
	// calls always reach it.
	s.faults = &nfsserver.Faults{Upstream: s.address, Seed: seed, Rate: c.opts.NFSFaults}
	front, err := nfsserver.StartHostile(ctx, nfsserver.HostileOptions{Upstream: s.address, Answer: func(ctx context.Context, call nfsserver.Call, client io.Writer) (bool, error) {
		if !s.on.Load() {
			return false, nil
		}
		return s.faults.Answer(ctx, call, client)
	}})
	if err != nil {
		return nil, errors.Join(err, s.stop())
	}
	s.front = front
	c.nfs = append(c.nfs, s)
	return s, nil
}

// start serves the export, on the address of the server before when there
// was one, so that the front reaches it again.
func (s *nfsServer) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	server, err := nfsserver.Start(ctx, nfsserver.Options{Dir: s.dir, Path: exportPath, Address: s.address})
	if err != nil {
		return fmt.Errorf("cannot serve %s over NFS: %w", s.dir, err)
	}
	s.server, s.address = server, server.Addr()
	return nil
}

// restart stops the server behind the front and starts it again.
func (s *nfsServer) restart(ctx context.Context, down time.Duration) error {
	s.mu.Lock()
	err := s.server.Stop()
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("cannot stop the NFS server: %w", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(down):
	}
	// The server outlives the disruption's context: it serves until the
	// run stops it.
	return s.start(context.WithoutCancel(ctx))
}

func (s *nfsServer) stop() error {
	var errs []error
	if s.front != nil {
		errs = append(errs, s.front.Stop())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.server != nil {
		errs = append(errs, s.server.Stop())
	}
	return errors.Join(errs...)
}

// hostPort is the front's host and port, which the ProvisionerConfig names.
func (s *nfsServer) hostPort() (string, int32) {
	host, port, _ := net.SplitHostPort(s.front.Addr())
	p, _ := strconv.Atoi(port)
	return host, int32(p) //nolint:gosec // a TCP port fits
}

// process is one manager or node agent: its identity is its name in
// Leases, in the store's history and at the proxy.
type process struct {
	identity string
	node     string // a node agent's node; empty for a manager
	proc     *managerproc.Process
	// stopping is set before the run ends the process itself.
	stopping atomic.Bool
}

// startManager runs manager replica identity in the manager's role.
func (c *cluster) startManager(identity string) error {
	return c.startProcess(identity, "", c.managerToken, managerproc.Options{
		Namespace: testenv.ManagerNamespace,
		Args:      []string{"--role=manager", "--node-lease-namespace=" + testenv.NodeAgentNamespace},
	})
}

// startAgent runs a node agent of node, named identity.
func (c *cluster) startAgent(identity, node string) error {
	return c.startProcess(identity, node, c.agentTokens[node], managerproc.Options{
		Namespace:    testenv.NodeAgentNamespace,
		HostPathRoot: c.disk(node),
		NodeName:     node,
		Args:         []string{"--role=node"},
	})
}

func (c *cluster) startProcess(identity, node, token string, opts managerproc.Options) error {
	addr, caPEM, err := c.proxy.Endpoint(identity)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(c.opts.WorkDir, identity+".kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, &rest.Config{Host: addr, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}); err != nil {
		return err
	}
	c.mu.Lock()
	storeFaults := !c.storeOff
	c.mu.Unlock()
	opts.Binary, opts.Kubeconfig, opts.Identity = c.opts.ManagerBinary, kubeconfig, identity
	if opts.HostPathRoot == "" {
		opts.HostPathRoot = filepath.Join(c.opts.WorkDir, "nodes")
	}
	opts.Args = append(opts.Args, "-v=2", "--node-lease-duration="+nodeLeaseDuration.String(), "--kube-api-qps=100", "--kube-api-burst=200")
	opts.Env = []string{
		chaoshistory.IdentityEnv + "=" + identity,
		chaoshistory.HistoryEnv + "=" + filepath.Join(c.opts.WorkDir, "history", identity+".jsonl"),
	}
	if storeFaults && c.opts.StoreFaults > 0 {
		opts.Env = append(opts.Env, fmt.Sprintf("%s=rate=%g,seed=%d", chaoshistory.StoreFaultsEnv, c.opts.StoreFaults, c.opts.Seed))
	}
	// Each start of an identity logs to a file of its own, so a restart
	// keeps the log of the process before it.
	c.mu.Lock()
	starts := 0
	for {
		opts.LogPath = filepath.Join(c.opts.WorkDir, "logs", fmt.Sprintf("%s.%d.log", identity, starts))
		if _, err := os.Stat(opts.LogPath); errors.Is(err, os.ErrNotExist) {
			break
		}
		starts++
	}
	c.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(opts.LogPath), 0o750); err != nil {
		return fmt.Errorf("cannot make the log folder: %w", err)
	}
	proc, err := managerproc.Start(opts)
	if err != nil {
		return err
	}
	p := &process{identity: identity, node: node, proc: proc}
	c.mu.Lock()
	c.processes[identity] = p
	c.mu.Unlock()
	go c.watchExit(p)
	return nil
}

// watchExit records a process that ends without the run ending it.
func (c *cluster) watchExit(p *process) {
	<-p.proc.Done()
	if p.stopping.Load() {
		return
	}
	_, err := p.proc.Exited()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exits = append(c.exits, unexpectedExit{Identity: p.identity, Err: fmt.Sprint(err), LogTail: logTail(p.proc.LogPath(), 40)})
}

// kill SIGKILLs the process identity and forgets it.
func (c *cluster) kill(identity string) *process {
	c.mu.Lock()
	p := c.processes[identity]
	delete(c.processes, identity)
	c.mu.Unlock()
	if p != nil {
		p.stopping.Store(true)
		p.proc.Kill()
		<-p.proc.Done()
	}
	return p
}

// terminate SIGTERMs the process identity, and fails unless it exits 0
// within stopGrace, as a drained pod must.
func (c *cluster) terminate(identity string) error {
	c.mu.Lock()
	p := c.processes[identity]
	delete(c.processes, identity)
	c.mu.Unlock()
	if p == nil {
		return nil
	}
	p.stopping.Store(true)
	if err := p.proc.Terminate(stopGrace); err != nil {
		return fmt.Errorf("%s on SIGTERM: %w\n%s", identity, err, logTail(p.proc.LogPath(), 40))
	}
	return nil
}

// managers lists the running managers, by name.
func (c *cluster) managers() []string {
	return c.running(func(p *process) bool { return p.node == "" })
}

// agents lists the running node agents, by name.
func (c *cluster) agents() []string {
	return c.running(func(p *process) bool { return p.node != "" })
}

// all lists the running processes, managers first.
func (c *cluster) all() []string {
	return append(c.managers(), c.agents()...)
}

// agentsOf lists the running agents of node.
func (c *cluster) agentsOf(node string) []string {
	return c.running(func(p *process) bool { return p.node == node })
}

// running lists the running processes that match, by name.
func (c *cluster) running(match func(*process) bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id, p := range c.processes {
		if match(p) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// remove marks node removed, unless it is already or is the last node
// present, which the scheduler needs; it says whether it did.
func (c *cluster) remove(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	gone := 0
	for _, r := range c.removed {
		if r {
			gone++
		}
	}
	if c.removed[node] || gone == len(nodeNames)-1 {
		return false
	}
	c.removed[node] = true
	return true
}

// restore marks node present again.
func (c *cluster) restore(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removed[node] = false
}

// presentNodes are the nodes whose Node exists: those a scheduler picks.
func (c *cluster) presentNodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, node := range nodeNames {
		if !c.removed[node] {
			out = append(out, node)
		}
	}
	return out
}

func (c *cluster) process(identity string) *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.processes[identity]
}
