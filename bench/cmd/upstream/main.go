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
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/provfleet/provfleet/bench/internal/kubeclient"
	"github.com/provfleet/provfleet/internal/apirequests"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/hostpath"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

type options struct {
	kubeconfig      string
	provisionerName string
	namespace       string
	hostPathRoot    string
	path            string
	metricsAddress  string
	qps             float64
	burst           int
	workers         int
	leaseDuration   time.Duration
	renewDeadline   time.Duration
	retryPeriod     time.Duration
	nodeName        string
}

func main() {
	var o options
	fs := flag.NewFlagSet("upstream", flag.ExitOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig.")
	fs.StringVar(&o.provisionerName, "provisioner-name", "", "Provisioner name the StorageClasses use.")
	fs.StringVar(&o.namespace, "namespace", "", "Namespace of the Lease.")
	fs.StringVar(&o.hostPathRoot, "host-path-root", "", "Directory the backend must lie under.")
	fs.StringVar(&o.path, "path", "", "Directory holding the volumes, under --host-path-root.")
	fs.StringVar(&o.metricsAddress, "metrics-bind-address", "", "host:port of a /metrics endpoint with the Go runtime metrics; empty: none.")
	fs.Float64Var(&o.qps, "kube-api-qps", 50, "API requests a second of this process.")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "API request burst of this process.")
	fs.IntVar(&o.workers, "workers", 4, "Claim and volume workers each.")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 15*time.Second, "Lease duration.")
	fs.DurationVar(&o.renewDeadline, "renew-deadline", 10*time.Second, "Lease renew deadline.")
	fs.DurationVar(&o.retryPeriod, "retry-period", 2*time.Second, "Lease retry period.")
	fs.StringVar(&o.nodeName, "node-name", "", "Node whose disk --path is: only the claims whose selected-node annotation names it are provisioned, as local volumes pinned to it, without leader election (one process per node). Empty: every claim, hostPath volumes, a Lease.")
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.provisionerName == "" || o.namespace == "" || o.path == "" || o.hostPathRoot == "" {
		return errors.New("--provisioner-name, --namespace, --host-path-root and --path are required")
	}
	config, err := kubeclient.Config(o.kubeconfig, o.qps, o.burst, "upstream-provisioner")
	if err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector())
	// The manager's request counter, so that both systems' own requests
	// are counted alike.
	requests, err := apirequests.NewCounter(registry)
	if err != nil {
		return err
	}
	config.Wrap(requests.Wrap)
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("cannot build the client: %w", err)
	}
	dirs, err := hostpath.New(backendConfig(o), hostpath.Options{ProvisionerNames: []string{o.provisionerName}})
	if err != nil {
		return fmt.Errorf("cannot start the directory backend: %w", err)
	}
	if o.metricsAddress != "" {
		if err := serveMetrics(ctx, o.metricsAddress, registry); err != nil {
			return err
		}
	}
	ctrl := controller.NewProvisionController(ctx, client, o.provisionerName, provisionerOf(o, dirs), controllerOptions(o)...)
	// Run returns only without leader election; with it the library exits
	// the process when the context ends.
	ctrl.Run(ctx)
	return nil
}

// backendConfig is the directory backend of o: hostPath volumes, or local
// volumes pinned to --node-name.
func backendConfig(o options) hostpath.Config {
	cfg := hostpath.Config{
		Path:         o.path,
		VolumeType:   hostpath.VolumeTypeHostPath,
		OnDelete:     backend.OnDeleteDelete,
		HostPathRoot: o.hostPathRoot,
	}
	if o.nodeName != "" {
		cfg.VolumeType, cfg.NodeName = hostpath.VolumeTypeLocal, o.nodeName
	} else {
		// The backend pins every volume to a node; this process stands for
		// one that serves the whole cluster from one machine.
		cfg.NodeName = "upstream"
	}
	return cfg
}

// provisionerOf is the library's Provisioner for the backend: with
// --node-name one that qualifies only its node's claims.
func provisionerOf(o options, dirs provisioning.Provisioner) controller.Provisioner {
	if o.nodeName != "" {
		return nodeAdapter{adapter: adapter{dirs}, node: o.nodeName}
	}
	return adapter{dirs}
}

// controllerOptions are the library's options for o. One process per node
// serves its own node's claims, all at once: no Lease, as node-local
// provisioners built on the library run.
func controllerOptions(o options) []func(*controller.ProvisionController) error {
	opts := []func(*controller.ProvisionController) error{
		controller.Threadiness(o.workers),
		// The same default as a ProvisionerConfig's spec.finalizer.
		controller.AddFinalizer(true),
	}
	if o.nodeName != "" {
		return append(opts, controller.LeaderElection(false))
	}
	return append(opts,
		controller.LeaderElectionNamespace(o.namespace),
		controller.LeaseDuration(o.leaseDuration),
		controller.RenewDeadline(o.renewDeadline),
		controller.RetryPeriod(o.retryPeriod),
	)
}

// serveMetrics exposes registry: the Go runtime metrics (goroutines, memory)
// and the API request counter.
func serveMetrics(ctx context.Context, addr string, registry *prometheus.Registry) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = server.Serve(l) }()
	go func() {
		<-ctx.Done()
		_ = server.Close()
	}()
	return nil
}
