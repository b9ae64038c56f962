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
	"fmt"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/cachetrim"
	"github.com/provfleet/provfleet/internal/leaderelection"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// defaultNodeLeaseDuration is how long a node agent's Lease lasts unrenewed
// by default, as the kubelet's node Lease does.
const defaultNodeLeaseDuration = 40 * time.Second

// nodeAgent is the node role of a Manager: while it holds its node's Lease
// it runs an instance of every hostPath ProvisionerConfig that selects the
// node, and publishes how each runs with the Lease's renewals.
type nodeAgent struct {
	node    string
	elector *leaderelection.LeaderElector

	// mu orders the reconciles that start the node's instances (readers)
	// and the end of a term, which stops them all (the writer): no instance
	// starts once the Lease is lost.
	mu   sync.RWMutex
	held bool

	reportMu sync.Mutex
	reports  nodeReport
	// released are, by ProvisionerConfig, the volumes of the node's
	// removal list whose directories this agent released, for the manager
	// to drop from the list.
	released releasedVolumes
}

// removedReleaser is a backend that releases the directories of the
// volumes whose PersistentVolumes the manager deleted while their node was
// removed; it returns the names that need no more work.
type removedReleaser interface {
	ReleaseRemoved(ctx context.Context, removed []backend.RemovedVolume) ([]string, error)
}

// addNodeInformers sets up the informers of the Nodes, of the node agents'
// Leases and of the removal lists: all of them for the manager, which
// reports every node; a node agent alone watches only its own.
func (m *Manager) addNodeInformers() {
	var tweak []informers.SharedInformerOption
	var leaseTweak []informers.SharedInformerOption
	if !m.settings.Roles.Manager {
		tweak = onlyNamed(m.settings.NodeName)
		leaseTweak = onlyNamed(NodeLeaseName(m.settings.NodeName))
	}
	m.nodes = informers.NewSharedInformerFactoryWithOptions(m.deps.client, 0,
		append(tweak, informers.WithTransform(cachetrim.Transform))...)
	m.shared.Nodes = m.nodes.Core().V1().Nodes().Informer()
	m.nodeLeases = informers.NewSharedInformerFactoryWithOptions(m.deps.client, 0,
		append(leaseTweak, informers.WithNamespace(m.settings.NodeLeaseNamespace))...)
	m.nodeLeaseInf = m.nodeLeases.Coordination().V1().Leases().Informer()
	listTweak := []informers.SharedInformerOption{informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = LabelRemovedList + "=true"
	})}
	if !m.settings.Roles.Manager {
		listTweak = onlyNamed(RemovedListName(m.settings.NodeName))
	}
	m.removedLists = informers.NewSharedInformerFactoryWithOptions(m.deps.client, 0,
		append(listTweak, informers.WithNamespace(m.settings.NodeLeaseNamespace))...)
	m.removedListInf = m.removedLists.Core().V1().ConfigMaps().Informer()
}

// onlyNamed limits an informer to the object of one name.
func onlyNamed(name string) []informers.SharedInformerOption {
	return []informers.SharedInformerOption{informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})}
}

// newNodeAgent returns the node role of m, electing itself on the node's
// Lease.
func (m *Manager) newNodeAgent() (*nodeAgent, error) {
	client, err := m.deps.clientFor("node-agent")
	if err != nil {
		return nil, err
	}
	a := &nodeAgent{node: m.settings.NodeName, reports: nodeReport{}, released: releasedVolumes{}}
	d := m.settings.NodeLeaseDuration
	a.elector = leaderelection.NewLeaderElector(leaderelection.Config{
		Client:        client,
		Lease:         types.NamespacedName{Namespace: m.settings.NodeLeaseNamespace, Name: NodeLeaseName(a.node)},
		Identity:      m.settings.Identity,
		LeaseDuration: d,
		RenewDeadline: d * 3 / 4,
		RetryPeriod:   d / 4,
		Leases:        leaderelection.NewLeaseRouter(m.nodeLeaseInf),
		Callbacks:     leaderelection.LeaderCallbacks{OnStartedLeading: m.leadNode},
		Annotate:      a.annotate,
	})
	return a, nil
}

// leadNode starts serving the node once its Lease is held, and returns the
// function that stops every instance of the node when the term ends.
func (m *Manager) leadNode(ctx context.Context) (waitStopped func()) {
	a := m.agent
	a.mu.Lock()
	a.held = true
	a.mu.Unlock()
	klog.FromContext(ctx).Info("Holding the node's Lease: serving its hostPath provisioners", "node", a.node)
	m.enqueueHostPath()
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.held = false
		// Each holds the registry's lock, which Stop takes.
		stopping := map[string]uint64{}
		m.instances.Each(func(key string, r *running) {
			if key != configOf(key) {
				stopping[key] = r.token
			}
		})
		for key, token := range stopping {
			m.handovers.close(configOf(key))
			m.instances.Stop(key, token)
			m.handovers.forget(configOf(key))
		}
		a.reportMu.Lock()
		a.reports = nodeReport{}
		a.reportMu.Unlock()
		klog.FromContext(ctx).Info("Stopped serving the node", "node", a.node)
	}
}

// annotate puts the agent's report on its node Lease, with the removed
// volumes it released.
func (a *nodeAgent) annotate(annotations map[string]string) {
	a.reportMu.Lock()
	defer a.reportMu.Unlock()
	data, err := json.Marshal(a.reports)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("cannot encode the node report: %w", err))
		return
	}
	annotations[AnnNodeReport] = string(data)
	if len(a.released) == 0 {
		delete(annotations, AnnReleasedVolumes)
		return
	}
	if data, err = json.Marshal(a.released); err == nil {
		annotations[AnnReleasedVolumes] = string(data)
	}
}

// releaseRemoved has the instance key of the ProvisionerConfig name release
// the directories of the volumes the manager deleted while this node was
// removed, as the node's removal list names them, and reports whether to
// retry.
func (m *Manager) releaseRemoved(ctx context.Context, name, key string) bool {
	a := m.agent
	list, err := m.removedListOf(a.node)
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot read the removed volumes of the node")
		return false
	}
	pending := a.pendingRelease(name, list[name])
	r := m.instances.Get(key)
	if r == nil || len(pending) == 0 {
		return false
	}
	releaser, ok := r.provisioner.(removedReleaser)
	if !ok {
		return false
	}
	request := make([]backend.RemovedVolume, 0, len(pending))
	for _, v := range pending {
		request = append(request, backend.RemovedVolume{PVName: v.Name, OnDelete: v.OnDelete})
	}
	released, err := releaser.ReleaseRemoved(ctx, request)
	if len(released) > 0 {
		klog.FromContext(ctx).Info("Released the directories of volumes deleted while the node was removed", "volumes", released)
		a.reportMu.Lock()
		for _, v := range pending {
			if slices.Contains(released, v.Name) {
				a.released[name] = append(a.released[name], v.id())
			}
		}
		a.reportMu.Unlock()
		a.elector.RenewSoon()
	}
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot release the directories of volumes deleted while the node was removed")
		return true
	}
	return false
}

// pendingRelease forgets the released volumes of the ProvisionerConfig
// name that its list no longer names, as the manager dropped them, and
// returns those of listed not released yet.
func (a *nodeAgent) pendingRelease(name string, listed []removedVolume) []removedVolume {
	a.reportMu.Lock()
	defer a.reportMu.Unlock()
	a.released[name] = slices.DeleteFunc(a.released[name], func(id volumeID) bool {
		return !slices.ContainsFunc(listed, func(v removedVolume) bool { return v.id() == id })
	})
	if len(a.released[name]) == 0 {
		delete(a.released, name)
	}
	var pending []removedVolume
	for _, v := range listed {
		if !slices.Contains(a.released[name], v.id()) {
			pending = append(pending, v)
		}
	}
	return pending
}

// removedListOf returns the removal list of node from the cache.
func (m *Manager) removedListOf(node string) (removedList, error) {
	obj, exists, err := m.removedListInf.GetStore().GetByKey(m.settings.NodeLeaseNamespace + "/" + RemovedListName(node))
	if err != nil || !exists {
		return removedList{}, err
	}
	cm, _ := obj.(*corev1.ConfigMap)
	return readRemovedList(cm)
}

// report records how this node runs the ProvisionerConfig name; nil
// forgets it. A change other than the space is published at once, the
// space with the next renewal.
func (a *nodeAgent) report(name string, r *provisionerReport) {
	a.reportMu.Lock()
	old, had := a.reports[name]
	if r == nil {
		delete(a.reports, name)
	} else {
		a.reports[name] = *r
	}
	a.reportMu.Unlock()
	switch {
	case r == nil && !had, r != nil && had && old.Generation == r.Generation && old.Reason == r.Reason && old.Message == r.Message:
		return
	}
	a.elector.RenewSoon()
}

// reconcileNode runs, re-tunes or stops this node's instance of pc, and
// reports whether to retry later. Only a holder of the node's Lease runs
// instances.
func (m *Manager) reconcileNode(ctx context.Context, pc *v1alpha1.ProvisionerConfig) bool {
	a := m.agent
	a.mu.RLock()
	defer a.mu.RUnlock()
	key := nodeUnitPrefix + pc.Name
	backendSpec, err := m.nodeBackend(pc)
	if !a.held || (backendSpec == nil && err == nil) {
		m.stop(ctx, key)
		a.report(pc.Name, nil)
		return false
	}
	var obs observation
	if err != nil {
		m.stop(ctx, key)
		obs = refusal(v1alpha1.ReasonInvalidSpec, err)
	} else {
		obs = m.runUnit(ctx, pc, unit{
			key:      key,
			backend:  backendSpec,
			settings: instanceSettings{identity: m.settings.Identity, probeInterval: m.settings.BackendProbeInterval},
			scope:    m.nodeScopeOf(pc.Name),
		})
		if obs.running {
			m.handovers.open(pc.Name)
		}
	}
	r := &provisionerReport{Generation: pc.Generation, Reason: obs.reason, Message: obs.message}
	if obs.storage != nil {
		r.Available, r.Total = &obs.storage.AvailableBytes, &obs.storage.TotalBytes
		r.ProbedAt = &metav1.Time{Time: obs.probedAt}
	}
	a.report(pc.Name, r)
	if obs.running && m.releaseRemoved(ctx, pc.Name, key) {
		return true
	}
	return obs.retry
}

// nodeBackend is the backend this node's instance of pc builds: its
// hostPath with the node's path and name. It is nil, without an error, when
// pc does not select this node or is not a hostPath one.
func (m *Manager) nodeBackend(pc *v1alpha1.ProvisionerConfig) (*v1alpha1.BackendSpec, error) {
	spec := pc.Spec.Backend.NodeHostPath()
	if spec == nil {
		return nil, nil
	}
	node, err := m.ownNode()
	if node == nil || err != nil {
		return nil, err
	}
	selected, err := selectsNode(spec, node)
	if !selected || err != nil {
		return nil, err
	}
	paths, err := nodePaths(spec, node)
	if err != nil {
		return nil, err
	}
	classes, err := classPaths(spec, node)
	if err != nil {
		return nil, err
	}
	var ownClasses []v1alpha1.HostPathStorageClass
	for _, class := range spec.StorageClasses {
		first, additional := v1alpha1.SplitPaths(classes[class.StorageClassName])
		ownClasses = append(ownClasses, v1alpha1.HostPathStorageClass{StorageClassName: class.StorageClassName, Path: first, AdditionalPaths: additional})
	}
	first, additional := v1alpha1.SplitPaths(paths)
	// Only what the backend reads: a selector edit restarts nothing.
	own := &v1alpha1.HostPathBackend{
		Path:              first,
		AdditionalPaths:   additional,
		StorageClasses:    ownClasses,
		NodeAffinityKey:   spec.NodeAffinityKey,
		VolumeType:        spec.VolumeType,
		NodeName:          node.Name,
		PathPattern:       spec.PathPattern,
		OnDelete:          spec.OnDelete,
		Capacity:          spec.Capacity,
		VolumeDirectory:   spec.VolumeDirectory,
		LocalPathPatterns: spec.LocalPathPatterns,

		AdoptRetainedDirectories: spec.AdoptRetainedDirectories,
	}
	return &v1alpha1.BackendSpec{HostPath: own}, nil
}

// ownNode is the Node this agent runs on, nil until it exists.
func (m *Manager) ownNode() (*corev1.Node, error) {
	obj, exists, err := m.shared.Nodes.GetStore().GetByKey(m.settings.NodeName)
	if err != nil || !exists {
		return nil, err
	}
	node, _ := obj.(*corev1.Node)
	return node, nil
}

// nodeScope is the part of a hostPath provisioner's claims and volumes one
// node's agent serves: the claims selected to the node and the volumes on it.
type nodeScope string

func (n nodeScope) Claim(claim *corev1.PersistentVolumeClaim) bool {
	return claim.Annotations[provisioning.AnnSelectedNode] == string(n)
}

func (n nodeScope) Volume(volume *corev1.PersistentVolume) bool {
	return backend.VolumeNode(volume) == string(n)
}

// nodeScopeOf is the scope of this node's instance of the ProvisionerConfig
// config: with both roles, also the claims the process's coordinator hands
// over to it.
func (m *Manager) nodeScopeOf(config string) provisioning.Scope {
	if m.handovers == nil {
		return nodeScope(m.agent.node)
	}
	return handoverScope{node: m.agent.node, config: config, handovers: m.handovers}
}

// requeueOnNode has this node's instance of the ProvisionerConfig config look
// at claim, which the coordinator handed over to it.
func (m *Manager) requeueOnNode(config string, claim *corev1.PersistentVolumeClaim) {
	r := m.instances.Get(nodeUnitPrefix + config)
	if r == nil {
		return
	}
	if q, ok := r.instance.(interface {
		Requeue(*corev1.PersistentVolumeClaim)
	}); ok {
		q.Requeue(claim)
	}
}

// enqueueHostPath queues every hostPath ProvisionerConfig.
func (m *Manager) enqueueHostPath() {
	all, err := m.all()
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, pc := range all {
		if pc.Spec.Backend.NodeHostPath() != nil {
			m.queue.Add(pc.Name)
		}
	}
}

// nodeLease returns the Lease of node from the cache, nil when none.
func (m *Manager) nodeLease(node string) (*coordinationv1.Lease, error) {
	obj, exists, err := m.nodeLeaseInf.GetStore().GetByKey(m.settings.NodeLeaseNamespace + "/" + NodeLeaseName(node))
	if err != nil || !exists {
		return nil, err
	}
	lease, _ := obj.(*coordinationv1.Lease)
	return lease, nil
}
