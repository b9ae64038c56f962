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
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/hostpath"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// handovers are, by ProvisionerConfig name, the Immediate claims that the
// coordinator of a process in both roles left to the process's own node
// instance instead of writing their placement: a ProvisionerConfig whose
// nodeName is this process's node can serve no other node, so the
// selected-node write would only cost one request per claim and a hop
// through the API before the volume is made.
//
// The hand-over keeps one writer per claim, as the placement write does: only
// the coordinator that holds the provisioner's Lease gives claims, and only
// the instance of the node whose Lease this process holds takes them; both
// are in this process. A claim given stays the node instance's until that
// instance has stopped (its work drained), so no coordinator of this process
// places it elsewhere meanwhile; one of another replica, which does not see
// the hand-over, can only write the same node, whose instance is the same.
type handovers struct {
	mu       sync.Mutex
	byConfig map[string]*handover
	// requeue has the node instance of config look at claim.
	requeue func(config string, claim *corev1.PersistentVolumeClaim)
}

// handover is what one ProvisionerConfig's node instance was given.
type handover struct {
	// open is true while the node instance runs and takes claims.
	open   bool
	claims map[types.UID]bool
}

func newHandovers(requeue func(config string, claim *corev1.PersistentVolumeClaim)) *handovers {
	return &handovers{byConfig: map[string]*handover{}, requeue: requeue}
}

// open records that the node instance of config runs.
func (h *handovers) open(config string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.byConfig[config]; e != nil {
		e.open = true
		return
	}
	h.byConfig[config] = &handover{open: true, claims: map[types.UID]bool{}}
}

// close refuses further claims for the node instance of config, which is
// stopping; those it was given stay its own until forget.
func (h *handovers) close(config string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.byConfig[config]; e != nil {
		e.open = false
	}
}

// forget drops what the node instance of config was given, once it stopped:
// its claims may be placed anew.
func (h *handovers) forget(config string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.byConfig[config]; e != nil && !e.open {
		delete(h.byConfig, config)
	}
}

// give hands claim to the node instance of config and reports whether it
// did: not while that instance is not running.
func (h *handovers) give(config string, claim *corev1.PersistentVolumeClaim) bool {
	h.mu.Lock()
	e := h.byConfig[config]
	if e == nil || !e.open {
		h.mu.Unlock()
		return false
	}
	given := e.claims[claim.UID]
	e.claims[claim.UID] = true
	h.mu.Unlock()
	if !given {
		h.requeue(config, claim)
	}
	return true
}

// owns reports whether the node instance of config was given the claim uid.
func (h *handovers) owns(config string, uid types.UID) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.byConfig[config]
	return e != nil && e.claims[uid]
}

// keepOnly forgets the claims of config that no longer wait for a volume.
func (h *handovers) keepOnly(config string, waiting map[types.UID]bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.byConfig[config]; e != nil {
		for uid := range e.claims {
			if !waiting[uid] {
				delete(e.claims, uid)
			}
		}
	}
}

// handoverScope is the nodeScope of a process in both roles: it also takes
// the claims with no selected node that its coordinator gave it.
type handoverScope struct {
	node, config string
	handovers    *handovers
}

func (s handoverScope) Claim(claim *corev1.PersistentVolumeClaim) bool {
	if node := claim.Annotations[provisioning.AnnSelectedNode]; node != "" {
		return node == s.node
	}
	return s.handovers.owns(s.config, claim.UID)
}

func (s handoverScope) Volume(volume *corev1.PersistentVolume) bool {
	return backend.VolumeNode(volume) == s.node
}

// handOver leaves claim to this process's own node instance, when the
// ProvisionerConfig can serve only this process's node and that node is
// served and allowed, and reports whether the claim is that instance's:
// then it needs no placement.
func (c *Coordinator) handOver(claim *corev1.PersistentVolumeClaim, served map[string]*nodeCandidate) bool {
	if c.handovers.owns(c.configName, claim.UID) {
		return true
	}
	if c.handovers == nil || c.spec.NodeName == "" || c.spec.NodeName != c.localNode ||
		claim.Annotations[provisioning.AnnSelectedNode] != "" || served[c.localNode] == nil || !c.pinnedByName() {
		return false
	}
	return c.handovers.give(c.configName, claim)
}

// pinnedByName reports whether the local node's value of the label volumes
// are pinned with (nodeAffinityKey, the host name by default), which a
// volume of a claim selected to it is pinned with, is its name, which the
// backend pins a volume with when no node was selected.
func (c *Coordinator) pinnedByName() bool {
	obj, exists, err := c.informers.Nodes.GetStore().GetByKey(c.localNode)
	node, ok := obj.(*corev1.Node)
	if err != nil || !exists || !ok {
		return false
	}
	return backend.NodeLabelValue(node, hostpath.AffinityKey(c.spec.NodeAffinityKey)) == node.Name
}

// forgetHandedOver forgets the claims given to the node instance that no
// longer wait for a volume: bound, or being deleted.
func (c *Coordinator) forgetHandedOver(v *fleetView) {
	if c.handovers == nil {
		return
	}
	waiting := map[types.UID]bool{}
	for _, claim := range v.claims {
		if claim.DeletionTimestamp == nil {
			waiting[claim.UID] = true
		}
	}
	c.handovers.keepOnly(c.configName, waiting)
}
