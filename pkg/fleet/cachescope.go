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
	"fmt"
	"maps"
	"path"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/cachetrim"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/hostpathnodes"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// cacheScope is what the manager's caches of claims and PersistentVolumes
// keep of the cluster: what the controllers of the ProvisionerConfigs this
// replica serves read (see keepClaim and keepVolume), so that a manager next to the objects of many other
// provisioners does not hold them. It is safe for concurrent use: the
// informers ask it for every object they decode.
type cacheScope struct {
	current atomic.Pointer[servedSet]
	// refresh has the limited informers take the current scope, complete
	// tells when they hold it; nil until they are limited.
	refresh  func()
	complete func() bool
	// updating makes updates one at a time: a later one never sets a scope
	// read before an earlier one's.
	updating sync.Mutex
}

// servedSet is what a set of ProvisionerConfigs serves.
type servedSet struct {
	// names are the provisioner names they answer to, finalizers the
	// intent finalizers of those names.
	names, finalizers map[string]bool
	// bases are their backends' base directories, clean; server is empty
	// for a directory of a node's (any node's) file system.
	bases map[base]bool
}

// Update sets the ProvisionerConfigs served. When that changes what the
// caches keep, they refresh (cachetrim.OnlyChanging): what comes in is
// fetched, what goes is dropped, and nothing else is delivered again.
func (s *cacheScope) Update(configs []*v1alpha1.ProvisionerConfig) {
	next := servedBy(configs)
	previous := s.current.Swap(next)
	if previous != nil && !previous.equal(next) && s.refresh != nil {
		s.refresh()
	}
}

// updateFrom sets the ProvisionerConfigs served to those list returns.
func (s *cacheScope) updateFrom(list func() ([]*v1alpha1.ProvisionerConfig, error)) error {
	s.updating.Lock()
	defer s.updating.Unlock()
	configs, err := list()
	if err != nil {
		return err
	}
	s.Update(configs)
	return nil
}

// limit limits the informers of factory to s or, when node is not nil, to
// what either s or node keeps, as a process in both roles needs.
func (s *cacheScope) limit(factory informers.SharedInformerFactory, node provisioning.Scope) {
	// Classes are kept whole: they are few, and a coordinator reads the
	// class of a claim when it syncs without watching classes, so a class
	// that came only with the list after its ProvisionerConfig would leave
	// its claims waiting.
	keep := cachetrim.Keep{Claim: s.keepClaim, Volume: s.keepVolume}
	if node != nil {
		keep.Claim = func(claim *corev1.PersistentVolumeClaim) bool { return s.keepClaim(claim) || node.Claim(claim) }
		keep.Volume = func(volume *corev1.PersistentVolume) bool { return s.keepVolume(volume) || node.Volume(volume) }
	}
	s.refresh, s.complete = cachetrim.Limit(factory, keep)
}

func servedBy(configs []*v1alpha1.ProvisionerConfig) *servedSet {
	set := &servedSet{names: map[string]bool{}, finalizers: map[string]bool{}, bases: map[base]bool{}}
	for _, pc := range configs {
		for _, name := range pc.Spec.ProvisionerNames() {
			set.names[name] = true
			set.finalizers[provisioning.IntentFinalizer(name)] = true
		}
		for _, b := range bases(&pc.Spec.Backend) {
			set.bases[base{server: b.server, path: path.Clean(b.path)}] = true
		}
	}
	return set
}

// covers reports whether the current scope holds every name and base of
// pc, so that setting it again would change nothing.
func (s *cacheScope) covers(pc *v1alpha1.ProvisionerConfig) bool {
	current := s.current.Load()
	if current == nil {
		return false
	}
	own := servedBy([]*v1alpha1.ProvisionerConfig{pc})
	for name := range own.names {
		if !current.names[name] {
			return false
		}
	}
	for b := range own.bases {
		if !current.bases[b] {
			return false
		}
	}
	return true
}

func (s *servedSet) equal(other *servedSet) bool {
	return maps.Equal(s.names, other.names) && maps.Equal(s.finalizers, other.finalizers) && maps.Equal(s.bases, other.bases)
}

// keepClaim keeps the claims that a served provisioner's controllers
// route, read and provision: those whose storage-provisioner annotation,
// the GA or the beta one, names it, and those that carry its intent
// finalizer, whatever they ask for now. A clone's source claim is one of
// them when it can be cloned at all: its volume must be the provisioner's.
func (s *cacheScope) keepClaim(claim *corev1.PersistentVolumeClaim) bool {
	set := s.current.Load()
	if set == nil {
		return false
	}
	for _, ann := range []string{provisioning.AnnStorageProvisioner, provisioning.AnnBetaStorageProvisioner} {
		if name, ok := claim.Annotations[ann]; ok && set.names[name] {
			return true
		}
	}
	for _, f := range claim.Finalizers {
		if set.finalizers[f] {
			return true
		}
	}
	return false
}

// keepVolume keeps the PersistentVolumes a served provisioner made, and
// every volume, of any provisioner, whose directory is a served backend's
// base or lies inside it: a new directory there is checked against those
// (backend.PathIndex), and one made inside another volume's would mix two
// volumes' data. A volume whose directory holds a base needs no keeping:
// the backends do not count it as overlapping their volumes. Host paths
// count on every node, as bases do. Every hostPath, local or NFS volume of
// no provisioner is kept, whatever its path: those made by hand are the
// likeliest to lie in a base that comes into scope later, and are few.
func (s *cacheScope) keepVolume(volume *corev1.PersistentVolume) bool {
	set := s.current.Load()
	if set == nil {
		return false
	}
	if set.names[volume.Annotations[provisioning.AnnDynamicallyProvisioned]] {
		return true
	}
	var at base
	if hostPath, ok := backend.HostVolumePath(volume); ok {
		at.path = hostPath
	} else if volume.Spec.NFS != nil {
		at = base{server: backend.NFSServerOf(volume.Spec.NFS, volume.Spec.MountOptions), path: volume.Spec.NFS.Path}
	}
	switch {
	case !path.IsAbs(at.path):
		return false
	case volume.Annotations[provisioning.AnnDynamicallyProvisioned] == "":
		return true
	}
	for dir := path.Clean(at.path); ; dir = path.Dir(dir) {
		if set.bases[base{server: at.server, path: dir}] {
			return true
		}
		if dir == "/" {
			return false
		}
	}
}

// limitCaches limits the claim and volume caches to what the roles
// of the process read: a node agent's to its node (for good), the
// manager's to cacheScope, a process in both roles to either; and
// registers provfleet_cached_objects with reg.
func (m *Manager) limitCaches(reg prometheus.Registerer) error {
	if err := reg.Register(newCachedObjects(m)); err != nil {
		return fmt.Errorf("cannot register provfleet_cached_objects: %w", err)
	}
	if !m.settings.Roles.Manager {
		hostpathnodes.LimitCacheToNode(m.core, m.settings.NodeName)
		return nil
	}
	var node provisioning.Scope
	if m.settings.Roles.Node {
		node = hostpathnodes.NodeCacheScope(m.settings.NodeName)
	}
	m.cacheScope = &cacheScope{}
	m.cacheScope.limit(m.core, node)
	return nil
}

// cachedObjects collects provfleet_cached_objects when scraped.
type cachedObjects struct {
	m    *Manager
	desc *prometheus.Desc
}

func newCachedObjects(m *Manager) cachedObjects {
	return cachedObjects{m: m, desc: prometheus.NewDesc("provfleet_cached_objects",
		"Objects in this process's cache of claims, PersistentVolumes and StorageClasses, by resource.", []string{"resource"}, nil)}
}

func (c cachedObjects) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c cachedObjects) Collect(ch chan<- prometheus.Metric) {
	for resource, inf := range map[string]cache.SharedIndexInformer{
		"persistentvolumeclaims": c.m.shared.Claims, "persistentvolumes": c.m.shared.Volumes, "storageclasses": c.m.shared.Classes,
	} {
		c.m.fleetMetrics.gauge(ch, c.desc, len(inf.GetStore().ListKeys()), resource)
	}
}

// scopeCaches sets the scope of the caches once the ProvisionerConfig
// cache synced, before the limited caches start, so that their first list
// is already limited; then again after each change of a ProvisionerConfig
// until ctx ends, changes that come meanwhile coalesced into one more
// setting. Without the manager's role it does nothing. It returns the
// function that waits until it stopped.
func (m *Manager) scopeCaches(ctx context.Context) (wait func()) {
	if m.cacheScope == nil {
		return func() {}
	}
	changed := make(chan struct{}, 1)
	signal := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handle, err := m.configInf.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc: signal, UpdateFunc: func(_, newObj any) { signal(newObj) }, DeleteFunc: signal,
	}, cache.HandlerOptions{Logger: ptr.To(klog.FromContext(ctx))})
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot follow the ProvisionerConfigs that the caches keep the objects of")
		return func() {}
	}
	if !cache.WaitForCacheSync(ctx.Done(), m.configInf.HasSynced) {
		_ = m.configInf.RemoveEventHandler(handle)
		return func() {}
	}
	m.updateCacheScope(ctx)
	var done sync.WaitGroup
	done.Go(func() {
		defer func() { _ = m.configInf.RemoveEventHandler(handle) }()
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				m.updateCacheScope(ctx)
			}
		}
	})
	return done.Wait
}

// updateCacheScope sets the scope of the caches to the ProvisionerConfigs
// this replica serves: every one.
func (m *Manager) updateCacheScope(ctx context.Context) {
	if m.cacheScope == nil {
		return
	}
	if err := m.cacheScope.updateFrom(m.all); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot list the ProvisionerConfigs that the caches keep the objects of")
	}
}
