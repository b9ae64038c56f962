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

package hostpathnodes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/cachetrim"
	listers "github.com/provfleet/provfleet/pkg/generated/listers/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// defaultNodeLeaseDuration is how long a node agent's Lease lasts unrenewed
// by default, as the kubelet's node Lease does.
const defaultNodeLeaseDuration = 40 * time.Second

// Settings are the node side's part of the fleet's settings.
type Settings struct {
	// Manager is the manager's role: every node is watched, the hostPath
	// provisioners coordinated, their nodes reported and the node agents
	// held to their own nodes.
	Manager bool
	// Agent is the node role: this process is the agent of NodeName.
	Agent bool
	// NodeName is the node this process runs on.
	NodeName string
	// Identity names this replica in its node's Lease.
	Identity string
	// LeaseNamespace holds the node Leases, the removal lists and
	// NodeVolumesParams.
	LeaseNamespace string
	// LeaseDuration is how long a node agent's Lease lasts unrenewed; the
	// agent renews it every quarter of that and stops serving its node when
	// it could not for three quarters. Zero: 40s, as the kubelet's.
	LeaseDuration time.Duration
}

// Fleet is what the node side needs of the fleet that runs it. The fleet
// keeps one registry of instances for both roles: a node agent's instances
// run beside the manager's, each under the name of its ProvisionerConfig.
type Fleet interface {
	// Enqueue has the fleet reconcile the ProvisionerConfig name.
	Enqueue(name string)
	// RunOnNode starts, re-tunes or restarts this node's instance of pc,
	// which builds backend and serves scope, and reports how it runs.
	RunOnNode(ctx context.Context, pc *v1alpha1.ProvisionerConfig, backend *v1alpha1.BackendSpec, scope provisioning.Scope) Outcome
	// StopOnNode stops this node's instance of the ProvisionerConfig name,
	// if any, and waits until it drained.
	StopOnNode(ctx context.Context, name string)
	// OnNode names the ProvisionerConfigs this node runs an instance of.
	OnNode() []string
	// ProvisionerOnNode is the backend of this node's instance of name; nil
	// when none runs.
	ProvisionerOnNode(name string) provisioning.Provisioner
	// RequeueOnNode has this node's instance of name look at claim again.
	RequeueOnNode(name string, claim *corev1.PersistentVolumeClaim)
}

// Outcome is how a node instance runs after Fleet.RunOnNode.
type Outcome struct {
	// Reason and Message are what its Ready condition says.
	Reason, Message string
	// Running: the instance runs, whatever Reason says.
	Running bool
	// Retry asks for another reconcile later.
	Retry bool
	// Storage is the space its backend's last probe found, at ProbedAt; nil
	// when unknown.
	Storage  *provisioning.Space
	ProbedAt time.Time
}

// Deps are what the node side uses but does not own.
type Deps struct {
	// Client is the manager's: it reads the cluster's Nodes, node Leases
	// and removal lists, and writes the lists, NodeVolumesParams and the
	// Leases of removed nodes.
	Client kubernetes.Interface
	// AgentClient writes the node's Lease; required with Settings.Agent.
	AgentClient provisioning.Client
	// Configs informs about the ProvisionerConfigs.
	Configs cache.SharedIndexInformer
	Fleet   Fleet
	// Registerer receives the coordinators' metrics.
	Registerer prometheus.Registerer
}

// Nodes is the node side of one process: the informers of the Nodes, the
// node Leases and the removal lists (all of them for the manager, its own
// node's for an agent alone), the clock that judges the node Leases, the
// coordinators' metrics and, by role, the manager's watch of the nodes and
// the node agent.
type Nodes struct {
	settings Settings
	client   kubernetes.Interface
	fleet    Fleet
	configs  cache.SharedIndexInformer
	lister   listers.ProvisionerConfigLister

	nodeFactory, leaseFactory, listFactory informers.SharedInformerFactory
	nodeInf, leaseInf, listInf             cache.SharedIndexInformer

	// clock judges the node Leases' expiry by this process's clock.
	clock   *leaseClock
	metrics *coordinatorMetrics
	// handovers is nil unless the process has both roles.
	handovers *handovers
	agent     *Agent // nil unless Settings.Agent
}

// New returns the node side of a process; it starts nothing.
func New(deps Deps, settings Settings) (*Nodes, error) {
	if settings.LeaseDuration <= 0 {
		settings.LeaseDuration = defaultNodeLeaseDuration
	}
	metrics, err := newCoordinatorMetrics(deps.Registerer)
	if err != nil {
		return nil, fmt.Errorf("cannot register the coordinators' metrics: %w", err)
	}
	n := &Nodes{
		settings: settings,
		client:   deps.Client,
		fleet:    deps.Fleet,
		configs:  deps.Configs,
		lister:   listers.NewProvisionerConfigLister(deps.Configs.GetIndexer()),
		clock:    newLeaseClock(),
		metrics:  metrics,
	}
	n.addInformers()
	if !settings.Agent {
		return n, nil
	}
	if deps.AgentClient == nil {
		return nil, errors.New("cannot run a node agent without its client")
	}
	n.agent = newAgent(n, deps.AgentClient)
	if settings.Manager {
		n.handovers = newHandovers(n.fleet.RequeueOnNode)
	}
	return n, nil
}

// addInformers sets up the informers of the Nodes, of the node agents'
// Leases and of the removal lists: all of them for the manager, which
// reports every node; a node agent alone watches only its own.
func (n *Nodes) addInformers() {
	var tweak []informers.SharedInformerOption
	var leaseTweak []informers.SharedInformerOption
	if !n.settings.Manager {
		tweak = onlyNamed(n.settings.NodeName)
		leaseTweak = onlyNamed(NodeLeaseName(n.settings.NodeName))
	}
	n.nodeFactory = informers.NewSharedInformerFactoryWithOptions(n.client, 0,
		append(tweak, informers.WithTransform(cachetrim.Transform))...)
	n.nodeInf = n.nodeFactory.Core().V1().Nodes().Informer()
	n.leaseFactory = informers.NewSharedInformerFactoryWithOptions(n.client, 0,
		append(leaseTweak, informers.WithNamespace(n.settings.LeaseNamespace))...)
	n.leaseInf = n.leaseFactory.Coordination().V1().Leases().Informer()
	listTweak := []informers.SharedInformerOption{informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = LabelRemovedList + "=true"
	})}
	if !n.settings.Manager {
		listTweak = onlyNamed(RemovedListName(n.settings.NodeName))
	}
	n.listFactory = informers.NewSharedInformerFactoryWithOptions(n.client, 0,
		append(listTweak, informers.WithNamespace(n.settings.LeaseNamespace))...)
	n.listInf = n.listFactory.Core().V1().ConfigMaps().Informer()
}

// onlyNamed limits an informer to the object of one name.
func onlyNamed(name string) []informers.SharedInformerOption {
	return []informers.SharedInformerOption{informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})}
}

// NodeInformer informs about the Nodes: the fleet shares it with its
// provision controllers.
func (n *Nodes) NodeInformer() cache.SharedIndexInformer { return n.nodeInf }

// Agent is the node agent of a process with the node role; nil otherwise.
func (n *Nodes) Agent() *Agent { return n.agent }

// Start starts the informers until stop is closed.
func (n *Nodes) Start(stop <-chan struct{}) {
	n.nodeFactory.Start(stop)
	n.leaseFactory.Start(stop)
	n.listFactory.Start(stop)
}

// Shutdown waits until the informers stopped.
func (n *Nodes) Shutdown() {
	n.nodeFactory.Shutdown()
	n.leaseFactory.Shutdown()
	n.listFactory.Shutdown()
}

// HasSynced reports whether every informer synced.
func (n *Nodes) HasSynced() bool {
	return n.nodeInf.HasSynced() && n.leaseInf.HasSynced() && n.listInf.HasSynced()
}

// Watch starts what follows the nodes, before the informers start: the
// manager's node watch (watchNodes) and node trust worker (watchNodeTrust),
// and the agent's watch of its removal list. The manager's Events go to
// recorder. It returns the function that stops them.
func (n *Nodes) Watch(ctx context.Context, recorder record.EventRecorder) (stop func(), err error) {
	unwatchNodes, err := n.watchNodes(ctx)
	if err != nil {
		return nil, err
	}
	unwatchTrust, err := n.watchNodeTrust(ctx, recorder)
	if err != nil {
		unwatchNodes()
		return nil, err
	}
	return func() {
		unwatchTrust()
		unwatchNodes()
	}, nil
}

// all lists every ProvisionerConfig in the cache.
func (n *Nodes) all() ([]*v1alpha1.ProvisionerConfig, error) {
	return n.lister.List(labels.Everything())
}

// enqueueHostPath queues every hostPath ProvisionerConfig.
func (n *Nodes) enqueueHostPath() {
	all, err := n.all()
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, pc := range all {
		if pc.Spec.Backend.NodeHostPath() != nil {
			n.fleet.Enqueue(pc.Name)
		}
	}
}
