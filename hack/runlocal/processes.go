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

package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
)

// nodeNames are the simulated nodes, each served by a node agent.
var nodeNames = []string{"local-node-1", "local-node-2", "local-node-3"}

// nodeLabels are the labels of the simulated nodes beyond their host name,
// for trying nodeSelector.
var nodeLabels = map[string]map[string]string{"local-node-3": {"disk": "fast"}}

// stopGrace is how long a process may drain after SIGTERM.
const stopGrace = 15 * time.Second

// disk is the folder standing in for node's disk: its agent's --host-path-root.
func (d *demo) disk(node string) string {
	return filepath.Join(d.nodesDir, node)
}

// disks are the disks of every simulated node, by node.
func (d *demo) disks() map[string]string {
	disks := map[string]string{}
	for _, node := range nodeNames {
		disks[node] = d.disk(node)
	}
	return disks
}

// runProcesses starts the manager and the node agents, applies the
// examples once they are ready and runs until ctx ends or one of them exits;
// it stops the agents, then the manager, on return.
func (d *demo) runProcesses(ctx context.Context, opts options, env *testenv.Environment, exp export, ex examples) error {
	manager, err := d.start(ctx, "the manager", d.logPath, func(output io.Writer) (*managerproc.Process, error) {
		return d.startManager(opts, output)
	})
	if err != nil {
		return err
	}
	defer stop(manager, "the manager")
	procs := []*managerproc.Process{manager}
	for _, node := range nodeNames {
		agent, err := d.start(ctx, "the node agent of "+node, d.agentLog(node), func(output io.Writer) (*managerproc.Process, error) {
			return d.startAgent(opts, node, output)
		})
		if err != nil {
			return err
		}
		defer stop(agent, "the node agent of "+node)
		procs = append(procs, agent)
	}
	if err := applyExamples(ctx, env, ex); err != nil {
		return err
	}
	d.printHowTo(filepath.Join(env.BinDir(), "kubectl"), manager.MetricsURL, exp)
	select {
	case <-ctx.Done():
		return nil
	case proc := <-firstExit(procs):
		return fmt.Errorf("%s exited; see %s", proc.Name(), proc.LogPath())
	}
}

// applyExamples applies the examples, waits until every hostPath
// ProvisionerConfig serves every simulated node, then applies its claims.
func applyExamples(ctx context.Context, env *testenv.Environment, ex examples) error {
	if err := env.Apply(ctx, ex.manifests...); err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(env.Config())
	if err != nil {
		return fmt.Errorf("cannot build the admin client: %w", err)
	}
	configs := client.Resource(v1alpha1.SchemeGroupVersion.WithResource("provisionerconfigs"))
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := configs.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // the next poll retries
		}
		for _, pc := range list.Items {
			_, hostPath, _ := unstructured.NestedMap(pc.Object, "spec", "backend", "hostPath")
			served, _, _ := unstructured.NestedInt64(pc.Object, "status", "nodes", "served")
			if hostPath && served < int64(len(nodeNames)) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the hostPath provisioners never served every node: %w", err)
	}
	return env.Apply(ctx, ex.hostPathClaims)
}

// start runs a manager process with its output in a new log at logPath and
// waits until it is ready; the log is closed when the process ends.
func (d *demo) start(ctx context.Context, name, logPath string, start func(io.Writer) (*managerproc.Process, error)) (*managerproc.Process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("cannot create the log of %s: %w", name, err)
	}
	proc, err := start(logFile)
	if err != nil {
		logFile.Close()
		return nil, err
	}
	go func() {
		<-proc.Done()
		logFile.Close()
	}()
	if err := proc.WaitReady(ctx, time.Minute); err != nil {
		stop(proc, name)
		return nil, fmt.Errorf("cannot start %s: %w (log: %s)", name, err, logPath)
	}
	return proc, nil
}

// stop ends proc with SIGTERM: it drains its provisioners and releases its
// Leases first.
func stop(proc *managerproc.Process, name string) {
	fmt.Printf("Stopping %s (it drains and releases its Leases)...\n", name)
	if err := proc.Terminate(stopGrace); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// firstExit returns a channel that gets the first of procs to end.
func firstExit(procs []*managerproc.Process) <-chan *managerproc.Process {
	exited := make(chan *managerproc.Process, len(procs))
	for _, proc := range procs {
		go func() {
			<-proc.Done()
			exited <- proc
		}()
	}
	return exited
}

// startManager runs the manager in its own role, as the Deployment of
// examples/deploy does, as its ServiceAccount.
func (d *demo) startManager(opts options, output io.Writer) (*managerproc.Process, error) {
	return managerproc.Start(managerproc.Options{
		Binary:      opts.manager,
		Kubeconfig:  d.managerKubeconfig,
		Namespace:   testenv.ManagerNamespace,
		Identity:    "local-manager",
		MetricsAddr: opts.metrics,
		HealthAddr:  opts.health,
		Args:        []string{"--role=manager", "--node-lease-namespace=" + testenv.NodeAgentNamespace},
		Output:      output,
	})
}

// startAgent runs the node agent of node, as the DaemonSet of
// examples/deploy does, as its ServiceAccount bound to a Pod on node, with
// node's disk as its host path root and free metrics and health addresses.
func (d *demo) startAgent(opts options, node string, output io.Writer) (*managerproc.Process, error) {
	return managerproc.Start(managerproc.Options{
		Binary:       opts.manager,
		Kubeconfig:   d.agentKubeconfig(node),
		Namespace:    testenv.NodeAgentNamespace,
		Identity:     node,
		HostPathRoot: d.disk(node),
		NodeName:     node,
		Args:         []string{"--role=node"},
		Output:       output,
	})
}

// agentLog is where the node agent of node logs.
func (d *demo) agentLog(node string) string {
	return filepath.Join(d.data, node+".log")
}

// createNodes creates the simulated nodes' Node objects, labelled with their
// host names as kubelets label theirs.
func createNodes(ctx context.Context, env *testenv.Environment) error {
	client, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		return fmt.Errorf("cannot build the admin client: %w", err)
	}
	for _, name := range nodeNames {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
		maps.Copy(node.Labels, nodeLabels[name])
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cannot create Node %s: %w", name, err)
		}
	}
	return nil
}

func (d *demo) printHowTo(kubectl, metricsURL string, exp export) {
	fmt.Printf(`
provfleet is running: a manager and node agents for %d simulated nodes. Look at it with:

  export KUBECONFIG=%s
  %s get pcfg,pvc          # the Nodes column: nodes served/selected
  %s get pv -o custom-columns='NAME:.metadata.name,CLAIM:.spec.claimRef.name,NODE:.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]'
  %s describe pcfg fast-local shared-nfs
  %s get pcfg shared-nfs -o jsonpath='{.status.storage}'
  %s -n %s get leases      # one per node, held by its agent
  curl -s %s/metrics | grep provision
  ls %s/*/fast-local

Each node's hostPath volumes appear under its own folder, %s/<node>.
NFS volumes appear under %s, which the NFS server on %s:%d
serves as %s; the manager makes them through NFSv3, with no mount.
Logs: the manager's %s, each node agent's %s.

Press Ctrl-C to stop everything.
`, len(nodeNames), d.adminKubeconfig, kubectl, kubectl, kubectl, kubectl, kubectl, testenv.NodeAgentNamespace,
		metricsURL, d.nodesDir, d.nodesDir, d.nfsExport, exp.host, exp.port, exp.path, d.logPath, d.agentLog("<node>"))
}
