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
	"maps"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend/hostpath"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// CoordinatorDeps are what the fleet gives a coordinator.
type CoordinatorDeps struct {
	// Client patches claims and PersistentVolumes, deletes
	// PersistentVolumes and writes Leases: the provisioner's own and the
	// node Leases.
	Client provisioning.Client
	// Informers are the fleet's shared informers; the coordinator reads
	// claims, volumes, classes and nodes, and elects on Leases when set.
	Informers     provisioning.SharedInformers
	EventRecorder record.EventRecorder
	// OnLeaderChange, if set, is called with the holder of the provisioner's
	// Lease whenever it changes.
	OnLeaderChange func(holderIdentity string)
	// Metrics, if set, counts the expansions of volumes, in the series of
	// the provision controllers.
	Metrics *provisioning.Metrics
}

// coordinatorDeps are all a coordinator uses but does not own: what the
// fleet gives and what the node side adds.
type coordinatorDeps struct {
	CoordinatorDeps
	// NodeLeases informs about the Leases of NodeLeaseNamespace, where the
	// node agents hold one Lease per node.
	NodeLeases         cache.SharedIndexInformer
	NodeLeaseNamespace string
	Metrics            *coordinatorMetrics
	// LeaseClock judges the node Leases' expiry: the manager's, which its
	// watch of the node Leases tells of every change.
	LeaseClock *leaseClock
	// Handovers, set in a process that is also LocalNode's agent, take the
	// claims this coordinator leaves to the process's own node instance
	// (handover.go).
	Handovers *handovers
	LocalNode string
}

// Coordinator is the manager's instance of a hostPath ProvisionerConfig. The
// node agents provision and delete its volumes, each on its own node; the
// coordinator does what no node can do alone: it places the claims of
// Immediate binding on one served node (placement.go), expands volumes
// within their node's budget (expansion.go) and handles the volumes of
// nodes whose Node object is gone (noderemoval.go). It leads on
// the provisioner's own Lease, the one a manager that ran the whole hostPath
// controller held, so an upgrade hands over without two leaders.
//
// While it leads, one goroutine syncs everything of its provisioner at once
// whenever a claim or volume of its names, a Node or a node Lease changes,
// and again when a grace period ends or a waiting claim is due to be tried.
type Coordinator struct {
	// Elected runs the coordinator: Run, IsLeader, LeaseHealthy and
	// KeepLease are the skeleton's.
	*provisioning.Elected
	configName string
	// name is the provisioner name, which never changes.
	name       string
	spec       *v1alpha1.HostPathBackend
	client     provisioning.Client
	informers  provisioning.SharedInformers
	nodeLeases cache.SharedIndexInformer
	leaseClock *leaseClock
	leaseNS    string
	recorder   record.EventRecorder
	metrics    *coordinatorMetrics
	// handovers is nil unless this process is localNode's agent too.
	handovers *handovers
	localNode string
	// resizer expands the volumes of every node (expansion.go).
	resizer       *provisioning.Resizer
	resizeMetrics *provisioning.Metrics

	mu   sync.Mutex
	cfg  provisioning.Config
	term *coordTerm // nil unless leading
}

// NewCoordinator returns the coordinator of the hostPath ProvisionerConfig
// named configName, with spec its backend; it starts nothing until Run.
func (n *Nodes) NewCoordinator(configName string, cfg provisioning.Config, spec *v1alpha1.HostPathBackend, deps CoordinatorDeps) (*Coordinator, error) {
	return buildCoordinator(configName, cfg, spec, coordinatorDeps{
		CoordinatorDeps:    deps,
		NodeLeases:         n.leaseInf,
		NodeLeaseNamespace: n.settings.LeaseNamespace,
		LeaseClock:         n.clock,
		Metrics:            n.metrics,
		Handovers:          n.handovers,
		LocalNode:          n.settings.NodeName,
	})
}

// buildCoordinator is NewCoordinator with every dependency given.
func buildCoordinator(configName string, cfg provisioning.Config, spec *v1alpha1.HostPathBackend, deps coordinatorDeps) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot create the coordinator of %q: %w", configName, err)
	}
	if err := missingCoordinatorDeps(spec, deps); err != nil {
		return nil, fmt.Errorf("cannot create the coordinator of %q: %w", configName, err)
	}
	// Every node agent would refuse it: say so without waiting for them.
	if err := hostpath.CheckPathPattern(string(spec.PathPattern)); err != nil {
		return nil, fmt.Errorf("cannot create the coordinator of %q: %w", configName, err)
	}
	cfg.AdditionalProvisionerNames = slices.Clone(cfg.AdditionalProvisionerNames)
	c := &Coordinator{
		configName: configName,
		name:       cfg.ProvisionerName,
		spec:       spec.DeepCopy(),
		client:     deps.Client,
		informers:  deps.Informers,
		nodeLeases: deps.NodeLeases,
		leaseClock: deps.LeaseClock,
		leaseNS:    deps.NodeLeaseNamespace,
		recorder:   deps.EventRecorder,
		metrics:    deps.Metrics,
		handovers:  deps.Handovers,
		localNode:  deps.LocalNode,
		cfg:        cfg,
	}
	c.resizeMetrics = deps.CoordinatorDeps.Metrics
	c.resizer = provisioning.NewResizer(provisioning.ResizerDeps{
		Name: c.name, KnownName: func(name string) bool { return c.config().KnownName(name) }, Client: deps.Client,
		Volumes: deps.Informers.Volumes.GetStore(), Classes: deps.Informers.Classes.GetStore(),
		EventRecorder: deps.EventRecorder, Metrics: c.resizeMetrics, Expander: nodeExpander{c: c},
	})
	var err error
	c.Elected, err = provisioning.NewElected("hostPath coordinator", cfg.ProvisionerName, cfg.LeaderElection, provisioning.ElectedDeps{
		Client: deps.Client, Informers: deps.Informers, Synced: []cache.InformerSynced{deps.NodeLeases.HasSynced},
		Leader: c, OnLeaderChange: deps.OnLeaderChange,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot create the coordinator of %q: %w", configName, err)
	}
	return c, nil
}

func missingCoordinatorDeps(spec *v1alpha1.HostPathBackend, deps coordinatorDeps) error {
	var missing []error
	if spec == nil {
		missing = append(missing, errors.New("a hostPath backend is required"))
	}
	if deps.Client == nil || deps.EventRecorder == nil || deps.Metrics == nil {
		missing = append(missing, errors.New("a client, an event recorder and metrics are required"))
	}
	inf := deps.Informers
	if inf.Claims == nil || inf.Volumes == nil || inf.Classes == nil || inf.Nodes == nil || deps.NodeLeases == nil {
		missing = append(missing, errors.New("claim, volume, class, node and node Lease informers are required"))
	}
	if deps.LeaseClock == nil {
		missing = append(missing, errors.New("a clock of the node Leases is required"))
	}
	return errors.Join(missing...)
}

// Stuck is always nil: the coordinator calls no backend.
func (*Coordinator) Stuck() error { return nil }

// Health is always the zero Health: the nodes' space is the agents' to
// report, in their node Leases.
func (*Coordinator) Health() provisioning.Health { return provisioning.Health{} }

func (c *Coordinator) config() provisioning.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}

// Reconfigure applies cfg live. It returns provisioning.ErrRestartRequired,
// and changes nothing, when the provisioner name, the resync period or the
// leader election settings differ, as a provisioning.Controller does.
func (c *Coordinator) Reconfigure(cfg provisioning.Config) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg, err := provisioning.CheckReconfigure(c.cfg, cfg)
	if err != nil {
		return fmt.Errorf("cannot reconfigure the coordinator of %q: %w", c.configName, err)
	}
	c.cfg = cfg
	if c.term != nil {
		c.term.kick()
	}
	return nil
}

// coordTerm is one period of leadership.
type coordTerm struct {
	// wake asks the worker for a sync; one pending request is enough.
	wake chan struct{}
	// warned holds, by claim UID, the last Event each waiting claim got, so
	// that a claim is not told the same again at every sync. Only the
	// worker touches it.
	warned map[types.UID]string
	// placed holds, by claim UID, the node this term placed each claim on,
	// until the cache shows the placement: a sync on a cache that lags
	// behind neither places the claim again nor counts its node short.
	placed map[types.UID]string
}

func (t *coordTerm) kick() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Lead starts the work of one term, which lasts until ctx ends; the
// returned stop waits for it to end. Run's elector calls it whenever this
// coordinator wins the provisioner's Lease.
func (c *Coordinator) Lead(ctx context.Context) (stop func()) {
	logger := klog.FromContext(ctx)
	t := &coordTerm{wake: make(chan struct{}, 1), warned: map[types.UID]string{}, placed: map[types.UID]string{}}
	watches := c.watch(ctx, t)
	c.mu.Lock()
	c.term = t
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.work(ctx, t)
	}()
	logger.Info("Leading: placing claims and watching for removed nodes")
	return func() {
		c.mu.Lock()
		c.term = nil
		c.mu.Unlock()
		<-done
		for _, w := range watches {
			if err := w.informer.RemoveEventHandler(w.registration); err != nil {
				utilruntime.HandleErrorWithContext(ctx, err, "Cannot stop watching")
			}
		}
		c.metrics.deleteSeries(c.name)
		c.resizeMetrics.DeleteResizeSeries(c.name)
		logger.Info("Stopped leading")
	}
}

// watchRegistration is one event handler added to a shared informer.
type watchRegistration struct {
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
}

// watch makes the changes that may call for a sync wake t's worker: those
// of claims and volumes of this provisioner's names, of Nodes, and of the
// holder or the annotations of node Leases (not their renewals).
func (c *Coordinator) watch(ctx context.Context, t *coordTerm) []watchRegistration {
	handlers := map[cache.SharedIndexInformer]cache.ResourceEventHandler{
		c.informers.Claims:  c.filtered(t, c.claimOfMine),
		c.informers.Volumes: c.filtered(t, func(obj any) bool { return c.config().KnownName(volumeProvisioner(obj)) }),
		c.informers.Nodes:   nodeChanges(t),
		c.nodeLeases:        leaseChanges(t),
	}
	var watches []watchRegistration
	for informer, handler := range handlers {
		registration, err := informer.AddEventHandler(handler)
		if err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Cannot watch")
			continue
		}
		watches = append(watches, watchRegistration{informer: informer, registration: registration})
	}
	return watches
}

func (c *Coordinator) filtered(t *coordTerm, interesting func(obj any) bool) cache.ResourceEventHandler {
	return cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			return interesting(obj)
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { t.kick() },
			UpdateFunc: func(any, any) { t.kick() },
			DeleteFunc: func(any) { t.kick() },
		},
	}
}

// nodeChanges wakes t when a Node comes, goes or changes labels: its status
// updates change nothing the coordinator acts on.
func nodeChanges(t *coordTerm) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { t.kick() },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if !ok1 || !ok2 || !maps.Equal(o.Labels, n.Labels) {
				t.kick()
			}
		},
		DeleteFunc: func(any) { t.kick() },
	}
}

// leaseChanges wakes t when a node Lease comes, goes, changes holder or
// annotations: a renewal alone changes nothing the coordinator acts on.
func leaseChanges(t *coordTerm) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { t.kick() },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*coordinationv1.Lease)
			n, ok2 := newObj.(*coordinationv1.Lease)
			if !ok1 || !ok2 || !equalPtr(o.Spec.HolderIdentity, n.Spec.HolderIdentity) ||
				o.Annotations[AnnNodeReport] != n.Annotations[AnnNodeReport] {
				t.kick()
			}
		},
		DeleteFunc: func(any) { t.kick() },
	}
}

func equalPtr[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// claimOfMine reports whether obj is a claim that asks for one of this
// provisioner's names.
func (c *Coordinator) claimOfMine(obj any) bool {
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	return ok && c.config().KnownName(provisioning.StorageProvisioner(claim))
}

func volumeProvisioner(obj any) string {
	if volume, ok := obj.(*corev1.PersistentVolume); ok {
		return volume.Annotations[provisioning.AnnDynamicallyProvisioned]
	}
	return ""
}

// syncSpacing is the least time between two syncs. Each sync reads every
// waiting claim of the provisioner: one sync per event of a burst of claims
// would cost the square of the burst, while the events that come within
// the spacing are served by one sync after it.
const syncSpacing = 50 * time.Millisecond

// work syncs at once, then whenever t is woken or the wait a sync asked
// for is over, at most once per syncSpacing, until ctx ends.
func (c *Coordinator) work(ctx context.Context, t *coordTerm) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	spacing := time.NewTimer(0)
	defer spacing.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.wake:
		case <-timer.C:
		}
		timer.Stop()
		if next := c.sync(ctx, t); next > 0 {
			timer.Reset(next)
		}
		spacing.Reset(syncSpacing)
		select {
		case <-ctx.Done():
			return
		case <-spacing.C:
		}
	}
}

// sync places what waits for a node, expands the volumes of claims that
// ask for more and handles the volumes of removed nodes. It returns how soon to sync again without a change; zero: only on
// a change.
func (c *Coordinator) sync(ctx context.Context, t *coordTerm) time.Duration {
	cfg := c.config()
	if cfg.Paused {
		return 0
	}
	v := c.view(cfg)
	c.forgetHandedOver(v)
	next := c.place(ctx, t, v)
	next = shorter(next, c.expand(ctx, v))
	if removal := c.handleRemovedNodes(ctx, v); removal > 0 && (next == 0 || removal < next) {
		next = removal
	}
	if next == 0 || cfg.ResyncPeriod > 0 && cfg.ResyncPeriod < next {
		next = cfg.ResyncPeriod
	}
	return next
}
