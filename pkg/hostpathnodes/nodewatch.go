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
	"cmp"
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// nodeWatch turns the changes of Nodes and node Leases into the hostPath
// ProvisionerConfigs they concern, so that a node's selection and service
// are looked at again when, and only when, something about them changed.
type nodeWatch struct {
	n *Nodes
	// expiries holds, by key, the node Leases of live agents until they
	// expire: no event announces a Lease left unrenewed. Nil for a node
	// agent alone, which writes no status.
	expiries workqueue.TypedDelayingInterface[string]
}

// watchNodes queues the hostPath ProvisionerConfigs that select a Node that
// comes, goes or changes its labels, or that a node Lease concerns when it
// changes hands, comes back to life, changes a report entry or a removed
// volume, or expires unrenewed. It returns the function that stops it.
func (n *Nodes) watchNodes(ctx context.Context) (func(), error) {
	logger := klog.FromContext(ctx)
	opts := cache.HandlerOptions{Logger: &logger}
	w := &nodeWatch{n: n}
	if n.settings.Manager {
		w.expiries = workqueue.NewTypedDelayingQueue[string]()
	}
	nodes, err := n.nodeInf.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.nodeChanged(obj) },
		UpdateFunc: w.nodeUpdated,
		DeleteFunc: func(obj any) { w.nodeChanged(obj) },
	}, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot watch Nodes: %w", err)
	}
	leases, err := n.leaseInf.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.leaseChanged(nil, asLease(obj)) },
		UpdateFunc: func(oldObj, newObj any) { w.leaseChanged(asLease(oldObj), asLease(newObj)) },
		DeleteFunc: func(obj any) { w.leaseChanged(asLease(obj), nil) },
	}, opts)
	if err != nil {
		_ = n.nodeInf.RemoveEventHandler(nodes)
		return nil, fmt.Errorf("cannot watch the node Leases: %w", err)
	}
	var expiring sync.WaitGroup
	if w.expiries != nil {
		expiring.Go(w.runExpiries)
	}
	return func() {
		_ = n.nodeInf.RemoveEventHandler(nodes)
		_ = n.leaseInf.RemoveEventHandler(leases)
		if w.expiries != nil {
			w.expiries.ShutDown()
		}
		expiring.Wait()
	}, nil
}

func (w *nodeWatch) nodeChanged(obj any) {
	if node := asNode(obj); node != nil {
		w.enqueueSelecting(nil, node)
	}
}

func (w *nodeWatch) nodeUpdated(oldObj, newObj any) {
	o, n := asNode(oldObj), asNode(newObj)
	if o != nil && n != nil && !maps.Equal(o.Labels, n.Labels) {
		w.enqueueSelecting(nil, o, n)
	}
}

// enqueueSelecting queues the hostPath ProvisionerConfigs named in names and
// those that select one of nodes, or cannot tell.
func (w *nodeWatch) enqueueSelecting(names []string, nodes ...*corev1.Node) {
	for _, name := range names {
		// Named by a node Lease; one deleted since was queued by its deletion.
		if _, err := w.n.lister.Get(name); err == nil {
			w.n.fleet.Enqueue(name)
		}
	}
	if len(nodes) == 0 {
		return
	}
	all, err := w.n.all()
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("cannot list the ProvisionerConfigs of a node change: %w", err))
		return
	}
	for _, pc := range all {
		spec := pc.Spec.Backend.NodeHostPath()
		if spec != nil && slices.ContainsFunc(nodes, func(node *corev1.Node) bool {
			selected, err := selectsNode(spec, node)
			return selected || err != nil
		}) {
			w.n.fleet.Enqueue(pc.Name)
		}
	}
}

// leaseChanged queues what a change of a node Lease from old to lease
// concerns; either is nil when the Lease was created or deleted. Every
// ProvisionerConfig that selects the node when the agent comes, goes or
// comes back to life or its report turns (un)readable, else those whose
// report entry or removed volumes changed.
func (w *nodeWatch) leaseChanged(old, lease *coordinationv1.Lease) {
	if old == nil && lease == nil {
		return
	}
	now := time.Now()
	clock := w.n.clock
	// Asked before lease is seen, which replaces what was seen of old.
	revived := old != nil && !clock.wasLive(old, now)
	if lease == nil {
		clock.forget(old)
	} else {
		w.watchExpiry(lease, now)
		revived = revived && clock.live(lease, now)
	}
	switch {
	case old == nil || lease == nil,
		!reflect.DeepEqual(old.Spec.HolderIdentity, lease.Spec.HolderIdentity),
		revived,
		reportReadable(old) != reportReadable(lease):
		w.enqueueNodeOf(cmp.Or(lease, old), changedEntries(old, lease))
	default:
		if names := changedEntries(old, lease); len(names) > 0 {
			w.enqueueSelecting(names)
		}
	}
}

// enqueueNodeOf queues the hostPath ProvisionerConfigs in names and those
// that select the node of lease.
func (w *nodeWatch) enqueueNodeOf(lease *coordinationv1.Lease, names []string) {
	if node := w.nodeOf(lease.Name); node != nil {
		w.enqueueSelecting(names, node)
		return
	}
	w.enqueueSelecting(names)
}

// nodeOf returns the Node whose Lease is named leaseName, nil when none.
func (w *nodeWatch) nodeOf(leaseName string) *corev1.Node {
	store := w.n.nodeInf.GetStore()
	// NodeLeaseName keeps a node's name unless it is too long for a Lease.
	if name := strings.TrimPrefix(leaseName, "provfleet-node-"); NodeLeaseName(name) == leaseName {
		obj, _, _ := store.GetByKey(name)
		return asNode(obj)
	}
	for _, obj := range store.List() {
		if node := asNode(obj); node != nil && NodeLeaseName(node.Name) == leaseName {
			return node
		}
	}
	return nil
}

// changedEntries names the ProvisionerConfigs whose report entry or removed
// volumes differ between two versions of a node Lease, either nil.
func changedEntries(old, lease *coordinationv1.Lease) []string {
	var names []string
	for _, key := range []string{AnnNodeReport, AnnRemovedVolumes} {
		var before, after map[string]any
		if old != nil {
			before, _ = readAnnotation[map[string]any](old, key)
		}
		if lease != nil {
			after, _ = readAnnotation[map[string]any](lease, key)
		}
		for name := range before {
			if !reflect.DeepEqual(before[name], after[name]) {
				names = append(names, name)
			}
		}
		for name := range after {
			if _, ok := before[name]; !ok {
				names = append(names, name)
			}
		}
	}
	return names
}

func reportReadable(lease *coordinationv1.Lease) bool {
	_, err := readNodeReport(lease)
	return err == nil
}

// watchExpiry has the node of lease, seen at now, looked at again when
// lease expires by the manager's clock, unless renewed by then.
func (w *nodeWatch) watchExpiry(lease *coordinationv1.Lease, now time.Time) {
	if expiry, held := w.n.clock.expiry(lease, now); held && w.expiries != nil {
		// A renewal keeps the earlier wait: leaseDue waits again.
		w.expiries.AddAfter(lease.Namespace+"/"+lease.Name, expiry.Sub(now))
	}
}

// runExpiries looks at each node Lease whose wait ended until the watch
// stops.
func (w *nodeWatch) runExpiries() {
	for {
		key, quit := w.expiries.Get()
		if quit {
			return
		}
		w.leaseDue(key)
		w.expiries.Done(key)
	}
}

// leaseDue queues the node of the Lease key, if it expired unrenewed, or
// waits for its new expiry.
func (w *nodeWatch) leaseDue(key string) {
	obj, _, _ := w.n.leaseInf.GetStore().GetByKey(key)
	lease := asLease(obj)
	if lease == nil {
		// Its deletion queued its node.
		return
	}
	if now := time.Now(); w.n.clock.live(lease, now) {
		w.watchExpiry(lease, now)
		return
	}
	w.enqueueNodeOf(lease, nil)
}

// asNode returns the Node obj holds, a tombstone's too; nil for anything
// else.
func asNode(obj any) *corev1.Node {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	node, _ := obj.(*corev1.Node)
	return node
}

// asLease returns the Lease obj holds, a tombstone's too; nil for anything
// else.
func asLease(obj any) *coordinationv1.Lease {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	lease, _ := obj.(*coordinationv1.Lease)
	return lease
}
