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
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/leaderelection"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// Agent is the node role of a process: while it holds its node's Lease
// it has the fleet run an instance of every hostPath ProvisionerConfig that
// selects the node, and publishes how each runs with the Lease's renewals.
type Agent struct {
	nodes   *Nodes
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

// newAgent returns the node agent of n, electing itself on the node's
// Lease with client.
func newAgent(n *Nodes, client provisioning.Client) *Agent {
	a := &Agent{nodes: n, node: n.settings.NodeName, reports: nodeReport{}, released: releasedVolumes{}}
	d := n.settings.LeaseDuration
	a.elector = leaderelection.NewLeaderElector(leaderelection.Config{
		Client:        client,
		Lease:         types.NamespacedName{Namespace: n.settings.LeaseNamespace, Name: NodeLeaseName(a.node)},
		Identity:      n.settings.Identity,
		LeaseDuration: d,
		RenewDeadline: d * 3 / 4,
		RetryPeriod:   d / 4,
		Leases:        leaderelection.NewLeaseRouter(n.leaseInf),
		Callbacks:     leaderelection.LeaderCallbacks{OnStartedLeading: a.lead},
		Annotate:      a.annotate,
	})
	return a
}

// Run campaigns for the node's Lease and serves the node while it holds
// it, until ctx ends; it returns once the node's instances stopped and the
// Lease was released.
func (a *Agent) Run(ctx context.Context) { a.elector.Run(ctx) }

// HoldsLease reports whether the agent holds its node's Lease.
func (a *Agent) HoldsLease() bool { return a.elector.IsLeader() }

// InstanceStopping tells the agent that its node's instance of the
// ProvisionerConfig name is stopping: it takes no more claims handed over
// by this process's coordinator.
func (a *Agent) InstanceStopping(name string) { a.nodes.handovers.close(name) }

// InstanceStopped tells the agent that its node's instance of name
// stopped: the claims handed over to it may be placed anew.
func (a *Agent) InstanceStopped(name string) { a.nodes.handovers.forget(name) }

// lead starts serving the node once its Lease is held, and returns the
// function that stops every instance of the node when the term ends.
func (a *Agent) lead(ctx context.Context) (waitStopped func()) {
	a.mu.Lock()
	a.held = true
	a.mu.Unlock()
	klog.FromContext(ctx).Info("Holding the node's Lease: serving its hostPath provisioners", "node", a.node)
	a.nodes.enqueueHostPath()
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.held = false
		for _, name := range a.nodes.fleet.OnNode() {
			a.nodes.fleet.StopOnNode(ctx, name)
		}
		a.reportMu.Lock()
		a.reports = nodeReport{}
		a.reportMu.Unlock()
		klog.FromContext(ctx).Info("Stopped serving the node", "node", a.node)
	}
}

// annotate puts the agent's report on its node Lease, with the removed
// volumes it released.
func (a *Agent) annotate(annotations map[string]string) {
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

// releaseRemoved has the node's instance of the ProvisionerConfig name
// release the directories of the volumes the manager deleted while this
// node was removed, as the node's removal list names them, and reports
// whether to retry.
func (a *Agent) releaseRemoved(ctx context.Context, name string) bool {
	list, err := a.removedList()
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot read the removed volumes of the node")
		return false
	}
	pending := a.pendingRelease(name, list[name])
	provisioner := a.nodes.fleet.ProvisionerOnNode(name)
	if provisioner == nil || len(pending) == 0 {
		return false
	}
	releaser, ok := provisioner.(removedReleaser)
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
func (a *Agent) pendingRelease(name string, listed []removedVolume) []removedVolume {
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

// removedList returns the removal list of the agent's node from the cache.
func (a *Agent) removedList() (removedList, error) {
	obj, exists, err := a.nodes.listInf.GetStore().GetByKey(a.nodes.settings.LeaseNamespace + "/" + RemovedListName(a.node))
	if err != nil || !exists {
		return removedList{}, err
	}
	cm, _ := obj.(*corev1.ConfigMap)
	return readRemovedList(cm)
}

// report records how this node runs the ProvisionerConfig name; nil
// forgets it. A change other than the space is published at once, the
// space with the next renewal.
func (a *Agent) report(name string, r *provisionerReport) {
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

// Reconcile has the fleet run, re-tune or stop this node's instance of pc,
// and reports whether to retry later. Only a holder of the node's Lease
// runs instances.
func (a *Agent) Reconcile(ctx context.Context, pc *v1alpha1.ProvisionerConfig) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	fleet := a.nodes.fleet
	backendSpec, err := a.nodeBackend(pc)
	if !a.held || (backendSpec == nil && err == nil) {
		fleet.StopOnNode(ctx, pc.Name)
		a.report(pc.Name, nil)
		return false
	}
	var outcome Outcome
	if err != nil {
		fleet.StopOnNode(ctx, pc.Name)
		outcome = Outcome{Reason: v1alpha1.ReasonInvalidSpec, Message: err.Error()}
	} else {
		outcome = fleet.RunOnNode(ctx, pc, backendSpec, a.scopeOf(pc.Name))
		if outcome.Running {
			a.nodes.handovers.open(pc.Name)
		}
	}
	r := &provisionerReport{Generation: pc.Generation, Reason: outcome.Reason, Message: outcome.Message}
	if outcome.Storage != nil {
		r.Available, r.Total = &outcome.Storage.AvailableBytes, &outcome.Storage.TotalBytes
		r.ProbedAt = &metav1.Time{Time: outcome.ProbedAt}
	}
	a.report(pc.Name, r)
	if outcome.Running && a.releaseRemoved(ctx, pc.Name) {
		return true
	}
	return outcome.Retry
}

// nodeBackend is the backend this node's instance of pc builds: its
// hostPath with the node's path and name. It is nil, without an error, when
// pc does not select this node or is not a hostPath one.
func (a *Agent) nodeBackend(pc *v1alpha1.ProvisionerConfig) (*v1alpha1.BackendSpec, error) {
	spec := pc.Spec.Backend.NodeHostPath()
	if spec == nil {
		return nil, nil
	}
	node, err := a.ownNode()
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
func (a *Agent) ownNode() (*corev1.Node, error) {
	obj, exists, err := a.nodes.nodeInf.GetStore().GetByKey(a.node)
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

// scopeOf is the scope of this node's instance of the ProvisionerConfig
// config: with both roles, also the claims the process's coordinator hands
// over to it.
func (a *Agent) scopeOf(config string) provisioning.Scope {
	if a.nodes.handovers == nil {
		return nodeScope(a.node)
	}
	return handoverScope{node: a.node, config: config, handovers: a.nodes.handovers}
}
