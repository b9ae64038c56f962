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
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// EventNodeAgentsUnrestricted is the reason of the Warning Event on every
// hostPath ProvisionerConfig when the API server cannot hold the node agents
// to their own nodes.
const EventNodeAgentsUnrestricted = "NodeAgentsUnrestricted"

// paramsKey is the key of nodeTrust's queue that stands for
// NodeVolumesParams; every other key is a node's name, which is never
// empty.
const paramsKey = ""

// nodeTrust is the manager's part in holding the node agents to their own
// nodes: it keeps NodeVolumesParams current, takes the volumes the agents
// released off the removal lists, moves the lists off the Leases of older
// versions, deletes the Leases and lists of nodes that are gone once
// nothing in them is pending, and warns when the API server cannot enforce
// the policy.
type nodeTrust struct {
	n        *Nodes
	recorder record.EventRecorder
	queue    workqueue.TypedRateLimitingInterface[string]
	// unrestricted says why the API server does not hold the agents to
	// their nodes; empty when it does.
	unrestricted string
	warned       sync.Map // of ProvisionerConfig UIDs told unrestricted
}

// watchNodeTrust starts what keeps the node agents to their own nodes: the
// manager's nodeTrust; a node agent alone looks at its removal list again
// whenever it changes. It returns the function that stops it.
func (n *Nodes) watchNodeTrust(ctx context.Context, recorder record.EventRecorder) (func(), error) {
	logger := klog.FromContext(ctx)
	opts := cache.HandlerOptions{Logger: &logger}
	stopAgent := func() {}
	if n.settings.Agent {
		reg, err := n.listInf.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { n.enqueueHostPath() },
			UpdateFunc: func(any, any) { n.enqueueHostPath() },
			DeleteFunc: func(any) { n.enqueueHostPath() },
		}, opts)
		if err != nil {
			return nil, fmt.Errorf("cannot watch the node's removal list: %w", err)
		}
		stopAgent = func() { _ = n.listInf.RemoveEventHandler(reg) }
	}
	if !n.settings.Manager {
		return stopAgent, nil
	}
	t := &nodeTrust{n: n, recorder: recorder, queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "node-trust"})}
	t.unrestricted = checkAdmissionPolicies(n.client.Discovery())
	if t.unrestricted != "" {
		logger.Error(nil, "The node agents are not held to their own nodes: any node can change or delete the volumes of every node", "reason", t.unrestricted)
	}
	stopWatching, err := t.watch(opts)
	if err != nil {
		t.queue.ShutDown()
		stopAgent()
		return nil, err
	}
	var worker sync.WaitGroup
	worker.Go(func() { t.run(ctx) })
	return func() {
		stopWatching()
		stopAgent()
		t.queue.ShutDown()
		worker.Wait()
	}, nil
}

// watch queues what each change concerns and returns the function that
// stops watching.
func (t *nodeTrust) watch(opts cache.HandlerOptions) (func(), error) {
	n := t.n
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{n.configs, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { t.queue.Add(paramsKey) },
			UpdateFunc: t.configUpdated,
			DeleteFunc: func(any) { t.queue.Add(paramsKey) },
		}},
		{n.nodeInf, cache.ResourceEventHandlerFuncs{
			AddFunc:    t.nodeChanged,
			UpdateFunc: t.nodeUpdated,
			DeleteFunc: t.nodeChanged,
		}},
		{n.leaseInf, cache.ResourceEventHandlerFuncs{
			AddFunc:    t.leaseChanged,
			UpdateFunc: func(_, newObj any) { t.leaseChanged(newObj) },
			DeleteFunc: t.leaseChanged,
		}},
		{n.listInf, cache.ResourceEventHandlerFuncs{
			AddFunc:    t.listChanged,
			UpdateFunc: func(_, newObj any) { t.listChanged(newObj) },
			DeleteFunc: t.listChanged,
		}},
	}
	var stops []func()
	stopAll := func() {
		for _, stop := range stops {
			stop()
		}
	}
	for _, h := range handlers {
		reg, err := h.informer.AddEventHandlerWithOptions(h.handler, opts)
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("cannot watch for the node agents' restriction: %w", err)
		}
		stops = append(stops, func() { _ = h.informer.RemoveEventHandler(reg) })
	}
	return stopAll, nil
}

// configUpdated queues the params when a ProvisionerConfig's spec changed:
// its status writes change nothing they hold.
func (t *nodeTrust) configUpdated(oldObj, newObj any) {
	o, ok1 := oldObj.(*v1alpha1.ProvisionerConfig)
	n, ok2 := newObj.(*v1alpha1.ProvisionerConfig)
	if !ok1 || !ok2 || o.Generation != n.Generation {
		t.queue.Add(paramsKey)
	}
}

func (t *nodeTrust) nodeChanged(obj any) {
	if node := asNode(obj); node != nil {
		t.queue.Add(paramsKey)
		t.queue.Add(node.Name)
	}
}

func (t *nodeTrust) nodeUpdated(oldObj, newObj any) {
	o, n := asNode(oldObj), asNode(newObj)
	if o == nil || n == nil || !maps.Equal(o.Labels, n.Labels) {
		t.nodeChanged(newObj)
	}
}

func (t *nodeTrust) leaseChanged(obj any) {
	if lease := asLease(obj); lease != nil {
		if node := leaseNode(lease); node != "" {
			t.queue.Add(node)
		}
	}
}

func (t *nodeTrust) listChanged(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Annotations[AnnRemovedListNode] != "" {
		t.queue.Add(cm.Annotations[AnnRemovedListNode])
	}
}

// maxTellingNode is the longest node name that leaseNode tells from its
// Lease's name: a longer one may be that of another node cut and hashed.
const maxTellingNode = 228

// leaseNode is the node whose Lease lease is, empty when its name does not
// tell: a node name too long for a Lease name is cut and hashed, and then
// the name may be read as that of another node.
func leaseNode(lease *coordinationv1.Lease) string {
	node, ok := strings.CutPrefix(lease.Name, "provfleet-node-")
	if !ok || len(node) > maxTellingNode || NodeLeaseName(node) != lease.Name {
		return ""
	}
	return node
}

// run works the queue until it shuts down, once the caches synced.
func (t *nodeTrust) run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), t.n.configs.HasSynced, t.n.HasSynced) {
		return
	}
	for t.next(ctx) {
	}
}

func (t *nodeTrust) next(ctx context.Context) bool {
	key, quit := t.queue.Get()
	if quit {
		return false
	}
	defer t.queue.Done(key)
	var err error
	if key == paramsKey {
		t.warnUnrestricted()
		err = t.n.syncNodeVolumesParams(ctx)
	} else {
		err = t.syncNode(ctx, key)
	}
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot keep the node agents to their own nodes", "node", key)
		t.queue.AddRateLimited(key)
		return true
	}
	t.queue.Forget(key)
	return true
}

// warnUnrestricted tells every hostPath ProvisionerConfig, once, that the API
// server does not hold the node agents to their own nodes.
func (t *nodeTrust) warnUnrestricted() {
	if t.unrestricted == "" {
		return
	}
	configs, err := t.n.all()
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, pc := range configs {
		if pc.Spec.Backend.NodeHostPath() == nil {
			continue
		}
		if _, told := t.warned.LoadOrStore(pc.UID, true); !told {
			t.recorder.Eventf(pc, corev1.EventTypeWarning, EventNodeAgentsUnrestricted,
				"The node agents are not held to their own nodes (%s): any node can change or delete the volumes of every node", t.unrestricted)
		}
	}
}

// checkAdmissionPolicies returns why the API server cannot enforce the node
// agents' admission policies: one older than 1.30, or one that does not
// serve ValidatingAdmissionPolicies; empty when it can.
func checkAdmissionPolicies(client discovery.DiscoveryInterface) string {
	info, err := client.ServerVersion()
	if err != nil {
		return fmt.Sprintf("cannot read the API server's version: %v", err)
	}
	major, _ := strconv.Atoi(info.Major)
	minor, _ := strconv.Atoi(strings.TrimRight(info.Minor, "+"))
	if major < 1 || major == 1 && minor < 30 {
		return fmt.Sprintf("Kubernetes %s.%s is older than 1.30, which puts the node name in pod-bound ServiceAccount tokens and serves ValidatingAdmissionPolicies", info.Major, info.Minor)
	}
	resources, err := client.ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		return fmt.Sprintf("cannot find the ValidatingAdmissionPolicy API: %v", err)
	}
	for _, r := range resources.APIResources {
		if r.Name == "validatingadmissionpolicies" {
			return ""
		}
	}
	return "the API server does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies"
}
