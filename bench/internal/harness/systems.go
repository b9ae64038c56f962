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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/bench/internal/report"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/childproc"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
)

// failParameter is a StorageClass parameter the hostPath backend does not
// know, so it refuses every claim of the class: the failing tenant.
const failParameter = "benchFailEveryClaim"

// tenant is one provisioner and its StorageClass of the same name.
type tenant struct {
	name            string
	provisionerName string
	failing         bool
	// hostile is a tenant whose NFS server answers with the worst replies:
	// it never runs, and nothing waits for it to.
	hostile bool
}

// system is provfleet or the upstream peer, as processes serving tenants.
type system interface {
	name() string
	// start runs replicas of the system for tenants and returns once every
	// tenant has a leader.
	start(ctx context.Context, tenants []tenant, replicas int, lease LeaseTimes) error
	// addReplica runs one more replica and returns once it is up.
	addReplica(ctx context.Context) error
	// leaderReplica is the replica leading t.
	leaderReplica(ctx context.Context, t tenant) (int, error)
	// signal sends sig to every process of a replica and waits for their exit.
	signal(replica int, sig syscall.Signal)
	// restart replaces a replica that exited by a new one.
	restart(ctx context.Context, replica int) error
	pids() []int
	// replicas counts the replicas that run.
	replicas() int
	metricsURLs() []string
	stop(ctx context.Context)
}

func (b *bench) createClasses(ctx context.Context, tenants []tenant) error {
	for _, t := range tenants {
		class := &storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: t.name},
			Provisioner:       t.provisionerName,
			ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		}
		if t.failing {
			class.Parameters = map[string]string{failParameter: "true"}
		}
		if _, err := b.kube.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cannot create StorageClass %s: %w", t.name, err)
		}
	}
	return nil
}

func (b *bench) deleteClasses(ctx context.Context, tenants []tenant) {
	for _, t := range tenants {
		_ = b.kube.StorageV1().StorageClasses().Delete(ctx, t.name, metav1.DeleteOptions{})
	}
}

// provfleetSystem is one manager process per replica.
type provfleetSystem struct {
	b *bench
	// backend is a tenant's backend; nil: a hostPath directory of its own
	// under the volumes folder.
	backend  func(tenant) v1alpha1.BackendSpec
	tenants  []tenant
	managers []*process
	ids      []string
	// lease is the tenants' Lease times, which the replicas' node Lease
	// follows.
	lease LeaseTimes
	// managerRole runs each replica in the manager role alone, as a
	// cluster's Deployment does, next to one node agent of benchNode
	// (agent) for hostPath tenants; else each replica has both roles.
	managerRole bool
	agent       *process
	// budget is each replica's client budget; zero: the run's.
	budget budget
}

// budget is a client's --kube-api-qps and --kube-api-burst.
type budget struct {
	qps   float32
	burst int
}

// benchNode is the node every replica of the earlier scenarios runs on: in
// both roles, as a one-node cluster's manager does, they serve its hostPath
// volumes one at a time under its node Lease.
const benchNode = "bench-node"

func (s *provfleetSystem) name() string { return report.SystemProvfleet }

func (s *provfleetSystem) startManager(ctx context.Context) error {
	id := fmt.Sprintf("pf-%d-%d", s.b.nextSeq(), len(s.managers))
	args := []string{"--role=manager,node", "--node-lease-duration=" + max(s.lease.Duration, 4*time.Second).String()}
	if s.managerRole {
		args = []string{"--role=manager", "--node-lease-namespace=" + testenv.NodeAgentNamespace}
	}
	p, err := s.b.startManager(ctx, managerRun{
		id: id, kubeconfig: s.b.kubeconfigs.manager, namespace: managerNamespace,
		hostPathRoot: s.b.volumes, node: benchNode, budget: s.budget, args: args,
	})
	// A manager that started but never got ready is stopped with the rest.
	if p != nil {
		s.managers = append(s.managers, p)
		s.ids = append(s.ids, id)
	}
	return err
}

// managerRun is one manager process: its identity, ServiceAccount,
// namespace, --host-path-root, NODE_NAME, client budget (zero: the run's)
// and further flags.
type managerRun struct {
	id, kubeconfig, namespace, hostPathRoot, node string
	budget                                        budget
	args                                          []string
}

// startAgent starts the node agent of benchNode, for hostPath tenants of
// replicas in the manager role alone.
func (s *provfleetSystem) startAgent(ctx context.Context) error {
	if !s.managerRole || s.backend != nil {
		return nil
	}
	p, err := s.b.startManager(ctx, managerRun{
		id: fmt.Sprintf("pf-%d-agent", s.b.nextSeq()), kubeconfig: s.b.kubeconfigs.agent, namespace: testenv.NodeAgentNamespace,
		hostPathRoot: s.b.volumes, node: benchNode, args: []string{"--role=node"},
	})
	s.agent = p
	return err
}

// startManager starts a manager process with the run's client budget and a
// profiling endpoint, and returns once it is ready; the process is returned
// also when it did not get ready, for the caller to stop.
func (b *bench) startManager(ctx context.Context, r managerRun) (*process, error) {
	var addrs [3]string
	for i := range addrs {
		var err error
		if addrs[i], err = childproc.FreeAddr(); err != nil {
			return nil, err
		}
	}
	metricsAddr, healthAddr, pprofAddr := addrs[0], addrs[1], addrs[2]
	m, err := managerproc.Start(managerproc.Options{
		Binary:       b.bins.manager,
		Kubeconfig:   r.kubeconfig,
		Namespace:    r.namespace,
		Identity:     r.id,
		HostPathRoot: r.hostPathRoot,
		NodeName:     r.node,
		MetricsAddr:  metricsAddr,
		HealthAddr:   healthAddr,
		Args: append([]string{
			"--kube-api-qps=" + strconv.FormatFloat(float64(cmp.Or(r.budget.qps, b.cfg.QPS)), 'f', -1, 32),
			"--kube-api-burst=" + strconv.Itoa(cmp.Or(r.budget.burst, b.cfg.Burst)),
		}, r.args...),
		Env:     []string{pprofEnv + "=" + pprofAddr},
		LogPath: filepath.Join(b.cfg.Work, "logs", r.id+".log"),
	})
	if err != nil {
		return nil, err
	}
	p := &process{Process: m.Process, metricsURL: m.MetricsURL + "/metrics"}
	b.mu.Lock()
	b.pprofAddrs[p.Pid()] = pprofAddr
	b.mu.Unlock()
	return p, b.poll(ctx, "manager "+r.id+" ready", func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("manager %s exited; its log is %s", r.id, p.LogPath())
		}
		return httpOK(ctx, "http://"+healthAddr+"/readyz"), nil
	})
}

func (s *provfleetSystem) start(ctx context.Context, tenants []tenant, replicas int, lease LeaseTimes) error {
	s.tenants, s.lease = tenants, lease
	if err := s.b.createClasses(ctx, tenants); err != nil {
		return err
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: benchNode, Labels: map[string]string{hostnameLabel: benchNode}}}
	if _, err := s.b.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create Node %s: %w", benchNode, err)
	}
	for _, t := range tenants {
		pc := &v1alpha1.ProvisionerConfig{ObjectMeta: metav1.ObjectMeta{Name: t.name}}
		pc.Spec.ProvisionerName = v1alpha1.ProvisionerName(t.provisionerName)
		pc.Spec.LeaderElection = v1alpha1.LeaderElectionSpec{
			LeaseDuration: &metav1.Duration{Duration: lease.Duration},
			RenewDeadline: &metav1.Duration{Duration: lease.RenewDeadline},
			RetryPeriod:   &metav1.Duration{Duration: lease.RetryPeriod},
		}
		pc.Spec.Backend = s.backendOf(t)
		if _, err := s.b.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("cannot create ProvisionerConfig %s: %w", t.name, err)
		}
	}
	if err := s.startAgent(ctx); err != nil {
		return err
	}
	for range replicas {
		if err := s.startManager(ctx); err != nil {
			return err
		}
	}
	return s.waitLed(ctx)
}

// waitLed waits until every tenant runs at its current generation with a
// leader among the replicas; a hostile one never runs.
func (s *provfleetSystem) waitLed(ctx context.Context) error {
	want := map[string]bool{}
	for _, t := range s.tenants {
		if !t.hostile {
			want[t.name] = true
		}
	}
	// Each poll lists every ProvisionerConfig: a large fleet is listed
	// less often, so the wait does not load the apiserver it measures.
	every := min(100*time.Millisecond*time.Duration(max(1, len(want)/100)), 2*time.Second)
	return s.b.pollEvery(ctx, every, "every ProvisionerConfig Ready with a leader", func(ctx context.Context) (bool, error) {
		list, err := s.b.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		led := 0
		for _, pc := range list.Items {
			if !want[pc.Name] || pc.Status.Leader == "" || pc.Status.ObservedGeneration != pc.Generation {
				continue
			}
			if c := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Reason == v1alpha1.ReasonRunning {
				led++
			}
		}
		return led == len(want), nil
	})
}

func (s *provfleetSystem) backendOf(t tenant) v1alpha1.BackendSpec {
	if s.backend != nil {
		return s.backend(t)
	}
	return s.hostPathBackend(t)
}

// hostPathBackend is a hostPath directory of t's own under the volumes
// folder, in the one-node form a one-node cluster's install has: the
// manager is that node's agent and makes its volumes with no placement
// write.
func (s *provfleetSystem) hostPathBackend(t tenant) v1alpha1.BackendSpec {
	return v1alpha1.BackendSpec{HostPath: &v1alpha1.HostPathBackend{
		Path:       v1alpha1.AbsolutePath(filepath.Join(s.b.volumes, t.name)),
		VolumeType: v1alpha1.HostPathVolumeHostPath,
		NodeName:   benchNode,
	}}
}

func (s *provfleetSystem) addReplica(ctx context.Context) error { return s.startManager(ctx) }

func (s *provfleetSystem) leaderReplica(ctx context.Context, t tenant) (int, error) {
	pc, err := s.b.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(ctx, t.name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("cannot read ProvisionerConfig %s: %w", t.name, err)
	}
	for i, id := range s.ids {
		if id == pc.Status.Leader && !s.managers[i].exited() {
			return i, nil
		}
	}
	return 0, fmt.Errorf("ProvisionerConfig %s is led by %q, none of the running replicas %v", t.name, pc.Status.Leader, s.ids)
}

func (s *provfleetSystem) signal(replica int, sig syscall.Signal) {
	p := s.managers[replica]
	if sig == syscall.SIGKILL {
		p.Kill()
		return
	}
	_ = p.Terminate(30 * time.Second)
}

func (s *provfleetSystem) restart(ctx context.Context, replica int) error {
	if err := s.startManager(ctx); err != nil {
		return err
	}
	last := len(s.managers) - 1
	s.managers[replica], s.ids[replica] = s.managers[last], s.ids[last]
	s.managers, s.ids = s.managers[:last], s.ids[:last]
	return nil
}

func (s *provfleetSystem) pids() []int {
	var out []int
	for _, p := range s.managers {
		if !p.exited() {
			out = append(out, p.Pid())
		}
	}
	return out
}

func (s *provfleetSystem) metricsURLs() []string {
	return urlsOf(s.managers)
}

func (s *provfleetSystem) stop(ctx context.Context) {
	client := s.b.pcfg.ProvfleetV1alpha1().ProvisionerConfigs()
	for _, t := range s.tenants {
		_ = client.Delete(ctx, t.name, metav1.DeleteOptions{})
	}
	// The managers remove their finalizers; wait so the next scenario starts
	// from an empty fleet.
	err := s.b.poll(ctx, "ProvisionerConfigs deleted", func(ctx context.Context) (bool, error) {
		list, err := client.List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		s.b.logf("%v", err)
	}
	s.b.deleteClasses(ctx, s.tenants)
	for _, p := range s.managers {
		if !p.exited() {
			_ = p.Terminate(30 * time.Second)
		}
	}
	if s.agent != nil {
		stopAll([]*process{s.agent})
	}
}

func (s *provfleetSystem) replicas() int { return len(s.liveIDs()) }

// liveIDs are the identities of the replicas that run.
func (s *provfleetSystem) liveIDs() []string {
	var out []string
	for i, p := range s.managers {
		if !p.exited() {
			out = append(out, s.ids[i])
		}
	}
	return out
}

// upstreamSystem is one library process per tenant and replica.
type upstreamSystem struct {
	b       *bench
	tenants []tenant
	lease   LeaseTimes
	// procs[replica][tenant]
	procs [][]*process
}

func (s *upstreamSystem) name() string { return report.SystemUpstream }

func (s *upstreamSystem) startReplica(ctx context.Context) error {
	replica := len(s.procs)
	seq := s.b.nextSeq()
	procs := make([]*process, len(s.tenants))
	s.procs = append(s.procs, procs)
	for i, t := range s.tenants {
		addr, err := childproc.FreeAddr()
		if err != nil {
			return err
		}
		name := fmt.Sprintf("up-%d-%d-%s", seq, replica, t.name)
		p, err := startProcess(name, s.b.bins.upstream, filepath.Join(s.b.cfg.Work, "logs", name+".log"), "http://"+addr+"/metrics", nil,
			"--kubeconfig="+s.b.kubeconfigs.upstream,
			"--provisioner-name="+t.provisionerName,
			"--namespace="+upstreamNamespace,
			"--host-path-root="+s.b.volumes,
			"--path="+filepath.Join(s.b.volumes, t.name),
			"--metrics-bind-address="+addr,
			"--kube-api-qps="+strconv.FormatFloat(float64(s.b.cfg.QPS), 'f', -1, 32),
			"--kube-api-burst="+strconv.Itoa(s.b.cfg.Burst),
			"--lease-duration="+s.lease.Duration.String(),
			"--renew-deadline="+s.lease.RenewDeadline.String(),
			"--retry-period="+s.lease.RetryPeriod.String(),
		)
		if err != nil {
			return err
		}
		procs[i] = p
	}
	return s.b.poll(ctx, "the peer processes serving metrics", func(ctx context.Context) (bool, error) {
		for _, p := range procs {
			if p.exited() {
				return false, fmt.Errorf("%s exited; its log is %s", p.Name(), p.LogPath())
			}
		}
		return goroutines(ctx, urlsOf(procs)) >= 0, nil
	})
}

func urlsOf(procs []*process) []string {
	var out []string
	for _, p := range procs {
		if p != nil && !p.exited() {
			out = append(out, p.metricsURL)
		}
	}
	return out
}

func (s *upstreamSystem) start(ctx context.Context, tenants []tenant, replicas int, lease LeaseTimes) error {
	s.tenants, s.lease = tenants, lease
	if err := s.b.createClasses(ctx, tenants); err != nil {
		return err
	}
	started := time.Now()
	for range replicas {
		if err := s.startReplica(ctx); err != nil {
			return err
		}
	}
	// Led: every tenant's Lease was renewed since the processes started.
	return s.b.poll(ctx, "every peer Lease held", func(ctx context.Context) (bool, error) {
		for _, procs := range s.procs {
			for _, p := range procs {
				if p.exited() {
					return false, fmt.Errorf("%s exited; its log is %s", p.Name(), p.LogPath())
				}
			}
		}
		list, err := s.b.kube.CoordinationV1().Leases(upstreamNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		renewed := map[string]bool{}
		for _, l := range list.Items {
			if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(started.Add(-time.Second)) {
				renewed[l.Name] = true
			}
		}
		for _, t := range tenants {
			if !renewed[upstreamLeaseName(t.provisionerName)] {
				return false, nil
			}
		}
		return true, nil
	})
}

// upstreamLeaseName is the library's Lease name for a provisioner.
func upstreamLeaseName(provisionerName string) string {
	return strings.ReplaceAll(provisionerName, "/", "-")
}

func (s *upstreamSystem) addReplica(ctx context.Context) error { return s.startReplica(ctx) }

// leaderReplica reads the processes' logs: the library logs when its
// controller starts, which it does only once elected.
func (s *upstreamSystem) leaderReplica(_ context.Context, t tenant) (int, error) {
	for r, procs := range s.procs {
		for i, p := range procs {
			if s.tenants[i] != t || p.exited() {
				continue
			}
			data, err := os.ReadFile(p.LogPath())
			if err != nil {
				return 0, fmt.Errorf("cannot read the log of %s: %w", p.Name(), err)
			}
			if strings.Contains(string(data), "Started provisioner controller") {
				return r, nil
			}
		}
	}
	return 0, fmt.Errorf("no running peer process leads %s", t.name)
}

func (s *upstreamSystem) signal(replica int, sig syscall.Signal) {
	var wg sync.WaitGroup
	for _, p := range s.procs[replica] {
		wg.Go(func() {
			if sig == syscall.SIGKILL {
				p.Kill()
			} else {
				_ = p.Terminate(30 * time.Second)
			}
		})
	}
	wg.Wait()
}

func (s *upstreamSystem) restart(ctx context.Context, replica int) error {
	if err := s.startReplica(ctx); err != nil {
		return err
	}
	last := len(s.procs) - 1
	s.procs[replica] = s.procs[last]
	s.procs = s.procs[:last]
	return nil
}

func (s *upstreamSystem) pids() []int {
	var out []int
	for _, procs := range s.procs {
		for _, p := range procs {
			if !p.exited() {
				out = append(out, p.Pid())
			}
		}
	}
	return out
}

func (s *upstreamSystem) replicas() int {
	n := 0
	for _, procs := range s.procs {
		if len(urlsOf(procs)) > 0 {
			n++
		}
	}
	return n
}

func (s *upstreamSystem) metricsURLs() []string {
	var out []string
	for _, procs := range s.procs {
		out = append(out, urlsOf(procs)...)
	}
	return out
}

func (s *upstreamSystem) stop(ctx context.Context) {
	for r := range s.procs {
		s.signal(r, syscall.SIGTERM)
	}
	s.b.deleteClasses(ctx, s.tenants)
	// The next peer with the same name must not wait for a stale Lease.
	for _, t := range s.tenants {
		err := s.b.kube.CoordinationV1().Leases(upstreamNamespace).Delete(ctx, upstreamLeaseName(t.provisionerName), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			s.b.logf("%v", errors.Join(errors.New("cannot delete a peer Lease"), err))
		}
	}
}
