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
// CRD, the RBAC of examples/deploy and the examples (their directories moved
// under the data folder, the NFS example pointed at that server), runs the
// manager as its ServiceAccount and waits for Ctrl-C, which stops the manager,
// then the NFS server, then the control plane.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
)

// exampleHostPathRoot is the path of the hostPath example that names a
// directory on a real node; the demo moves it under its data folder.
const exampleHostPathRoot = "/var/lib/provfleet"

// nfsExportPath is the export path the demo's NFS server answers MOUNT for.
const nfsExportPath = "/exports"

// options are the command's flags.
type options struct {
	manager, data, metrics, health string
}

func main() {
	var opts options
	flag.StringVar(&opts.manager, "manager", "_output/bin/manager", "the manager binary")
	flag.StringVar(&opts.data, "data-dir", "_output/run", "folder for the volumes, the NFS export, kubeconfigs and the manager's log")
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
	root, data, hostPathRoot, nfsExport string
	managerKubeconfig, adminKubeconfig  string
	logPath                             string
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
	examples, err := d.relocateExamples(exp)
	if err != nil {
		return err
	}
	return d.runManager(ctx, opts, env, exp, examples)
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

// runManager starts the manager, applies the examples once it is ready and
// runs until ctx ends or the manager exits; it stops the manager on return.
func (d *demo) runManager(ctx context.Context, opts options, env *testenv.Environment, exp export, examples []string) error {
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
	d.printHowTo(filepath.Join(env.BinDir(), "kubectl"), proc.MetricsURL, exp)
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
		nfsExport:         filepath.Join(data, "nfs"),
		managerKubeconfig: filepath.Join(data, "manager.kubeconfig"),
		adminKubeconfig:   filepath.Join(data, "admin.kubeconfig"),
		logPath:           filepath.Join(data, "manager.log"),
	}
	for _, dir := range []string{d.hostPathRoot, d.nfsExport} {
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

// relocateExamples copies the examples into the data folder, the hostPath
// example's directory moved under it and the NFS example pointed at exp, and
// returns the copies.
func (d *demo) relocateExamples(exp export) ([]string, error) {
	hostPath, err := relocate(filepath.Join(d.root, "examples", "hostpath.yaml"), filepath.Join(d.data, "hostpath.yaml"), map[string]string{
		exampleHostPathRoot: d.hostPathRoot,
	})
	if err != nil {
		return nil, err
	}
	nfs, err := pointAt(filepath.Join(d.root, "examples", "nfs.yaml"), filepath.Join(d.data, "nfs.yaml"), exp)
	if err != nil {
		return nil, err
	}
	return []string{hostPath, nfs}, nil
}

func (d *demo) printHowTo(kubectl, metricsURL string, exp export) {
	fmt.Printf(`
provfleet is running. Look at it with:

  export KUBECONFIG=%s
  %s get pcfg,pvc,pv
  %s describe pcfg fast-local shared-nfs
  %s get pcfg shared-nfs -o jsonpath='{.status.storage}'
  curl -s %s/metrics | grep provision

hostPath volumes appear under %s.
NFS volumes appear under %s, which the NFS server on %s:%d
serves as %s; the manager makes them through NFSv3, with no mount.
The manager's log: %s

Press Ctrl-C to stop everything.
`, d.adminKubeconfig, kubectl, kubectl, kubectl, metricsURL, d.hostPathRoot, d.nfsExport, exp.host, exp.port, exp.path, d.logPath)
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

// pointAt copies a manifest to dst with the server, port and path of every
// NFS backend in it set to exp's; the other objects are copied as they are.
func pointAt(src, dst string, exp export) (string, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", src, err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("cannot read %s: %w", src, err)
		}
		if doc, err = pointDocument(doc, exp); err != nil {
			return "", fmt.Errorf("cannot point %s at the NFS server: %w", src, err)
		}
		docs = append(docs, doc)
	}
	if err := os.WriteFile(dst, bytes.Join(docs, []byte("---\n")), 0o644); err != nil {
		return "", fmt.Errorf("cannot write %s: %w", dst, err)
	}
	return dst, nil
}

// pointDocument sets the server, port and path of doc's NFS backend to
// exp's; a document without one is returned as it is.
func pointDocument(doc []byte, exp export) ([]byte, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return nil, fmt.Errorf("cannot parse a document: %w", err)
	}
	nfs := []string{"spec", "backend", "nfs"}
	_, found, err := unstructured.NestedMap(obj, nfs...)
	if err != nil {
		return nil, fmt.Errorf("cannot read spec.backend.nfs: %w", err)
	}
	if !found {
		return doc, nil
	}
	for field, value := range map[string]any{"server": exp.host, "port": int64(exp.port), "path": exp.path} {
		if err := unstructured.SetNestedField(obj, value, append(nfs, field)...); err != nil {
			return nil, fmt.Errorf("cannot set %s: %w", field, err)
		}
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot write a document: %w", err)
	}
	return out, nil
}
