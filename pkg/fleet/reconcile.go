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
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/hostpathnodes"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// observation is what one reconcile found and did; the status is made of it.
type observation struct {
	// reason is the Ready condition's reason; Ready is True for Running and
	// Standby only.
	reason  string
	message string
	// leader is the Lease holder as this replica last saw it.
	leader string
	// retry asks for another reconcile later: the backend may come back.
	retry bool
	// leaderElectionDisabled: every replica works without a Lease.
	leaderElectionDisabled bool
	// running: the instance runs, whatever reason Ready has; a running one
	// whose backend is unavailable is no refusal.
	running bool
	// storage is the space the leader's last successful probe found, at
	// probedAt; nil when unknown.
	storage  *provisioning.Space
	probedAt time.Time
	// nodes counts the nodes of a hostPath backend; nil for other backends.
	nodes *v1alpha1.NodesStatus
}

// instanceSpec is what an instance is made of: its key in the registry (the
// object's name for the manager's instance, nodeKeyPrefix and the name for
// a node agent's), the backend it builds, the manager-wide parts of its
// Config and the part of the provisioner's claims and volumes it serves.
type instanceSpec struct {
	key      string
	backend  *v1alpha1.BackendSpec
	settings instanceSettings
	// scope is nil for the manager's instance.
	scope provisioning.Scope
}

// nodeKeyPrefix starts the registry key of a node agent's instance; no
// object name has a slash.
const nodeKeyPrefix = "node/"

// configOf is the ProvisionerConfig name of a registry key.
func configOf(key string) string {
	return strings.TrimPrefix(key, nodeKeyPrefix)
}

func refusal(reason string, err error) observation {
	return observation{reason: reason, message: err.Error(), retry: reason == v1alpha1.ReasonBackendUnavailable}
}

// reconcile brings the instance of one ProvisionerConfig in line with it and
// reports the outcome in its status. It reports whether to retry later.
func (m *Manager) reconcile(ctx context.Context, key string) (bool, error) {
	pc, err := m.lister.Get(key)
	if apierrors.IsNotFound(err) {
		m.stopInstances(ctx, key)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot get ProvisionerConfig %s: %w", key, err)
	}
	if pc.DeletionTimestamp != nil {
		m.stopInstances(ctx, key)
		if !m.settings.Roles.Manager || !m.owns(pc.Name) {
			return false, nil
		}
		return false, m.removeFinalizer(ctx, pc)
	}
	retry := false
	if m.agent != nil {
		retry = m.agent.Reconcile(ctx, pc)
	}
	if !m.settings.Roles.Manager {
		return retry, nil
	}
	if !m.owns(pc.Name) {
		// Another replica runs it and writes its status: hand it over.
		m.stop(ctx, pc.Name)
		return retry, nil
	}
	if !slices.Contains(pc.Finalizers, v1alpha1.InstanceCleanupFinalizer) {
		if pc, err = m.addFinalizer(ctx, pc); err != nil {
			return false, err
		}
	}
	obs := m.runInstance(ctx, pc, instanceSpec{key: pc.Name, backend: &pc.Spec.Backend, settings: m.managerSettings()})
	if pc.Spec.Backend.NodeHostPath() != nil {
		// The node agents serve it: the manager's coordinator reports
		// their nodes.
		obs = m.withNodes(pc, obs)
	}
	obs.leaderElectionDisabled = !m.settings.LeaderElection
	if err := m.writeStatus(ctx, pc, obs); err != nil {
		return false, err
	}
	return obs.retry || retry, nil
}

// stopInstances stops every instance of the ProvisionerConfig name in this
// process.
func (m *Manager) stopInstances(ctx context.Context, name string) {
	m.stop(ctx, name)
	m.stop(ctx, nodeKeyPrefix+name)
}

// managerSettings are the instance settings of the manager's instances.
func (m *Manager) managerSettings() instanceSettings {
	return instanceSettings{
		leaseEnabled:        m.settings.LeaderElection,
		namespace:           m.settings.Namespace,
		identity:            m.settings.Identity,
		legacyLockNamespace: m.settings.LegacyLockNamespace,
		probeInterval:       m.settings.BackendProbeInterval,
	}
}

// runInstance starts, re-tunes, restarts or stops the instance of spec of
// pc, and reports what it found.
func (m *Manager) runInstance(ctx context.Context, pc *v1alpha1.ProvisionerConfig, spec instanceSpec) observation {
	cfg, err := provisioningConfig(&pc.Spec, spec.settings)
	if err != nil {
		m.stop(ctx, spec.key)
		return refusal(v1alpha1.ReasonInvalidSpec, err)
	}
	if obs, refused := m.refuseConflicts(ctx, pc, spec.key); refused {
		return obs
	}
	inst, err := m.ensureInstance(ctx, pc, spec, cfg)
	switch {
	case errors.Is(err, errLeaseStillHeld):
		return refusal(v1alpha1.ReasonBackendStuck, err)
	case errors.Is(err, backend.ErrInvalidSpec), errors.Is(err, errInvalidController):
		return refusal(v1alpha1.ReasonInvalidSpec, err)
	case err != nil:
		return refusal(v1alpha1.ReasonBackendUnavailable, err)
	}
	return m.observeInstance(inst, cfg)
}

// refuseConflicts refuses pc, stopping its instance key, and reports so, when
// it shares a name, a Lease or a backend base with an older
// ProvisionerConfig or with an instance that still runs.
func (m *Manager) refuseConflicts(ctx context.Context, pc *v1alpha1.ProvisionerConfig, key string) (observation, bool) {
	all, err := m.lister.List(labels.Everything())
	if err != nil {
		return refusal(v1alpha1.ReasonBackendUnavailable, fmt.Errorf("cannot list ProvisionerConfigs: %w", err)), true
	}
	for _, c := range conflicts {
		if holder, shared := olderHolder(pc, all, c.shares); holder != nil {
			m.stop(ctx, key)
			return refusal(c.reason, fmt.Errorf("%s %s the older ProvisionerConfig %s", shared, c.verb, holder.Name)), true
		}
	}
	// The older object may still be stopping its instance: two instances of
	// one name or one Lease in one process would both lead, under the same
	// identity, and two on one base would reclaim each other's volumes.
	for _, c := range conflicts {
		if other, shared := m.instanceConflict(pc, c.shares); other != "" {
			obs := refusal(c.reason, fmt.Errorf("%s %s ProvisionerConfig %s, whose instance still runs", shared, c.verb, other))
			obs.retry = true
			return obs, true
		}
	}
	return observation{}, false
}

// observeInstance reports the state of the instance inst of cfg. Only
// a leader probes its backend, so only a leader reports it unavailable.
func (m *Manager) observeInstance(inst *instance, cfg provisioning.Config) observation {
	health := inst.controller.Health()
	obs := observation{leader: inst.currentLeader(), running: true, storage: health.Space, probedAt: health.ProbedAt}
	switch stuck := inst.controller.Stuck(); {
	case stuck != nil:
		obs.reason, obs.message = v1alpha1.ReasonBackendStuck, stuck.Error()
	case cfg.Paused:
		obs.reason, obs.message = v1alpha1.ReasonPaused, "spec.paused is true: nothing is provisioned or deleted"
	case health.Err != nil:
		obs.reason, obs.message = v1alpha1.ReasonBackendUnavailable, health.Err.Error()
	case inst.controller.IsLeader():
		obs.reason, obs.message = v1alpha1.ReasonRunning, "provisioning as "+m.settings.Identity
	default:
		obs.reason, obs.message = v1alpha1.ReasonStandby, "waiting for the Lease of another replica"
	}
	return obs
}

// replace stops inst so that an instance with cfg can start in its place.
// With unchanged lease settings the replacement inherits its Lease: it is not
// released in between, so no other replica can win it.
func (m *Manager) replace(key string, inst *instance, cfg provisioning.Config) {
	if inst.cfg.LeaderElection == cfg.LeaderElection {
		inst.controller.KeepLease()
	}
	m.instances.Stop(key, inst.token)
}

// errInvalidController means the provision controller refused its Config.
var errInvalidController = errors.New("invalid provision controller configuration")

// errLeaseStillHeld means that a stopped instance gave up on hung backend
// work and its Lease has not expired yet.
var errLeaseStillHeld = errors.New("the stopped instance gave up on backend work that ignores cancellation")

// ensureInstance makes the instance of pc run with cfg: a live Reconfigure when
// possible, otherwise a restart. Only the reconcile of pc touches its
// instance.
func (m *Manager) ensureInstance(ctx context.Context, pc *v1alpha1.ProvisionerConfig, spec instanceSpec, cfg provisioning.Config) (*instance, error) {
	fingerprint, err := json.Marshal(spec.backend)
	if err != nil {
		return nil, fmt.Errorf("cannot encode spec.backend: %w", err)
	}
	if inst := m.instances.Get(spec.key); inst != nil {
		switch current, err := m.updateInstance(ctx, pc, spec.key, inst, cfg, string(fingerprint)); {
		case err != nil:
			return nil, err
		case current:
			return inst, nil
		}
	}
	if err := m.leaseFree(spec.key); err != nil {
		return nil, err
	}
	return m.startInstance(ctx, pc, spec, cfg, string(fingerprint))
}

// updateInstance brings the instance inst of pc in line with cfg and
// reports whether it runs with cfg afterwards. When it cannot, it is stopped
// (or ended by itself), so that an instance with cfg starts in its place.
func (m *Manager) updateInstance(ctx context.Context, pc *v1alpha1.ProvisionerConfig, key string, inst *instance, cfg provisioning.Config, fingerprint string) (bool, error) {
	logger := klog.FromContext(ctx)
	exited, runErr := inst.exited()
	switch {
	case exited:
		logger.Info("Provisioner instance ended by itself: starting it again", "err", runErr)
		m.instances.Stop(key, inst.token)
	case inst.backend != fingerprint:
		logger.Info("Backend changed: restarting the provisioner instance")
		m.replace(key, inst, cfg)
	case inst.generation == pc.Generation && reflect.DeepEqual(inst.cfg, cfg):
		return true, nil
	default:
		err := inst.controller.Reconfigure(cfg)
		if err == nil {
			inst.setApplied(cfg, pc.Generation)
			logger.Info("Re-tuned provisioner instance", "generation", pc.Generation)
			return true, nil
		}
		if !errors.Is(err, provisioning.ErrRestartRequired) {
			return false, fmt.Errorf("%w: %w", errInvalidController, err)
		}
		logger.Info("Restarting the provisioner instance for settings it cannot change live")
		m.replace(key, inst, cfg)
	}
	return false, nil
}

// leaseFree is nil unless a stopped instance of key gave up on hung work and
// its Lease has not expired yet; key is then reconciled again once it has.
func (m *Manager) leaseFree(key string) error {
	until := m.instances.LeaseHeldUntil(key)
	if !time.Now().Before(until) {
		return nil
	}
	m.queue.AddAfter(configOf(key), time.Until(until))
	return fmt.Errorf("%w: its replacement starts once its Lease expired, at %s", errLeaseStillHeld, until.UTC().Format(time.RFC3339))
}

// startInstance starts the instance of spec of pc with cfg, whose
// controller is the manager's coordinator of a hostPath backend, or else a
// provision controller with the backend of spec.
func (m *Manager) startInstance(ctx context.Context, pc *v1alpha1.ProvisionerConfig, spec instanceSpec, cfg provisioning.Config, fingerprint string) (*instance, error) {
	key := pc.Name
	if spec.scope == nil && m.cacheScope != nil && !m.cacheScope.covers(pc) {
		// The caches hold pc's objects before its controller acts: a new
		// ProvisionerConfig's come with the refresh this starts, which the
		// controller waits for (SharedInformers.Complete). Most starts find
		// them covered already and list nothing.
		m.updateCacheScope(ctx)
	}
	client, err := m.deps.tenants.clientFor(cfg.ProvisionerName)
	if err != nil {
		return nil, err
	}
	inst := &instance{cfg: cfg, backend: fingerprint, generation: pc.Generation}
	if !cfg.LeaderElection.Enabled {
		inst.leader = m.settings.Identity
	}
	onLeaderChange := func(holder string) {
		inst.setLeader(holder)
		m.queue.Add(key)
	}
	recorder := m.events.NewRecorder(m.scheme, corev1.EventSource{Component: "provfleet/" + cfg.ProvisionerName})
	if spec.backend.NodeHostPath() != nil && spec.scope == nil {
		inst.controller, err = m.nodes.NewCoordinator(pc.Name, cfg, spec.backend.HostPath, hostpathnodes.CoordinatorDeps{
			Client: client, Informers: m.shared, EventRecorder: recorder, OnLeaderChange: onLeaderChange, Metrics: m.metrics,
		})
	} else {
		err = m.buildController(ctx, pc, spec, cfg, inst, provisioning.Dependencies{
			Client: client, Informers: m.shared, EventRecorder: recorder, Metrics: m.metrics, OnLeaderChange: onLeaderChange,
			OnStuck: func() { m.queue.Add(key) }, OnHealthChange: func() { m.queue.Add(key) }, Scope: spec.scope,
		})
	}
	if err != nil {
		return nil, err
	}
	started := m.instances.Start(ctx, spec.key, inst)
	klog.FromContext(ctx).Info("Started provisioner instance", "provisioner", cfg.ProvisionerName, "generation", pc.Generation, "token", started.token)
	return started, nil
}

// buildController builds the backend of spec and the provision controller
// that runs it into inst.
func (m *Manager) buildController(ctx context.Context, pc *v1alpha1.ProvisionerConfig, spec instanceSpec, cfg provisioning.Config, inst *instance, deps provisioning.Dependencies) error {
	provisioner, err := buildBackend(ctx, m.custom, BackendRequest{
		Spec:             spec.backend,
		ProvisionerNames: pc.Spec.ProvisionerNames(),
		Volumes:          m.volumes,
		HostPathRoot:     m.settings.HostPathRoot,
		NodeName:         m.settings.NodeName,
	})
	if err != nil {
		return err
	}
	deps.Provisioner = provisioner
	ctrl, err := m.deps.tenants.newController(cfg, deps)
	if err != nil {
		closeBackend(provisioner)
		return fmt.Errorf("%w: %w", errInvalidController, err)
	}
	inst.controller, inst.provisioner, inst.release = ctrl, provisioner, func() { closeBackend(provisioner) }
	return nil
}

// setApplied records a live re-tune. Only the reconcile of inst's object writes
// it, but the reconciles of other objects read it: see applied.
func (inst *instance) setApplied(cfg provisioning.Config, generation int64) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	inst.cfg, inst.generation = cfg, generation
}

// applied returns the Config inst runs with, for the reconciles of other
// objects.
func (inst *instance) applied() provisioning.Config {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.cfg
}

// conflicts are what two ProvisionerConfigs must not share; of two objects
// that do, the older runs and the later is refused with reason.
var conflicts = []struct {
	reason string
	// shares describes what a and b share, "" when nothing; verb joins the
	// description to the other object in the refusal.
	shares func(a, b *v1alpha1.ProvisionerConfigSpec) string
	verb   string
}{
	{reason: v1alpha1.ReasonProvisionerNameConflict, shares: sharedName, verb: "is used by"},
	{reason: v1alpha1.ReasonLeaseNameConflict, shares: sharedLease, verb: "is used by"},
	{reason: v1alpha1.ReasonBackendOverlap, shares: overlappingBases, verb: "of"},
}

// sharedName describes a provisioner name that a and b answer to.
func sharedName(a, b *v1alpha1.ProvisionerConfigSpec) string {
	names := a.ProvisionerNames()
	for _, name := range b.ProvisionerNames() {
		if slices.Contains(names, name) {
			return fmt.Sprintf("provisioner name %q", name)
		}
	}
	return ""
}

// sharedLease describes the Lease that a and b would both elect their leader
// with under different provisioner names.
func sharedLease(a, b *v1alpha1.ProvisionerConfigSpec) string {
	lease := provisioning.LeaseName(string(a.ProvisionerName))
	if a.ProvisionerName == b.ProvisionerName || lease != provisioning.LeaseName(string(b.ProvisionerName)) {
		return ""
	}
	return fmt.Sprintf("Lease name %q (also that of provisioner name %q)", lease, b.ProvisionerName)
}

// instanceConflict returns another ProvisionerConfig whose instance
// shares something with pc, and what.
func (m *Manager) instanceConflict(pc *v1alpha1.ProvisionerConfig, shares func(a, b *v1alpha1.ProvisionerConfigSpec) string) (string, string) {
	var other, shared string
	m.instances.Each(func(key string, inst *instance) {
		if configOf(key) == pc.Name || other != "" {
			return
		}
		if s := shares(&pc.Spec, inst.spec()); s != "" {
			other, shared = configOf(key), s
		}
	})
	return other, shared
}

// spec returns the parts of the spec inst runs with that conflicts compare.
func (inst *instance) spec() *v1alpha1.ProvisionerConfigSpec {
	cfg := inst.applied()
	spec := &v1alpha1.ProvisionerConfigSpec{ProvisionerName: v1alpha1.ProvisionerName(cfg.ProvisionerName)}
	for _, name := range cfg.AdditionalProvisionerNames {
		spec.AdditionalProvisionerNames = append(spec.AdditionalProvisionerNames, v1alpha1.ProvisionerName(name))
	}
	// inst.backend was encoded from a BackendSpec by ensureInstance.
	_ = json.Unmarshal([]byte(inst.backend), &spec.Backend)
	return spec
}

// olderHolder returns the oldest other ProvisionerConfig that is older than pc
// (by creationTimestamp, then name) and shares something with pc, and what.
func olderHolder(pc *v1alpha1.ProvisionerConfig, all []*v1alpha1.ProvisionerConfig, shares func(a, b *v1alpha1.ProvisionerConfigSpec) string) (*v1alpha1.ProvisionerConfig, string) {
	var holder *v1alpha1.ProvisionerConfig
	var shared string
	for _, other := range all {
		if other.Name == pc.Name || !older(other, pc) || (holder != nil && !older(other, holder)) {
			continue
		}
		if s := shares(&pc.Spec, &other.Spec); s != "" {
			holder, shared = other, s
		}
	}
	return holder, shared
}

func older(a, b *v1alpha1.ProvisionerConfig) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func (m *Manager) addFinalizer(ctx context.Context, pc *v1alpha1.ProvisionerConfig) (*v1alpha1.ProvisionerConfig, error) {
	updated, err := m.patchFinalizers(ctx, pc, append(slices.Clone(pc.Finalizers), v1alpha1.InstanceCleanupFinalizer))
	if err != nil {
		return nil, fmt.Errorf("cannot add finalizer %s: %w", v1alpha1.InstanceCleanupFinalizer, err)
	}
	return updated, nil
}

// patchFinalizers sets the finalizers of pc with a merge patch at its
// resource version: an update of the whole object would write back its
// spec, durations re-encoded ("15m" as "15m0s"), and bump its generation.
func (m *Manager) patchFinalizers(ctx context.Context, pc *v1alpha1.ProvisionerConfig, finalizers []string) (*v1alpha1.ProvisionerConfig, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": pc.ResourceVersion}})
	if err != nil {
		return nil, fmt.Errorf("cannot encode the finalizers: %w", err)
	}
	return m.deps.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Patch(ctx, pc.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: component})
}

// removeFinalizer lets a deleted ProvisionerConfig go once its instance
// stopped.
func (m *Manager) removeFinalizer(ctx context.Context, pc *v1alpha1.ProvisionerConfig) error {
	if !slices.Contains(pc.Finalizers, v1alpha1.InstanceCleanupFinalizer) {
		return nil
	}
	finalizers := slices.DeleteFunc(slices.Clone(pc.Finalizers), func(f string) bool { return f == v1alpha1.InstanceCleanupFinalizer })
	_, err := m.patchFinalizers(ctx, pc, finalizers)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cannot remove finalizer %s: %w", v1alpha1.InstanceCleanupFinalizer, err)
	}
	klog.FromContext(ctx).Info("Released deleted ProvisionerConfig")
	return nil
}
