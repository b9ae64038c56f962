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
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/internal/apirequests"
	"github.com/provfleet/provfleet/pkg/fleet"
)

// shutdownTimeout bounds how long the HTTP servers get to finish on exit.
const shutdownTimeout = 2 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, os.Args[1:], osEnvironment)
	stop()
	logs.FlushLogs()
	if err != nil && !errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, env environment) error {
	if len(args) > 0 && args[0] == migrateCommand {
		return runMigrate(ctx, args[1:], env)
	}
	o, err := parseOptions(args, env)
	if err != nil {
		return err
	}
	if err := logsapi.ValidateAndApply(o.logging, nil); err != nil {
		return fmt.Errorf("cannot set up logging: %w", err)
	}
	logger := klog.Background().WithName("manager")
	ctx = klog.NewContext(ctx, logger)
	setGoMemoryLimit(ctx, int64(o.memoryLimit), env)

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	manager, err := newManager(o, registry)
	if err != nil {
		return err
	}
	servers, err := listen([]endpoint{
		{o.metricsBindAddress, metricsHandler(registry)},
		{o.healthProbeBindAddress, healthHandler(manager)},
	})
	if err != nil {
		return err
	}
	logger.Info("Starting", "identity", o.identity, "namespace", o.namespace, "leaderElect", o.leaderElect, "legacyLockNamespace", o.legacyLockNamespace,
		"metrics", o.metricsBindAddress, "health", o.healthProbeBindAddress)
	err = serve(ctx, manager, servers)
	logger.Info("Stopped")
	return err
}

// newManager loads the client configuration, counts its requests in registry
// and builds the fleet manager from the options.
func newManager(o *options, registry prometheus.Registerer) (*fleet.Manager, error) {
	config, err := clientConfig(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	requests, err := apirequests.NewCounter(registry)
	if err != nil {
		return nil, err
	}
	config.Wrap(requests.Wrap)
	return fleet.New(config, fleet.Settings{
		Roles:                fleet.Roles{Manager: o.hasRole(roleManager), Node: o.hasRole(roleNode)},
		NodeLeaseNamespace:   o.nodeLeaseNamespace,
		NodeLeaseDuration:    o.nodeLeaseDuration,
		Namespace:            o.namespace,
		Identity:             o.identity,
		LeaderElection:       o.leaderElect,
		Membership:           o.replicaLease,
		LegacyLockNamespace:  o.legacyLockNamespace,
		HostPathRoot:         o.hostPathRoot,
		NodeName:             o.nodeName,
		QPS:                  o.kubeAPIQPS,
		Burst:                o.kubeAPIBurst,
		BackendProbeInterval: o.backendProbeInterval,
		Registerer:           registry,
	})
}

// clientConfig loads the client configuration from kubeconfig, else
// $KUBECONFIG, else the pod's.
func clientConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cannot load the client configuration: %w", err)
	}
	config.WarningHandlerWithContext = newOnceWarnings()
	return config, nil
}

// serve runs the fleet and the HTTP servers until ctx ends or one of them
// fails. Every server stops once the fleet stopped, so a readiness probe sees
// the manager until its Leases are released.
func serve(ctx context.Context, manager *fleet.Manager, servers []boundServer) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range servers {
		g.Go(func() error {
			if err := s.server.Serve(s.listener); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("cannot serve %s: %w", s.listener.Addr(), err)
			}
			return nil
		})
	}
	g.Go(func() error {
		defer func() {
			shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(gctx), shutdownTimeout)
			defer cancel()
			for _, s := range servers {
				_ = s.server.Shutdown(shutdownCtx)
			}
		}()
		return manager.Run(gctx)
	})
	return g.Wait()
}

type endpoint struct {
	addr    string
	handler http.Handler
}

type boundServer struct {
	server   *http.Server
	listener net.Listener
}

// listen binds every address but "0" and "", so a busy port fails at start.
func listen(endpoints []endpoint) ([]boundServer, error) {
	var servers []boundServer
	for _, e := range endpoints {
		addr, handler := e.addr, e.handler
		if addr == "0" || addr == "" {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			for _, s := range servers {
				_ = s.listener.Close()
			}
			return nil, fmt.Errorf("cannot listen on %s: %w", addr, err)
		}
		servers = append(servers, boundServer{
			server:   &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second},
			listener: l,
		})
	}
	return servers, nil
}

func metricsHandler(registry *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
	return mux
}

// checker is what the health endpoints ask the fleet.
type checker interface {
	Ready() error
	LeaseHealthy() error
	// Stuck reports hung backend calls; not /healthz: a liveness restart
	// would stop every healthy provisioner too.
	Stuck() error
}

func healthHandler(c checker) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := errors.Join(c.Ready(), c.LeaseHealthy(), c.Stuck()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}
