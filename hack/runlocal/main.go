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

// Command runlocal is the driver of `make run`: it starts etcd, kube-apiserver
// and kube-controller-manager on this machine and an NFSv3 server on loopback
// (in this process, serving a folder under the data folder), installs the
// CRD, the RBAC and the node restriction policies of examples/deploy and the
// examples (the hostPath example spread over the simulated nodes' folders,
// the NFS example pointed at that server), creates three Nodes, runs the
// manager in its own role as its ServiceAccount and one node agent per Node
// as theirs, with a token bound to a Pod on the node (a Pod no kubelet runs)
// so that the policies hold each agent to its node, each with its own folder
// standing in for its node's disk, and waits for Ctrl-C, which stops
// the agents and the manager, then the NFS server, then the control plane.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
)

// nfsExportPath is the export path the demo's NFS server answers MOUNT for.
const nfsExportPath = "/exports"

// options are the command's flags.
type options struct {
	manager, data, metrics, health string
}

func main() {
	var opts options
	flag.StringVar(&opts.manager, "manager", "_output/bin/manager", "the manager binary")
	flag.StringVar(&opts.data, "data-dir", "_output/run", "folder for the nodes' disks, the NFS export, kubeconfigs and logs")
	flag.StringVar(&opts.metrics, "metrics-bind-address", "127.0.0.1:8080", "the manager's metrics address")
	flag.StringVar(&opts.health, "health-probe-bind-address", "127.0.0.1:8081", "the manager's health address")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// demo is where one run keeps its files.
type demo struct {
	root, data, nodesDir, nfsExport    string
	managerKubeconfig, adminKubeconfig string
	logPath                            string
}

// export is where the demo's NFS server answers.
type export struct {
	host string
	port int
	path string
}

func run(ctx context.Context, opts options) error {
	d, err := prepare(opts.data)
	if err != nil {
		return err
	}
	fmt.Println("Starting etcd, kube-apiserver and kube-controller-manager...")
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("Stopping the control plane...")
		env.Stop()
	}()
	if err := d.writeKubeconfigs(ctx, env); err != nil {
		return err
	}
	// Not bound to ctx: the server outlives Ctrl-C until the manager has
	// drained, since draining provisioners may still be talking to it.
	server, err := nfsserver.Start(context.WithoutCancel(ctx), nfsserver.Options{Dir: d.nfsExport, Path: nfsExportPath})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("Stopping the NFS server...")
		if err := server.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	exp, err := exportOf(server)
	if err != nil {
		return err
	}
	ex, err := d.relocateExamples(exp)
	if err != nil {
		return err
	}
	return d.runProcesses(ctx, opts, env, exp, ex)
}

// exportOf is where server answers, as a ProvisionerConfig names it.
func exportOf(server *nfsserver.Server) (export, error) {
	host, port, err := net.SplitHostPort(server.Addr())
	if err != nil {
		return export{}, fmt.Errorf("cannot read the NFS server's address: %w", err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return export{}, fmt.Errorf("cannot read the NFS server's port: %w", err)
	}
	return export{host: host, port: n, path: nfsExportPath}, nil
}

// prepare finds the repository and empties the volume folders under data.
func prepare(data string) (*demo, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	if data, err = filepath.Abs(data); err != nil {
		return nil, fmt.Errorf("cannot resolve the data folder: %w", err)
	}
	d := &demo{
		root:              root,
		data:              data,
		nodesDir:          filepath.Join(data, "nodes"),
		nfsExport:         filepath.Join(data, "nfs"),
		managerKubeconfig: filepath.Join(data, "manager.kubeconfig"),
		adminKubeconfig:   filepath.Join(data, "admin.kubeconfig"),
		logPath:           filepath.Join(data, "manager.log"),
	}
	dirs := []string{d.nfsExport}
	for _, node := range nodeNames {
		dirs = append(dirs, d.disk(node))
	}
	for _, dir := range append(dirs, d.nodesDir) {
		// Every run starts a fresh etcd: volumes of earlier runs are orphans.
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("cannot clear %s: %w", dir, err)
		}
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cannot create %s: %w", dir, err)
		}
	}
	return d, nil
}

// writeKubeconfigs writes the kubeconfigs of the manager's ServiceAccount
// and, per simulated node, of the node agents' with a token bound to a Pod
// on that node, as the DaemonSet's agents get theirs, so that the node
// restriction policies hold each agent to its node; and the admin's, for the
// user. The Nodes are created first: the agents' Pods name them.
func (d *demo) writeKubeconfigs(ctx context.Context, env *testenv.Environment) error {
	managerConfig, err := env.ManagerServiceAccountConfig(ctx, d.root)
	if err != nil {
		return err
	}
	if err := testenv.WriteKubeconfig(d.managerKubeconfig, managerConfig); err != nil {
		return err
	}
	if err := createNodes(ctx, env); err != nil {
		return err
	}
	for _, node := range nodeNames {
		agentConfig, err := env.NodeAgentPodConfig(ctx, d.root, node)
		if err != nil {
			return err
		}
		if err := testenv.WriteKubeconfig(d.agentKubeconfig(node), agentConfig); err != nil {
			return err
		}
	}
	return testenv.WriteKubeconfig(d.adminKubeconfig, env.Config())
}

// agentKubeconfig is the kubeconfig of the node agent of node.
func (d *demo) agentKubeconfig(node string) string {
	return filepath.Join(d.data, "node-agent-"+node+".kubeconfig")
}

// examples are the copies of the examples the demo applies: the claims of
// the hostPath example apart, applied once its agents serve every node, so
// that its Immediate claims are placed among all of them.
type examples struct {
	manifests      []string
	hostPathClaims string
}

// relocateExamples copies the examples into the data folder, the hostPath
// example spread over the simulated nodes' disks and the NFS example pointed
// at exp.
func (d *demo) relocateExamples(exp export) (examples, error) {
	hostPath, err := spreadOver(filepath.Join(d.root, "examples", "hostpath.yaml"), filepath.Join(d.data, "hostpath.yaml"), d.disks())
	if err != nil {
		return examples{}, err
	}
	claims := filepath.Join(d.data, "hostpath-claims.yaml")
	if err := moveClaims(hostPath, claims); err != nil {
		return examples{}, err
	}
	nfs, err := pointAt(filepath.Join(d.root, "examples", "nfs.yaml"), filepath.Join(d.data, "nfs.yaml"), exp)
	if err != nil {
		return examples{}, err
	}
	return examples{manifests: []string{hostPath, nfs}, hostPathClaims: claims}, nil
}
