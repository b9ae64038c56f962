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
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/uuid"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/provfleet/provfleet/pkg/fleet"
)

// inClusterNamespaceFile is where Kubernetes tells a pod its namespace.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// options are the command line of the manager.
type options struct {
	kubeconfig             string
	namespace              string
	identity               string
	metricsBindAddress     string
	healthProbeBindAddress string
	hostPathRoot           string
	kubeAPIQPS             float32
	kubeAPIBurst           int
	leaderElect            bool
	replicaLease           fleet.LeaseTimings
	legacyLockNamespace    string
	backendProbeInterval   time.Duration
	nodeName               string
	roles                  []string
	nodeLeaseNamespace     string
	nodeLeaseDuration      time.Duration
	memoryLimit            byteQuantity
	logging                *logsapi.LoggingConfiguration
}

// environment is what the defaults are derived from.
type environment struct {
	getenv   func(string) string
	readFile func(string) ([]byte, error)
	hostname func() (string, error)
	// stdout takes what a command prints for its user, such as a plan.
	stdout io.Writer
}

var osEnvironment = environment{getenv: os.Getenv, readFile: os.ReadFile, hostname: os.Hostname, stdout: os.Stdout}

// parseOptions parses args and fills the defaults that depend on env.
func parseOptions(args []string, env environment) (*options, error) {
	o := &options{logging: logsapi.NewLoggingConfiguration()}
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Empty: $KUBECONFIG, else the in-cluster configuration.")
	fs.StringVar(&o.namespace, "namespace", "", "Namespace of the provisioners' Leases. Empty: $POD_NAMESPACE, else the pod's own namespace.")
	fs.StringVar(&o.identity, "identity", "", "Name of this replica in Leases and status.leader. Empty: the host name plus a unique suffix.")
	fs.StringVar(&o.metricsBindAddress, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 turns it off.")
	fs.StringVar(&o.healthProbeBindAddress, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints; 0 turns them off.")
	fs.StringVar(&o.hostPathRoot, "host-path-root", "/var/lib/provfleet", "Directory every hostPath backend must lie under.")
	fs.Float32Var(&o.kubeAPIQPS, "kube-api-qps", 50, "API requests a second for the whole fleet, shared fairly between provisioners.")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 100, "API request burst for the whole fleet.")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Elect a leader per provisioner through its own Lease, so several replicas can run.")
	fs.DurationVar(&o.replicaLease.LeaseDuration, "replica-lease-duration", 15*time.Second, "How long a manager replica's membership Lease lasts unrenewed. The replicas spread the provisioners between those whose membership Lease is live: a killed replica's share moves to the others this long after its last renewal, once each provisioner's own Lease expired too.")
	fs.DurationVar(&o.replicaLease.RenewDeadline, "replica-renew-deadline", 10*time.Second, "How long a replica keeps trying to renew its membership Lease before it counts it lost and takes it again.")
	fs.DurationVar(&o.replicaLease.RetryPeriod, "replica-retry-period", 2*time.Second, "How long a replica waits between attempts to take or renew its membership Lease.")
	fs.StringVar(&o.legacyLockNamespace, "legacy-lock-namespace", "", "Namespace where an older provisioner (sig-storage-lib-external-provisioner v8 or older) locks an Endpoints object named like the Lease; no provisioner leads while its lock there is held by another. Empty: not checked.")
	fs.DurationVar(&o.backendProbeInterval, "backend-probe-interval", 30*time.Second, "How often the leader of each provisioner probes its backend's storage, and the deadline of a probe. A failing probe makes the provisioner Ready=False, BackendUnavailable, until one succeeds.")
	fs.StringSliceVar(&o.roles, "role", []string{roleManager}, "The parts this process plays, comma-separated: "+roleManager+" (the Deployment: NFS and custom backends, every ProvisionerConfig's status, placing Immediate hostPath claims, removed nodes) and "+roleNode+" (a node agent of the DaemonSet: the hostPath backends that select the node $NODE_NAME). One process may take both.")
	fs.StringVar(&o.nodeLeaseNamespace, "node-lease-namespace", "", "Namespace of the node agents' Leases, one per node. Empty: --namespace.")
	fs.DurationVar(&o.nodeLeaseDuration, "node-lease-duration", 40*time.Second, "How long a node agent's Lease lasts unrenewed: a killed agent's node is served again that long after, by the agent that replaces it.")
	fs.Var(&o.memoryLimit, "memory-limit", "The container's memory limit, a quantity such as 128Mi or a count of bytes (the chart passes the container's limits.memory through the downward API). "+
		"The Go runtime's soft limit is set to it less 32 MiB, what the binary's mapped pages and the kernel take besides the Go heap, so the collector works harder before the kernel kills the process; "+
		"GOMEMLIMIT, where set, wins. Empty: no limit.")
	logsapi.AddFlags(o.logging, fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}

	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.kubeAPIQPS <= 0 || o.kubeAPIBurst < 1 || o.backendProbeInterval <= 0 || o.nodeLeaseDuration < 4*time.Second {
		return nil, errors.New("--kube-api-qps and --backend-probe-interval must be positive, --kube-api-burst at least 1 and --node-lease-duration at least 4s")
	}
	o.nodeName = env.getenv("NODE_NAME")
	if err := o.checkRoles(); err != nil {
		return nil, err
	}
	if err := o.defaultNamespace(env); err != nil {
		return nil, err
	}
	if o.identity == "" {
		host, err := env.hostname()
		if err != nil {
			return nil, fmt.Errorf("cannot name this replica: %w", err)
		}
		o.identity = host + "_" + string(uuid.NewUUID())
	}
	return o, nil
}

// defaultNamespace fills an empty --namespace from POD_NAMESPACE, else the
// pod's own namespace; Leases need one.
func (o *options) defaultNamespace(env environment) error {
	if o.namespace == "" {
		o.namespace = env.getenv("POD_NAMESPACE")
	}
	if o.namespace == "" {
		if data, err := env.readFile(inClusterNamespaceFile); err == nil {
			o.namespace = strings.TrimSpace(string(data))
		}
	}
	if o.namespace == "" && (o.leaderElect || o.hasRole(roleNode)) {
		return errors.New("cannot tell the namespace of the Leases: set --namespace or POD_NAMESPACE")
	}
	return nil
}

// The roles of --role.
const (
	roleManager = "manager"
	roleNode    = "node"
)

// checkRoles refuses an empty or unknown role, and a node agent that does
// not know its node.
func (o *options) checkRoles() error {
	if len(o.roles) == 0 {
		return fmt.Errorf("--role needs at least one of %s and %s", roleManager, roleNode)
	}
	for _, role := range o.roles {
		if role != roleManager && role != roleNode {
			return fmt.Errorf("unknown --role %q: want %s, %s or both", role, roleManager, roleNode)
		}
	}
	if o.hasRole(roleNode) && o.nodeName == "" {
		return errors.New("cannot run a node agent without its node: set NODE_NAME, from the Pod's spec.nodeName")
	}
	return nil
}

// hasRole reports whether --role names role.
func (o *options) hasRole(role string) bool {
	return slices.Contains(o.roles, role)
}
