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

package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/cachetrim"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/generated/informers/externalversions"
	listers "github.com/provfleet/provfleet/pkg/generated/listers/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/hostpathnodes"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

const (
	// managerTenant is the User-Agent and budget share of the manager's own
	// requests (informers, status, Events).
	managerTenant = "provfleet/manager"
	// component names the manager in the Events it emits.
	component = "provfleet-manager"
	// eventsUserAgent names the client of every Event write.
	eventsUserAgent = "provfleet/events"
	// membershipTenant is the tenant of the membership Lease's writes.
	membershipTenant = "replicas"
	// eventBurstPerObject Events of one type about one object are written at
	// once, then eventQPSPerObject a second.
	eventBurstPerObject = 5
	eventQPSPerObject   = 1. / 3600
	// byProvisionerName indexes ProvisionerConfigs by every name they answer to.
	byProvisionerName = "provisionerName"
	// reconcileWorkers is how many ProvisionerConfigs are reconciled at once;
	// stopping an instance blocks a worker until the instance drained.
	reconcileWorkers = 4
)

// Roles are the parts one process plays.
type Roles struct {
	// Manager serves the NFS and custom backends, writes every
	// ProvisionerConfig's status and reports the nodes of the hostPath
	// backends.
	Manager bool
	// Node is a node agent's: it serves the hostPath backends that select
	// NodeName, while it holds the node's Lease.
	Node bool
}

// Settings are the fleet-wide settings, mostly from the command line.
type Settings struct {
	// Roles are the parts this process plays; at least one.
	Roles Roles
	// Namespace holds every instance's Lease.
	Namespace string
	// Identity names this replica in Leases and in status.leader.
	Identity string
	// LeaderElection runs every instance under its own Lease; without it every
	// instance works at once (a single replica).
	LeaderElection bool
	// LegacyLockNamespace, if set, is where an older upstream version of a
	// provisioner locks an Endpoints object: no instance leads while its
	// provisioner's lock there holds a live record of another holder (see
	// provisioning.LeaderElectionConfig). Empty: no such check.
	LegacyLockNamespace string
	// HostPathRoot confines hostPath backends.
	HostPathRoot string
	// NodeName is the node this replica runs on; a node agent requires it.
	NodeName string
	// NodeLeaseNamespace holds the node agents' Leases; empty: Namespace.
	NodeLeaseNamespace string
	// NodeLeaseDuration is how long a node agent's Lease lasts unrenewed;
	// the agent renews it every quarter of that and stops serving its node
	// when it could not for three quarters. Zero: 40s, as the kubelet's.
	NodeLeaseDuration time.Duration
	// QPS and Burst are the API client budget of the whole fleet, shared fairly
	// between the manager and every instance.
	QPS   float32
	Burst int
	// EventQPS and EventBurst are the separate budget of the fleet's Event
	// writes, so that the Events of failing claims never take from anyone's
	// provisioning; zero: a fifth of QPS and half of Burst.
	EventQPS   float32
	EventBurst int
	// LeaseQPS and LeaseBurst are the separate budget of the provisioners'
	// Lease writes, so that a provisioner's backlog never delays its own
	// renewals; zero: 200 and 400, room for the renewals of 1,200
	// provisioners at the default renew interval of 6 s.
	LeaseQPS   float32
	LeaseBurst int
	// Membership are the timings of this replica's membership Lease, with
	// leader election in the manager's role (see membership); zero: those
	// of client-go's defaults, 15s, 10s and 2s.
	Membership LeaseTimings
	// BackendProbeInterval is how often the leader of each provisioner probes
	// its backend's storage, and the deadline of a probe; zero: 30s.
	BackendProbeInterval time.Duration
	// Registerer receives the provisioners' metrics; nil keeps them private.
	Registerer prometheus.Registerer
}

// Option customises a Manager.
type Option func(*Manager) error

// WithBackend registers a custom backend under name; ProvisionerConfigs use it
// with spec.backend.custom.driver set to name.
func WithBackend(name string, factory BackendFactory) Option {
	return func(m *Manager) error {
		if name == "" || factory == nil {
			return errors.New("cannot register a backend without a name and a factory")
		}
		if _, ok := m.custom[name]; ok {
			return fmt.Errorf("cannot register backend %q twice", name)
		}
		m.custom[name] = factory
		return nil
	}
}

// Manager runs one provisioning.Controller per ProvisionerConfig.
type Manager struct {
	settings Settings
	deps     dependencies
	custom   map[string]BackendFactory
	metrics  *provisioning.Metrics
	// fleetMetrics are those of the whole fleet.
	fleetMetrics *fleetMetrics

	core   informers.SharedInformerFactory
	leases informers.SharedInformerFactory // the Leases namespace only; nil without leader election
	// nodes is the node side: the Nodes, the node agents' Leases and the
	// hostPath coordinators.
	nodes *hostpathnodes.Nodes
	agent *hostpathnodes.Agent // nil unless Roles.Node
	// membership spreads the ProvisionerConfigs over the manager replicas;
	// nil without leader election or the manager's role: this replica
	// runs them all.
	membership *membership
	shared     provisioning.SharedInformers
	volumes    *backend.PathIndex
	configs    externalversions.SharedInformerFactory
	configInf  cache.SharedIndexInformer
	lister     listers.ProvisionerConfigLister
	queue      workqueue.TypedRateLimitingInterface[string]
	scheme     *runtime.Scheme
	events     record.EventBroadcaster
	recorder   record.EventRecorder
	instances  *registry
	started    sync.Once
	synced     chan struct{}
	runErr     error
}

// New returns a Manager that talks to the API server of config, spending at
// most settings.QPS requests a second for the whole fleet.
func New(config *rest.Config, settings Settings, opts ...Option) (_ *Manager, err error) {
	b := newBudgets(settings)
	defer func() {
		if err != nil {
			b.stop()
		}
	}()
	deps, err := newDependencies(config, b)
	if err != nil {
		return nil, err
	}
	m, err := newManager(settings, deps, opts...)
	if err != nil {
		return nil, err
	}
	b.shared.ObserveWaits(m.fleetMetrics.observeBudgetWait)
	return m, nil
}

func newManager(settings Settings, deps dependencies, opts ...Option) (*Manager, error) {
	settings = withNodeDefaults(settings)
	if err := checkRoles(settings); err != nil {
		return nil, err
	}
	reg := settings.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	metrics, err := provisioning.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("cannot register the provisioners' metrics: %w", err)
	}
	scheme, err := newEventScheme()
	if err != nil {
		return nil, err
	}
	m := &Manager{
		settings: settings,
		deps:     deps,
		custom:   map[string]BackendFactory{},
		metrics:  metrics,
		// Instances resync on their own timers; the cache keeps only what
		// they read.
		core:    informers.NewSharedInformerFactoryWithOptions(deps.client, 0, informers.WithTransform(cachetrim.Transform)),
		configs: externalversions.NewSharedInformerFactory(deps.pcfg, 0),
		scheme:  scheme,
		synced:  make(chan struct{}),
	}
	for _, opt := range opts {
		if err := opt(m); err != nil {
			return nil, err
		}
	}
	// The queue exists before any instance runs, so it can take their exits.
	m.instances = newRegistry(func(key string) { m.queue.Add(configOf(key)) })
	if err := m.addInformers(reg); err != nil {
		return nil, err
	}
	if m.fleetMetrics, err = newFleetMetrics(reg, m); err != nil {
		return nil, err
	}
	return m, nil
}

// withNodeDefaults fills the node settings left empty.
func withNodeDefaults(settings Settings) Settings {
	if settings.NodeLeaseNamespace == "" {
		settings.NodeLeaseNamespace = settings.Namespace
	}
	return settings
}

// withLeaseDefaults fills the timings left zero with client-go's defaults.
func withLeaseDefaults(t LeaseTimings) LeaseTimings {
	if t.LeaseDuration == 0 {
		t.LeaseDuration = 15 * time.Second
	}
	if t.RenewDeadline == 0 {
		t.RenewDeadline = 10 * time.Second
	}
	if t.RetryPeriod == 0 {
		t.RetryPeriod = 2 * time.Second
	}
	return t
}

// checkRoles refuses settings its roles cannot work with.
func checkRoles(settings Settings) error {
	switch {
	case !settings.Roles.Manager && !settings.Roles.Node:
		return errors.New("cannot run without a role: take the manager's, a node agent's or both")
	case settings.LeaderElection && (settings.Namespace == "" || settings.Identity == ""):
		return errors.New("cannot elect leaders without a namespace and an identity")
	case settings.Roles.Node && (settings.NodeName == "" || settings.NodeLeaseNamespace == "" || settings.Identity == ""):
		return errors.New("cannot run a node agent without a node name, a namespace for its Lease and an identity")
	}
	if settings.LeaderElection && settings.Roles.Manager {
		t := withLeaseDefaults(settings.Membership)
		le := provisioning.LeaderElectionConfig{Enabled: true, Namespace: settings.Namespace,
			LeaseDuration: t.LeaseDuration, RenewDeadline: t.RenewDeadline, RetryPeriod: t.RetryPeriod}
		if err := le.Validate(); err != nil {
			return fmt.Errorf("cannot hold a membership Lease: %w", err)
		}
	}
	return nil
}

// newEventScheme returns the scheme of the objects Events are about.
func newEventScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("cannot build the event scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("cannot build the event scheme: %w", err)
	}
	return scheme, nil
}

// addInformers sets up the informers the whole fleet shares, their indexes
// and their one event router, and the node side, before any of them starts.
func (m *Manager) addInformers(reg prometheus.Registerer) error {
	if !m.settings.Roles.Manager {
		hostpathnodes.LimitCacheToNode(m.core, m.settings.NodeName)
	}
	m.shared = provisioning.SharedInformers{
		Claims:  m.core.Core().V1().PersistentVolumeClaims().Informer(),
		Volumes: m.core.Core().V1().PersistentVolumes().Informer(),
		Classes: m.core.Storage().V1().StorageClasses().Informer(),
	}
	pcfgs := m.configs.Provfleet().V1alpha1().ProvisionerConfigs()
	m.configInf = pcfgs.Informer()
	m.lister = pcfgs.Lister()
	if err := m.addNodeSide(reg); err != nil {
		return err
	}
	if m.settings.LeaderElection && m.settings.Roles.Manager {
		// One watch for every instance's Lease: followers never poll. A node
		// agent's instances elect no leader: its node's Lease stands for
		// them all.
		m.leases = informers.NewSharedInformerFactoryWithOptions(m.deps.client, 0, informers.WithNamespace(m.settings.Namespace))
		m.shared.Leases = m.leases.Coordination().V1().Leases().Informer()
		client, err := m.deps.tenants.clientFor(membershipTenant)
		if err != nil {
			return err
		}
		m.membership = newMembership(m.settings.Identity, m.settings.Namespace, withLeaseDefaults(m.settings.Membership), client, m.shared.Leases)
	}
	// One event handler per informer for the whole fleet.
	m.shared.Router = provisioning.NewRouter(m.shared.Claims, m.shared.Volumes, m.shared.Leases)
	if m.membership != nil {
		// The instance of a provisioner starts only when this replica takes
		// it over, possibly from one that died.
		if err := m.shared.Router.FollowLeases(); err != nil {
			return err
		}
	}
	// Added once here, before the informer starts: an index added per
	// instance would collide with the next instance's.
	if err := m.shared.Volumes.AddIndexers(cache.Indexers{backend.VolumePathIndex: backend.IndexVolumePaths}); err != nil {
		return fmt.Errorf("cannot index PersistentVolumes by path: %w", err)
	}
	m.volumes = backend.NewPathIndex(m.shared.Volumes.GetIndexer())
	if err := m.configInf.AddIndexers(cache.Indexers{byProvisionerName: indexByProvisionerName}); err != nil {
		return fmt.Errorf("cannot index ProvisionerConfigs: %w", err)
	}
	return nil
}

// addNodeSide makes the node side of the process: with the node role, the
// node agent, which the manager's registry runs the instances of.
func (m *Manager) addNodeSide(reg prometheus.Registerer) error {
	deps := hostpathnodes.Deps{Client: m.deps.client, Configs: m.configInf, Fleet: nodeRole{m}, Registerer: reg}
	if m.settings.Roles.Node {
		client, err := m.deps.tenants.clientFor("node-agent")
		if err != nil {
			return err
		}
		deps.AgentClient = client
	}
	nodes, err := hostpathnodes.New(deps, hostpathnodes.Settings{
		Manager:        m.settings.Roles.Manager,
		Agent:          m.settings.Roles.Node,
		NodeName:       m.settings.NodeName,
		Identity:       m.settings.Identity,
		LeaseNamespace: m.settings.NodeLeaseNamespace,
		LeaseDuration:  m.settings.NodeLeaseDuration,
	})
	if err != nil {
		return err
	}
	m.nodes, m.agent = nodes, nodes.Agent()
	m.shared.Nodes = nodes.NodeInformer()
	return nil
}

func indexByProvisionerName(obj any) ([]string, error) {
	pc, ok := obj.(*v1alpha1.ProvisionerConfig)
	if !ok {
		return nil, nil
	}
	return pc.Spec.ProvisionerNames(), nil
}

// Run works until ctx ends, then stops every instance (each drains and
// releases its Lease) and returns. A Manager runs once.
func (m *Manager) Run(ctx context.Context) error {
	ran := false
	m.started.Do(func() {
		ran = true
		m.runErr = m.run(ctx)
	})
	if !ran {
		return errors.New("cannot run the fleet manager twice")
	}
	return m.runErr
}

func (m *Manager) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	defer m.deps.stop()
	// The queue and the broadcaster start goroutines: made here so that a
	// Manager that never runs leaks none.
	m.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "provisionerconfigs"})
	defer m.queue.ShutDown()
	m.startEventBroadcaster(ctx)
	defer m.events.Shutdown()
	handle, err := m.watchConfigs(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = m.configInf.RemoveEventHandler(handle) }()
	unwatchNodes, err := m.nodes.Watch(ctx, m.recorder)
	if err != nil {
		return err
	}
	defer unwatchNodes()
	shutdownInformers := m.startInformers(ctx)
	defer shutdownInformers()

	logger.Info("Starting fleet manager", "identity", m.settings.Identity, "namespace", m.settings.Namespace,
		"manager", m.settings.Roles.Manager, "node", m.settings.NodeName, "nodeAgent", m.settings.Roles.Node)
	synced := []cache.InformerSynced{m.configInf.HasSynced, m.shared.Claims.HasSynced,
		m.shared.Volumes.HasSynced, m.shared.Classes.HasSynced, m.nodes.HasSynced}
	if m.shared.Leases != nil {
		synced = append(synced, m.shared.Leases.HasSynced)
	}
	if cache.WaitForNamedCacheSyncWithContext(ctx, synced...) {
		close(m.synced)
	}
	var background sync.WaitGroup
	if m.agent != nil {
		// Ends once ctx ended, the node's instances stopped and its Lease
		// was released.
		background.Go(func() { m.agent.Run(ctx) })
	}
	if m.membership != nil && ctx.Err() == nil {
		stopFollowing, err := m.membership.follow(func() { m.queue.Add(spreadKey) })
		if err != nil {
			return err
		}
		defer func() { _ = stopFollowing() }()
		// The first spread before any reconcile, and the join only now
		// that the caches synced: the other replicas hand this one its
		// share as soon as they see it, and it can start at once.
		m.respread(ctx)
		// Ends once ctx ended and the membership Lease was released, so
		// that the others take this replica's share over at once.
		background.Go(func() { m.membership.elector.Run(ctx) })
	}
	m.runWorkers(ctx)
	background.Wait()
	m.instances.StopAll()
	logger.Info("Stopped fleet manager")
	return nil
}

// startEventBroadcaster starts the one broadcaster, so the one correlator, of
// every instance: a claim's repeated Event is counted in one Event, and its
// spam filter lets each object write a few Events of a type, then one an
// hour, however often a failing claim is retried.
func (m *Manager) startEventBroadcaster(ctx context.Context) {
	m.events = record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(record.CorrelatorOptions{
		BurstSize: eventBurstPerObject,
		QPS:       eventQPSPerObject,
	}))
	m.recorder = m.events.NewRecorder(m.scheme, corev1.EventSource{Component: component})
	m.events.StartStructuredLogging(3)
	sink := m.deps.events
	if sink == nil {
		sink = m.deps.client.CoreV1()
	}
	m.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: sink.Events("")})
}

// watchConfigs queues every ProvisionerConfig that changes, with those that
// share one of its names.
func (m *Manager) watchConfigs(ctx context.Context) (cache.ResourceEventHandlerRegistration, error) {
	logger := klog.FromContext(ctx)
	// A ProvisionerConfig created or deleted changes the spread; an edit
	// keeps its name, so its place.
	respread := func() {
		if m.membership != nil {
			m.queue.Add(spreadKey)
		}
	}
	handle, err := m.configInf.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			m.enqueueSharing(obj)
			respread()
		},
		UpdateFunc: func(oldObj, newObj any) {
			m.enqueueSharing(oldObj)
			m.enqueueSharing(newObj)
		},
		DeleteFunc: func(obj any) {
			m.enqueueSharing(obj)
			respread()
		},
	}, cache.HandlerOptions{Logger: &logger})
	if err != nil {
		return nil, fmt.Errorf("cannot watch ProvisionerConfigs: %w", err)
	}
	return handle, nil
}

// startInformers starts the shared informers and returns the function that
// shuts them down.
func (m *Manager) startInformers(ctx context.Context) (shutdown func()) {
	m.core.Start(ctx.Done())
	if m.leases != nil {
		m.leases.Start(ctx.Done())
	}
	m.configs.Start(ctx.Done())
	m.nodes.Start(ctx.Done())
	return func() {
		m.core.Shutdown()
		m.configs.Shutdown()
		m.nodes.Shutdown()
		if m.leases != nil {
			m.leases.Shutdown()
		}
	}
}

// runWorkers runs the reconcile workers until ctx ends, then shuts the queue
// down and waits until they finished their reconciles.
func (m *Manager) runWorkers(ctx context.Context) {
	var workers sync.WaitGroup
	for range reconcileWorkers {
		workers.Go(func() { wait.UntilWithContext(ctx, m.runWorker, time.Second) })
	}
	<-ctx.Done()
	klog.FromContext(ctx).Info("Stopping fleet manager: every instance drains and releases its Lease")
	m.queue.ShutDown()
	workers.Wait()
}

// Ready is nil once the manager's caches are in sync.
func (m *Manager) Ready() error {
	select {
	case <-m.synced:
		return nil
	default:
		return errors.New("the fleet manager's caches are not synced yet")
	}
}

// LeaseHealthy is nil unless some instance leads and its lease renewal is
// overdue, or this replica's membership Lease renewal is.
func (m *Manager) LeaseHealthy() error {
	var errs []error
	if m.membership != nil {
		if err := m.membership.elector.CheckRenewal(); err != nil {
			errs = append(errs, fmt.Errorf("membership: %w", err))
		}
	}
	m.instances.Each(func(key string, inst *instance) {
		if err := inst.controller.LeaseHealthy(); err != nil {
			errs = append(errs, fmt.Errorf("ProvisionerConfig %s: %w", key, err))
		}
	})
	return errors.Join(errs...)
}

// Stuck is nil unless a backend call of some instance runs past its
// deadline, or a stopped instance gave up on one and it has not ended or its
// Lease has not expired yet.
func (m *Manager) Stuck() error {
	var errs []error
	m.instances.Each(func(key string, inst *instance) {
		if err := inst.controller.Stuck(); err != nil {
			errs = append(errs, fmt.Errorf("ProvisionerConfig %s: %w", key, err))
		}
	})
	m.instances.EachStuck(func(key string, inst *instance) {
		err := inst.controller.Stuck()
		if err == nil {
			err = fmt.Errorf("its Lease is left to expire until %s", inst.leaseFreeAt.UTC().Format(time.RFC3339))
		}
		errs = append(errs, fmt.Errorf("stopped instance of ProvisionerConfig %s: %w", key, err))
	})
	return errors.Join(errs...)
}

func (m *Manager) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	m.queue.Add(key)
}

// enqueueSharing enqueues obj and every ProvisionerConfig that shares one of
// its names, so a name conflict resolves when the older object goes.
func (m *Manager) enqueueSharing(obj any) {
	m.enqueue(obj)
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pc, ok := obj.(*v1alpha1.ProvisionerConfig)
	if !ok {
		return
	}
	for _, name := range pc.Spec.ProvisionerNames() {
		others, err := m.configInf.GetIndexer().ByIndex(byProvisionerName, name)
		if err != nil {
			utilruntime.HandleError(err)
			continue
		}
		for _, other := range others {
			m.enqueue(other)
		}
	}
	// Lease names and bases are not indexed: few objects change, so look at
	// them all.
	all, err := m.all()
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, other := range all {
		if other.Name != pc.Name && (sharedLease(&pc.Spec, &other.Spec) != "" || overlappingBases(&pc.Spec, &other.Spec) != "") {
			m.enqueue(other)
		}
	}
}

// runWorker reconciles ProvisionerConfigs until the queue shuts down.
func (m *Manager) runWorker(ctx context.Context) {
	for m.processNextWorkItem(ctx) {
	}
}

// processNextWorkItem reconciles the next queued ProvisionerConfig; it
// reports false once the queue shut down.
func (m *Manager) processNextWorkItem(ctx context.Context) bool {
	key, quit := m.queue.Get()
	if quit {
		return false
	}
	defer m.queue.Done(key)
	if key == spreadKey {
		m.respread(ctx)
		return true
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "provisionerConfig", klog.KRef("", key))
	retry, err := m.reconcile(klog.NewContext(ctx, logger), key)
	switch {
	case apierrors.IsConflict(err):
		// A write from a stale cache: the watch brings the newer object.
		logger.V(4).Info("The ProvisionerConfig changed meanwhile: reconciling it again", "err", err)
		m.queue.AddRateLimited(key)
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot reconcile ProvisionerConfig", "provisionerConfig", klog.KRef("", key))
		m.queue.AddRateLimited(key)
	case retry:
		m.queue.AddRateLimited(key)
	default:
		m.queue.Forget(key)
	}
	return true
}

// all lists every ProvisionerConfig in the cache.
func (m *Manager) all() ([]*v1alpha1.ProvisionerConfig, error) {
	return m.lister.List(labels.Everything())
}

// stop stops the instance of key, if any, and waits until it drained.
func (m *Manager) stop(ctx context.Context, key string) {
	if config := configOf(key); config != key && m.agent != nil {
		m.agent.InstanceStopping(config)
		defer m.agent.InstanceStopped(config)
	}
	if inst := m.instances.Get(key); inst != nil && m.instances.Stop(key, inst.token) {
		klog.FromContext(ctx).Info("Stopped provisioner instance", "token", inst.token)
	}
}
