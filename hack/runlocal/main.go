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
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
)

// Paths of the examples that name directories on a real node; the demo moves
// them under its data folder.
const (
	exampleHostPathRoot = "/var/lib/provfleet"
	exampleNFSMount     = "/mnt/provfleet/shared"
)

// options are the command's flags.
type options struct {
	manager, data, metrics, health string
}

func main() {
	var opts options
	flag.StringVar(&opts.manager, "manager", "_output/bin/manager", "the manager binary")
	flag.StringVar(&opts.data, "data-dir", "_output/run", "folder for the volumes, kubeconfigs and the manager's log")
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
	root, data, hostPathRoot, nfsMount string
	managerKubeconfig, adminKubeconfig string
	logPath                            string
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
	examples, err := d.relocateExamples()
	if err != nil {
		return err
	}
	logFile, err := os.Create(d.logPath)
	if err != nil {
		return fmt.Errorf("cannot create the manager's log: %w", err)
	}
	defer logFile.Close()
	proc, err := d.startManager(opts, logFile)
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
		return fmt.Errorf("%w (log: %s)", err, d.logPath)
	}
	if err := env.Apply(ctx, examples...); err != nil {
		return err
	}
	d.printHowTo(filepath.Join(env.BinDir(), "kubectl"), proc.MetricsURL)
	select {
	case <-ctx.Done():
	case <-proc.Done():
		return fmt.Errorf("the manager exited; see %s", d.logPath)
	}
	return nil
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
		hostPathRoot:      filepath.Join(data, "hostpath"),
		nfsMount:          filepath.Join(data, "nfs"),
		managerKubeconfig: filepath.Join(data, "manager.kubeconfig"),
		adminKubeconfig:   filepath.Join(data, "admin.kubeconfig"),
		logPath:           filepath.Join(data, "manager.log"),
	}
	for _, dir := range []string{d.hostPathRoot, d.nfsMount} {
		// Every run starts a fresh etcd: volumes of earlier runs are orphans.
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("cannot clear %s: %w", dir, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cannot create %s: %w", dir, err)
		}
	}
	return d, nil
}

// startManager runs the manager as the ServiceAccount of examples/deploy.
func (d *demo) startManager(opts options, output io.Writer) (*managerproc.Process, error) {
	return managerproc.Start(managerproc.Options{
		Binary:       opts.manager,
		Kubeconfig:   d.managerKubeconfig,
		Namespace:    testenv.ManagerNamespace,
		Identity:     "local",
		HostPathRoot: d.hostPathRoot,
		NodeName:     "local-node",
		MetricsAddr:  opts.metrics,
		HealthAddr:   opts.health,
		Output:       output,
	})
}

// writeKubeconfigs writes the kubeconfig of the manager's ServiceAccount, for
// the manager, and the admin's, for the user.
func (d *demo) writeKubeconfigs(ctx context.Context, env *testenv.Environment) error {
	saConfig, err := env.ManagerServiceAccountConfig(ctx, d.root)
	if err != nil {
		return err
	}
	if err := testenv.WriteKubeconfig(d.managerKubeconfig, saConfig); err != nil {
		return err
	}
	return testenv.WriteKubeconfig(d.adminKubeconfig, env.Config())
}

// relocateExamples copies the examples into the data folder with their node
// directories moved under it, and returns the copies.
func (d *demo) relocateExamples() ([]string, error) {
	var examples []string
	for _, name := range []string{"hostpath.yaml", "nfs.yaml"} {
		path, err := relocate(filepath.Join(d.root, "examples", name), filepath.Join(d.data, name), map[string]string{
			exampleHostPathRoot: d.hostPathRoot,
			exampleNFSMount:     d.nfsMount,
		})
		if err != nil {
			return nil, err
		}
		examples = append(examples, path)
	}
	return examples, nil
}

func (d *demo) printHowTo(kubectl, metricsURL string) {
	fmt.Printf(`
provfleet is running. Look at it with:

  export KUBECONFIG=%s
  %s get pcfg,pvc,pv
  %s describe pcfg fast-local
  curl -s %s/metrics | grep provision

Volumes appear under %s.
The manager's log: %s

Press Ctrl-C to stop everything.
`, d.adminKubeconfig, kubectl, kubectl, metricsURL, d.data, d.logPath)
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
