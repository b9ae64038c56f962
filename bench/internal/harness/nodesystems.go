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
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/bench/internal/report"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/childproc"
)

// agentSystem is provfleet: one manager (--role=manager) and one node agent
// (--role=node) per node, serving one hostPath ProvisionerConfig that
// selects every node with an agent.
type agentSystem struct {
	b *bench
	t tenant
}

func (s *agentSystem) name() string { return report.SystemProvfleet }

// setup creates the ProvisionerConfig: local volumes, each node's base
// directory in its own folder, under the agent's --host-path-root.
func (s *agentSystem) setup(ctx context.Context, t tenant, root string, nodes []string) error {
	s.t = t
	hostPath := &v1alpha1.HostPathBackend{
		Path:       v1alpha1.AbsolutePath(root),
		VolumeType: v1alpha1.HostPathVolumeLocal,
	}
	for _, node := range nodes {
		hostPath.NodePaths = append(hostPath.NodePaths, v1alpha1.NodePath{
			Nodes: []string{node},
			Path:  v1alpha1.AbsolutePath(filepath.Join(root, node, "volumes")),
		})
	}
	pc := &v1alpha1.ProvisionerConfig{ObjectMeta: metav1.ObjectMeta{Name: t.name}}
	pc.Spec.ProvisionerName = v1alpha1.ProvisionerName(t.provisionerName)
	pc.Spec.Backend = v1alpha1.BackendSpec{HostPath: hostPath}
	if _, err := s.b.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cannot create ProvisionerConfig %s: %w", t.name, err)
	}
	return nil
}

// teardown deletes the ProvisionerConfig and waits until it is gone, while
// the processes still run to remove their finalizers.
func (s *agentSystem) teardown(ctx context.Context) {
	client := s.b.pcfg.ProvfleetV1alpha1().ProvisionerConfigs()
	_ = client.Delete(ctx, s.t.name, metav1.DeleteOptions{})
	err := s.b.poll(ctx, "ProvisionerConfig deleted", func(ctx context.Context) (bool, error) {
		list, err := client.List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		s.b.logf("%v", err)
	}
}

func (s *agentSystem) startCentral(ctx context.Context) (*process, error) {
	return s.b.startManager(ctx, managerRun{
		id: fmt.Sprintf("pf-%d-manager", s.b.nextSeq()), kubeconfig: s.b.kubeconfigs.manager, namespace: managerNamespace,
		hostPathRoot: s.b.volumes, args: []string{"--role=manager", "--node-lease-namespace=" + testenv.NodeAgentNamespace},
	})
}

func (s *agentSystem) startNode(ctx context.Context, node, dir string) (*process, error) {
	return s.b.startManager(ctx, managerRun{
		id: fmt.Sprintf("pf-%d-%s", s.b.nextSeq(), node), kubeconfig: s.b.kubeconfigs.agent, namespace: testenv.NodeAgentNamespace,
		hostPathRoot: dir, node: node, args: []string{"--role=node"},
	})
}

// waitServing waits until the manager reports n nodes served.
func (s *agentSystem) waitServing(ctx context.Context, n int) error {
	return s.b.poll(ctx, fmt.Sprintf("%d nodes served", n), func(ctx context.Context) (bool, error) {
		pc, err := s.b.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(ctx, s.t.name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return pc.Status.Nodes != nil && int(pc.Status.Nodes.Served) == n, nil
	})
}

// peerNodeSystem is the upstream library, one process per node that
// provisions only the claims placed on its node, without a Lease, as
// node-local provisioners built on it run.
type peerNodeSystem struct {
	b       *bench
	t       tenant
	started []*process
}

func (s *peerNodeSystem) name() string { return report.SystemUpstream }

func (s *peerNodeSystem) setup(_ context.Context, t tenant, _ string, _ []string) error {
	s.t = t
	return nil
}

func (s *peerNodeSystem) teardown(context.Context) {}

func (s *peerNodeSystem) startCentral(context.Context) (*process, error) { return nil, nil }

func (s *peerNodeSystem) startNode(_ context.Context, node, dir string) (*process, error) {
	addr, err := childproc.FreeAddr()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("up-%d-%s", s.b.nextSeq(), node)
	p, err := startProcess(name, s.b.bins.upstream, filepath.Join(s.b.cfg.Work, "logs", name+".log"), "http://"+addr+"/metrics", nil,
		"--kubeconfig="+s.b.kubeconfigs.upstream,
		"--provisioner-name="+s.t.provisionerName,
		"--namespace="+upstreamNamespace,
		"--node-name="+node,
		"--host-path-root="+dir,
		"--path="+filepath.Join(dir, "volumes"),
		"--metrics-bind-address="+addr,
		"--kube-api-qps="+strconv.FormatFloat(float64(s.b.cfg.QPS), 'f', -1, 32),
		"--kube-api-burst="+strconv.Itoa(s.b.cfg.Burst),
	)
	if err != nil {
		return nil, err
	}
	s.started = append(s.started, p)
	return p, nil
}

// waitServing waits until the processes serve metrics: the library says
// no more of when it serves.
func (s *peerNodeSystem) waitServing(ctx context.Context, n int) error {
	return s.b.poll(ctx, fmt.Sprintf("%d peer processes serving metrics", n), func(ctx context.Context) (bool, error) {
		for _, p := range s.started {
			if p.exited() {
				return false, fmt.Errorf("%s exited; its log is %s", p.Name(), p.LogPath())
			}
		}
		return len(s.started) >= n && goroutines(ctx, urlsOf(s.started)) >= 0, nil
	})
}

// checkPlacement checks that each claim of c in ns has exactly one PV, on
// the claim's selected node by its node affinity and annotation, its
// directory in that node's folder of root, and that each node's folder
// holds as many directories as the node has claims.
func (b *bench) checkPlacement(ctx context.Context, ns, root string, c nodesCase) (string, error) {
	pvs, err := b.kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("cannot list PVs: %w", err)
	}
	perClaim := map[string][]corev1.PersistentVolume{}
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == ns {
			perClaim[ref.Name] = append(perClaim[ref.Name], pv)
		}
	}
	var problems []string
	want := map[string]int{}
	for i := range c.claims {
		name, node := fmt.Sprintf("claim-%d", i), c.nodes[i%len(c.nodes)]
		want[node]++
		got := perClaim[name]
		if len(got) != 1 {
			problems = append(problems, fmt.Sprintf("claim %s has %d PVs", name, len(got)))
			continue
		}
		if where := volumeNode(got[0], filepath.Join(root, node, "volumes")); where != node {
			problems = append(problems, fmt.Sprintf("claim %s placed on %s has its PV %s on %s", name, node, got[0].Name, where))
		}
	}
	counts := make([]string, 0, len(c.nodes))
	for _, node := range c.nodes {
		dirs, err := volumeDirs(filepath.Join(root, node, "volumes"))
		if err != nil {
			return "", fmt.Errorf("cannot read the disk of node %s: %w", node, err)
		}
		counts = append(counts, strconv.Itoa(dirs))
		if dirs != want[node] {
			problems = append(problems, fmt.Sprintf("node %s holds %d directories for %d claims", node, dirs, want[node]))
		}
	}
	note := fmt.Sprintf("every claim one PV on its node, directories per node folder: %s", strings.Join(counts, ", "))
	if len(problems) > 0 {
		note = fmt.Sprintf("%d placement problems, directories per node folder: %s", len(problems), strings.Join(counts, ", "))
		return note, fmt.Errorf("volumes misplaced: %s", strings.Join(problems[:min(len(problems), 10)], "; "))
	}
	return note, nil
}

// volumeDirs counts the volume directories in dir; the backend's own
// bookkeeping there is hidden.
func volumeDirs(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	n := 0
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n, err
}

// volumeNode is the node pv lives on when its node affinity, its node
// annotation and its directory (under dir) agree; otherwise it says what
// disagrees.
func volumeNode(pv corev1.PersistentVolume, dir string) string {
	path := ""
	switch {
	case pv.Spec.Local != nil:
		path = pv.Spec.Local.Path
	case pv.Spec.HostPath != nil:
		path = pv.Spec.HostPath.Path
	}
	affinity := ""
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil && len(a.Required.NodeSelectorTerms) == 1 {
		if exprs := a.Required.NodeSelectorTerms[0].MatchExpressions; len(exprs) == 1 && exprs[0].Key == hostnameLabel && len(exprs[0].Values) == 1 {
			affinity = exprs[0].Values[0]
		}
	}
	if affinity != pv.Annotations[annVolumeNode] || filepath.Dir(path) != dir {
		return fmt.Sprintf("affinity %q, annotation %q, directory %q", affinity, pv.Annotations[annVolumeNode], path)
	}
	return affinity
}
