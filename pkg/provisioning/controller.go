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

package provisioning

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/provfleet/provfleet/internal/eventrouter"
	"github.com/provfleet/provfleet/internal/workqueue"
)

// SharedInformers are the fleet's one set of informers; a Controller only
// subscribes to their events, and never adds indexers.
type SharedInformers struct {
	Claims, Volumes, Classes, Nodes cache.SharedIndexInformer
	// Leases, optional, informs about the Leases of the leader election
	// namespace. Without it each controller that elects a leader watches its
	// own Lease, one watch each.
	Leases cache.SharedIndexInformer
	// Router, optional, made once with NewRouter(Claims, Volumes, Leases),
	// routes their events to every controller. Without it each controller
	// has its own: one event handler per informer and controller.
	Router *Router
	// Complete, optional, reports whether the caches of Claims, Volumes and
	// Classes hold everything that a controller started now reads: false
	// while a cache limited to part of the cluster lists again for a
	// scope that grew. A controller waits for it, as for HasSynced, before
	// it campaigns: a cache that lacks its volumes would have it count too
	// little of a budget, or reclaim a directory whose volume exists.
	Complete cache.InformerSynced
}

// Client is the part of the Kubernetes API a Controller calls; a
// kubernetes.Interface is one. It lets a fleet give each controller a client
// of only these two groups, a fraction of a whole clientset's size.
type Client interface {
	CoreV1() corev1client.CoreV1Interface
	CoordinationV1() coordinationv1client.CoordinationV1Interface
}

// Dependencies are what a Controller uses but does not own.
type Dependencies struct {
	Client        Client
	Informers     SharedInformers
	EventRecorder record.EventRecorder
	// Metrics is shared by every controller of one registry; nil keeps this
	// controller's metrics private.
	Metrics     *Metrics
	Provisioner Provisioner
	// OnLeaderChange, if set, is called with the Lease holder's identity whenever
	// it changes (also when this instance gains or loses it).
	OnLeaderChange func(holderIdentity string)
	// OnStuck, if set, is called when what Stuck reports may have changed.
	OnStuck func()
	// OnHealthChange, if set, is called when what Health reports changed:
	// the backend turned available or unavailable, its error changed, or
	// its space Moved.
	OnHealthChange func()
	// Scope, if set, limits the controller to part of its provisioner's
	// claims and volumes; nil: all of them. A controller with a Scope
	// expands no volume: it leads no provisioner, and whoever leads the
	// whole provisioner does (a fleet's hostPath coordinator).
	Scope Scope
}

// Scope is the part of a provisioner's claims and volumes one Controller
// serves, as a node agent serves those of its own node while the agents of
// other nodes serve theirs under the same provisioner name.
type Scope interface {
	// Claim reports whether the controller provisions claim and, once it is
	// bound, takes its intent finalizer off. A claim the controller is
	// provisioning in the background stays its own whatever Claim says.
	Claim(claim *corev1.PersistentVolumeClaim) bool
	// Volume reports whether the controller deletes volume once released.
	Volume(volume *corev1.PersistentVolume) bool
}

// elector decides when an Elected works: a leaderelection.LeaderElector on
// the provisioner's Lease, or a leaderelection.AlwaysLeader when leader
// election is off. Each term of its runs the Leader's Lead.
type elector interface {
	Run(ctx context.Context)
	IsLeader() bool
	CheckRenewal() error
	KeepLease()
}

// claimKey identifies a claim in the claim queue; the UID tells a claim from a
// later one of the same name.
type claimKey struct {
	Namespace, Name string
	UID             types.UID
}

// Controller provisions volumes for the claims of one provisioner and deletes
// them when they are released. Its Elected runs it: Run, IsLeader,
// LeaseHealthy, KeepLease and Identity are the skeleton's.
type Controller struct {
	*Elected
	name        string
	client      Client
	informers   SharedInformers
	recorder    record.EventRecorder
	metrics     *Metrics
	provisioner Provisioner
	// reclaimer is the provisioner when it keeps its own record of unsaved
	// volumes; nil means the intent finalizer guards them.
	reclaimer Reclaimer
	// prober is the provisioner when it can be probed; nil otherwise.
	prober Prober
	// resizer grows the volumes of bound claims; nil with a Scope, whose
	// controller leads no provisioner.
	resizer   *Resizer
	scope     Scope
	finalizer string
	clock     clock.WithDelayedExecution

	// events deliver the events of this provisioner's objects while it
	// leads; eventsMu orders a Reconfigure's refresh after a term's
	// subscribe, so that no term misses new names.
	eventsMu sync.Mutex
	events   []*eventrouter.Subscription[routeKey]

	claimRetries  *workqueue.Retries[claimKey]
	volumeRetries *workqueue.Retries[string]
	room          *roomWaits
	// inProgress holds the provisionings (*background, by claim UID) a
	// backend still works on in the background, so that work continues
	// even after the claim is gone.
	inProgress sync.Map
	// copies are the clones being copied, by source volume.
	copies copies
	// provisioning holds the names of the PersistentVolumes a worker is
	// provisioning or saving right now, which reclaim leaves alone.
	provisioning sync.Map
	// deleted holds, by name, the UIDs of the PersistentVolumes this
	// controller deleted and the informer still shows, which need no sync.
	deleted sync.Map

	onStuck        func()
	onHealthChange func()

	// health is what the probes of the current or last term found;
	// reported is what onHealthChange was last called for.
	healthMu sync.Mutex
	health   Health
	reported Health

	// overdue holds the backend calls running past their deadline.
	overdueMu sync.Mutex
	overdue   map[*backendCall]struct{}

	mu   sync.Mutex
	cfg  Config
	term *term // nil unless leading
	// abandoned are closed once the work a stop gave up on has ended.
	abandoned []<-chan struct{}
}

// New returns a Controller for cfg; it starts nothing until Run.
func New(cfg Config, deps Dependencies) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot create the provision controller: %w", err)
	}
	inf, err := routedInformers(deps)
	if err != nil {
		return nil, err
	}
	cfg.AdditionalProvisionerNames = slices.Clone(cfg.AdditionalProvisionerNames)
	c := &Controller{
		name:           cfg.ProvisionerName,
		client:         deps.Client,
		informers:      inf,
		recorder:       deps.EventRecorder,
		metrics:        deps.Metrics,
		provisioner:    deps.Provisioner,
		finalizer:      IntentFinalizer(cfg.ProvisionerName),
		clock:          clock.RealClock{},
		claimRetries:   workqueue.NewRetries[claimKey](rateLimits(cfg.Retry)),
		volumeRetries:  workqueue.NewRetries[string](rateLimits(cfg.Retry)),
		room:           newRoomWaits(rateLimits(cfg.Retry)),
		onStuck:        deps.OnStuck,
		onHealthChange: deps.OnHealthChange,
		scope:          deps.Scope,
		overdue:        map[*backendCall]struct{}{},
		cfg:            cfg,
	}
	c.reclaimer, _ = deps.Provisioner.(Reclaimer)
	c.prober, _ = deps.Provisioner.(Prober)
	if c.recorder == nil {
		c.recorder = &record.FakeRecorder{}
	}
	if c.metrics == nil {
		m, err := NewMetrics(prometheus.NewRegistry())
		if err != nil {
			return nil, err
		}
		c.metrics = m
	}
	if c.scope == nil {
		c.resizer = c.newResizer(deps.Provisioner)
	}
	c.Elected, err = NewElected("provision controller", cfg.ProvisionerName, cfg.LeaderElection, ElectedDeps{
		Client: deps.Client, Informers: inf, Leader: c, OnLeaderChange: deps.OnLeaderChange, Metrics: c.metrics,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// newResizer returns the Resizer of a controller that is no node agent's:
// only the manager changes a volume's spec.
func (c *Controller) newResizer(provisioner Provisioner) *Resizer {
	expander, _ := provisioner.(Expander)
	return NewResizer(ResizerDeps{
		Name: c.name, KnownName: func(name string) bool { return c.config().KnownName(name) }, Client: c.client,
		Volumes: c.informers.Volumes.GetStore(), Classes: c.informers.Classes.GetStore(), EventRecorder: c.recorder, Metrics: c.metrics,
		Expander: expander, Call: c.claimCall,
	})
}

// routedInformers checks deps and returns its informers with their router,
// made when deps has none.
func routedInformers(deps Dependencies) (SharedInformers, error) {
	missing := missingDependencies(deps)
	inf := deps.Informers
	if inf.Router == nil && len(missing) == 0 {
		inf.Router = NewRouter(inf.Claims, inf.Volumes, inf.Leases)
	} else if inf.Router != nil && !inf.Router.serves(inf) {
		missing = append(missing, errors.New("the router must route the claim, volume and Lease informers given"))
	}
	if len(missing) > 0 {
		return inf, fmt.Errorf("cannot create the provision controller: %w", errors.Join(missing...))
	}
	return inf, nil
}

// missingDependencies lists what deps lacks, the router aside.
func missingDependencies(deps Dependencies) []error {
	var missing []error
	if deps.Client == nil {
		missing = append(missing, errors.New("a client is required"))
	}
	if deps.Provisioner == nil {
		missing = append(missing, errors.New("a provisioner is required"))
	}
	inf := deps.Informers
	if inf.Claims == nil || inf.Volumes == nil || inf.Classes == nil || inf.Nodes == nil {
		missing = append(missing, errors.New("claim, volume, class and node informers are required"))
	}
	return missing
}

// replicaIdentity is the configured identity of this replica in the Lease
// or, when none is configured, the host name and a random suffix.
func replicaIdentity(configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("cannot name this replica: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// Stuck is nil unless a backend call has outlived its deadline and not
// returned yet, or a stop gave up waiting for work that has not ended yet.
func (c *Controller) Stuck() error {
	var errs []error
	c.overdueMu.Lock()
	var oldest *backendCall
	for call := range c.overdue {
		if oldest == nil || call.deadline.Before(oldest.deadline) {
			oldest = call
		}
	}
	if oldest != nil {
		errs = append(errs, fmt.Errorf("%d backend call(s) running past their deadline, the oldest a %s call overdue since %s",
			len(c.overdue), oldest.operation, oldest.deadline.UTC().Format(time.RFC3339)))
	}
	c.overdueMu.Unlock()
	c.mu.Lock()
	abandoned := 0
	for _, idle := range c.abandoned {
		select {
		case <-idle:
		default:
			abandoned++
		}
	}
	c.mu.Unlock()
	if abandoned > 0 {
		errs = append(errs, errors.New("stopped without waiting for work that ignores cancellation; it has not ended yet"))
	}
	return errors.Join(errs...)
}

// Requeue has the controller look at claim again, as a change of it would:
// a Scope whose answer for the claim changed without the claim changing
// calls it. It does nothing while the controller does not lead.
func (c *Controller) Requeue(claim *corev1.PersistentVolumeClaim) {
	c.mu.Lock()
	t := c.term
	c.mu.Unlock()
	if t != nil {
		c.enqueueClaim(t, claim)
	}
}

func (c *Controller) config() Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}

// Reconfigure applies cfg to the running controller. It returns
// ErrRestartRequired, and changes nothing, when the provisioner name, the
// resync period or the leader election settings differ.
func (c *Controller) Reconfigure(cfg Config) error {
	c.mu.Lock()
	old := c.cfg
	cfg, err := CheckReconfigure(old, cfg)
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("cannot reconfigure %q: %w", c.name, err)
	}
	c.cfg = cfg
	c.claimRetries.Limiter().Retune(rateLimits(cfg.Retry))
	c.volumeRetries.Limiter().Retune(rateLimits(cfg.Retry))
	c.room.backoff.Retune(rateLimits(cfg.Retry))
	t := c.term
	if t != nil {
		t.resize(cfg)
	}
	c.mu.Unlock()

	// Work that the old configuration skipped or gave up on may be due now.
	revive := false
	if cfg.Retry.ProvisionFailureThreshold != old.Retry.ProvisionFailureThreshold {
		c.claimRetries.Revive(cfg.Retry.ProvisionFailureThreshold)
		revive = true
	}
	if cfg.Retry.DeleteFailureThreshold != old.Retry.DeleteFailureThreshold {
		c.volumeRetries.Revive(cfg.Retry.DeleteFailureThreshold)
		revive = true
	}
	unpaused := old.Paused && !cfg.Paused
	renamed := !slices.Equal(old.AdditionalProvisionerNames, cfg.AdditionalProvisionerNames)
	if renamed {
		c.refreshSubscriptions()
	}
	// Every volume gains or loses its finalizer now, not at the next resync.
	refinalize := old.Finalizer != cfg.Finalizer
	if t != nil && (revive || unpaused || renamed || refinalize) {
		c.enqueueAll(t)
	}
	return nil
}
