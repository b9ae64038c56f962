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
// and kube-controller-manager on this machine, installs the CRD, the RBAC of
// examples/deploy and the examples (their directories moved under a data
// folder), runs the manager as its ServiceAccount and waits for Ctrl-C, which
// stops the manager, then the control plane.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
)

const namespace = "provfleet-system"

// Paths of the examples that name directories on a real node; the demo moves
// them under its data folder.
const (
	exampleHostPathRoot = "/var/lib/provfleet"
	exampleNFSMount     = "/mnt/provfleet/shared"
)

func main() {
	manager := flag.String("manager", "_output/bin/manager", "the manager binary")
	data := flag.String("data-dir", "_output/run", "folder for the volumes, kubeconfigs and the manager's log")
	metrics := flag.String("metrics-bind-address", "127.0.0.1:8080", "the manager's metrics address")
	health := flag.String("health-probe-bind-address", "127.0.0.1:8081", "the manager's health address")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *manager, *data, *metrics, *health); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, managerBin, data, metrics, health string) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	if data, err = filepath.Abs(data); err != nil {
		return fmt.Errorf("cannot resolve the data folder: %w", err)
	}
	hostPathRoot := filepath.Join(data, "hostpath")
	nfsMount := filepath.Join(data, "nfs")
	for _, dir := range []string{hostPathRoot, nfsMount} {
		// Every run starts a fresh etcd: volumes of earlier runs are orphans.
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("cannot clear %s: %w", dir, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cannot create %s: %w", dir, err)
		}
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
	deploy := filepath.Join(root, "examples", "deploy")
	saConfig, err := env.ServiceAccountConfig(ctx, namespace, "provfleet",
		filepath.Join(deploy, "namespace.yaml"), filepath.Join(deploy, "rbac.yaml"))
	if err != nil {
		return err
	}
	managerKubeconfig := filepath.Join(data, "manager.kubeconfig")
	if err := managerproc.WriteKubeconfig(managerKubeconfig, saConfig); err != nil {
		return err
	}
	adminKubeconfig := filepath.Join(data, "admin.kubeconfig")
	if err := managerproc.WriteKubeconfig(adminKubeconfig, env.Config()); err != nil {
		return err
	}

	var examples []string
	for _, name := range []string{"hostpath.yaml", "nfs.yaml"} {
		path, err := relocate(filepath.Join(root, "examples", name), filepath.Join(data, name), map[string]string{
			exampleHostPathRoot: hostPathRoot,
			exampleNFSMount:     nfsMount,
		})
		if err != nil {
			return err
		}
		examples = append(examples, path)
	}

	logPath := filepath.Join(data, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("cannot create the manager's log: %w", err)
	}
	defer logFile.Close()
	proc, err := managerproc.Start(managerproc.Options{
		Binary:       managerBin,
		Kubeconfig:   managerKubeconfig,
		Namespace:    namespace,
		Identity:     "local",
		HostPathRoot: hostPathRoot,
		NodeName:     "local-node",
		MetricsAddr:  metrics,
		HealthAddr:   health,
		Output:       logFile,
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("Stopping the manager (every provisioner drains and releases its Lease)...")
		if err := proc.Terminate(15 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	if err := proc.WaitReady(ctx, time.Minute); err != nil {
		return fmt.Errorf("%w (log: %s)", err, logPath)
	}
	if err := env.Apply(ctx, examples...); err != nil {
		return err
	}

	kubectl := filepath.Join(env.BinDir(), "kubectl")
	fmt.Printf(`
provfleet is running. Look at it with:

  export KUBECONFIG=%s
  %s get pcfg,pvc,pv
  %s describe pcfg fast-local
  curl -s %s/metrics | grep provision

Volumes appear under %s.
The manager's log: %s

Press Ctrl-C to stop everything.
`, adminKubeconfig, kubectl, kubectl, proc.MetricsURL, data, logPath)

	select {
	case <-ctx.Done():
	case <-proc.Done():
		return fmt.Errorf("the manager exited; see %s", logPath)
	}
	return nil
}

// relocate copies a manifest to dst with the directories in moves replaced.
func relocate(src, dst string, moves map[string]string) (string, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", src, err)
	}
	text := string(data)
	for from, to := range moves {
		text = strings.ReplaceAll(text, from, to)
	}
	if err := os.WriteFile(dst, []byte(text), 0o644); err != nil {
		return "", fmt.Errorf("cannot write %s: %w", dst, err)
	}
	return dst, nil
}
