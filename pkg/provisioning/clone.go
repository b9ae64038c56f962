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
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
)

var claimKind = schema.GroupKind{Kind: "PersistentVolumeClaim"}

// errCopying is the error of a volume whose backend volume is kept while
// clones are copied from it.
var errCopying = errors.New("clones are being copied from it")

// copies counts, by PersistentVolume name, the clones being copied from
// each source volume: from their admission until their provisioning ends,
// in the background too. The backend volume of a source is not deleted
// while any is, so a source claim deleted during a copy does not take the
// data from under it. Only this process knows of its copies, and it alone
// deletes its provisioner's volumes (or, with node agents, those of the
// agent's node, where a local clone and its source both are), so no API
// write is needed: no finalizer on the source claim, such as
// external-provisioner's pvc-as-source-protection, which would cost two
// writes per clone and would have to be removed on every way a clone ends.
type copies struct {
	mu      sync.Mutex
	sources map[string]int
}

func (p *copies) begin(source string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sources == nil {
		p.sources = map[string]int{}
	}
	p.sources[source]++
}

// end reports whether the last copy from source ended.
func (p *copies) end(source string) (last bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sources[source]--
	if p.sources[source] > 0 {
		return false
	}
	delete(p.sources, source)
	return true
}

func (p *copies) from(source string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sources[source] > 0
}

// copyEnded is told that a copy from source ended, and queues source at
// once when it was the last, as its deletion may wait for it.
func (c *Controller) copyEnded(source string) {
	if !c.copies.end(source) {
		return
	}
	c.mu.Lock()
	t := c.term
	c.mu.Unlock()
	if t != nil {
		t.volumes.queue.Add(source)
	}
}

// CloneSourceName is the name of the claim whose volume the volume of claim
// is to be a copy of, for a claim whose data source is a claim of its own
// namespace; "" otherwise.
func CloneSourceName(claim *corev1.PersistentVolumeClaim) string {
	ref := dataSourceOf(claim)
	if ref == nil || sourceKind(ref) != claimKind || *ref.Namespace != claim.Namespace {
		return ""
	}
	return ref.Name
}

// cloneSourceOf resolves and checks the claim whose volume the volume of
// options is to be a copy of; nil when its data source is no claim. The
// source is refused unless it is of the claim's namespace and StorageClass,
// Bound to a PersistentVolume of this provisioner that holds no more than
// the claim requests, and, when that volume is bound to nodes, the claim's
// selected node is one of them.
func (c *Controller) cloneSourceOf(options *ProvisionOptions) (*CloneSource, error) {
	claim, ref := options.PVC, options.DataSource
	if ref == nil || sourceKind(ref) != claimKind {
		return nil, nil
	}
	source, err := c.sourceClaim(claim, ref)
	if err != nil {
		return nil, fmt.Errorf("cannot clone claim %s/%s: %w", *ref.Namespace, ref.Name, err)
	}
	volume, err := c.sourceVolume(source)
	if err == nil {
		err = checkClone(claim, options.SelectedNode, source, volume)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot clone claim %s/%s: %w", *ref.Namespace, ref.Name, err)
	}
	return &CloneSource{Claim: source, Volume: volume}, nil
}

// sourceClaim finds the source claim ref of claim in the informer.
func (c *Controller) sourceClaim(claim *corev1.PersistentVolumeClaim, ref *corev1.TypedObjectReference) (*corev1.PersistentVolumeClaim, error) {
	if *ref.Namespace != claim.Namespace {
		return nil, fmt.Errorf("a clone's source must be in the clone's namespace %s: a source in another namespace needs a ReferenceGrant, which %s does not support",
			claim.Namespace, c.name)
	}
	obj, exists, err := c.informers.Claims.GetStore().GetByKey(*ref.Namespace + "/" + ref.Name)
	if err != nil {
		return nil, err
	}
	source, ok := obj.(*corev1.PersistentVolumeClaim)
	switch {
	case !exists || !ok:
		// A node agent's informer holds the claims of its node only.
		return nil, fmt.Errorf("no such claim is known to %s (yet): it does not exist, or its volume is on another node", c.name)
	case source.UID == claim.UID:
		return nil, fmt.Errorf("a claim cannot be a clone of itself")
	case source.DeletionTimestamp != nil:
		return nil, fmt.Errorf("it is being deleted")
	case source.Status.Phase != corev1.ClaimBound || source.Spec.VolumeName == "":
		return nil, fmt.Errorf("it is %s, not Bound to a PersistentVolume", phaseOf(source))
	}
	return source, nil
}

func phaseOf(claim *corev1.PersistentVolumeClaim) corev1.PersistentVolumeClaimPhase {
	if claim.Status.Phase == "" {
		return corev1.ClaimPending
	}
	return claim.Status.Phase
}

// sourceVolume finds the PersistentVolume of a Bound source claim in the
// informer and checks that it is this provisioner's and the claim's: a
// tenant may name any volume in spec.volumeName.
func (c *Controller) sourceVolume(source *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, error) {
	name := source.Spec.VolumeName
	obj, exists, err := c.informers.Volumes.GetStore().GetByKey(name)
	if err != nil {
		return nil, err
	}
	volume, ok := obj.(*corev1.PersistentVolume)
	switch {
	case !exists || !ok:
		return nil, fmt.Errorf("its PersistentVolume %s does not exist", name)
	case volume.DeletionTimestamp != nil:
		return nil, fmt.Errorf("its PersistentVolume %s is being deleted", name)
	case volume.Spec.ClaimRef == nil || volume.Spec.ClaimRef.UID != source.UID:
		return nil, fmt.Errorf("its PersistentVolume %s is not bound to it", name)
	}
	if by := volume.Annotations[AnnDynamicallyProvisioned]; !c.config().KnownName(by) {
		if by == "" {
			by = "no provisioner"
		}
		return nil, fmt.Errorf("its PersistentVolume %s was provisioned by %s, not by %s: only a volume of the clone's provisioner can be copied", name, by, c.name)
	}
	return volume, nil
}

// checkClone checks what a clone must share with its source: the
// StorageClass, a request no smaller than the source volume, and the node
// of a source volume bound to nodes. An Immediate claim has no selected
// node to check: its backend, handed the source volume with its node
// affinity, makes the clone where it can reach the source or refuses.
func checkClone(claim *corev1.PersistentVolumeClaim, node *corev1.Node, source *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) error {
	if class, sourceClass := claimClassName(claim), claimClassName(source); class != sourceClass {
		return fmt.Errorf("its StorageClass is %q and the clone's %q: a clone must be of its source's StorageClass", sourceClass, class)
	}
	size, ok := volume.Spec.Capacity[corev1.ResourceStorage]
	if !ok {
		size, ok = source.Status.Capacity[corev1.ResourceStorage]
	}
	request := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if ok && request.Cmp(size) < 0 {
		return fmt.Errorf("the clone requests %s, less than the %s of its source's volume %s: request at least that", request.String(), size.String(), volume.Name)
	}
	affinity := volume.Spec.NodeAffinity
	if node == nil || affinity == nil || affinity.Required == nil || nodeMatches(node, affinity.Required) {
		return nil
	}
	where := "a node its PersistentVolume " + volume.Name + " is bound to"
	if sourceNode := source.Annotations[AnnSelectedNode]; sourceNode != "" {
		where = "node " + sourceNode
	}
	return fmt.Errorf("the clone must be made on %s, the node of its source; the claim's selected node is %s", where, node.Name)
}

// nodeSelectorOperators are the label selector operators of node selector
// ones.
var nodeSelectorOperators = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn:           selection.In,
	corev1.NodeSelectorOpNotIn:        selection.NotIn,
	corev1.NodeSelectorOpExists:       selection.Exists,
	corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	corev1.NodeSelectorOpGt:           selection.GreaterThan,
	corev1.NodeSelectorOpLt:           selection.LessThan,
}

// nodeMatches reports whether node meets selector as the scheduler reads a
// volume's required node affinity: any one of its terms, an empty term
// matching no node.
func nodeMatches(node *corev1.Node, selector *corev1.NodeSelector) bool {
	for _, term := range selector.NodeSelectorTerms {
		if len(term.MatchExpressions)+len(term.MatchFields) > 0 &&
			requirementsMatch(term.MatchExpressions, labels.Set(node.Labels)) &&
			requirementsMatch(term.MatchFields, labels.Set{"metadata.name": node.Name}) {
			return true
		}
	}
	return false
}

func requirementsMatch(requirements []corev1.NodeSelectorRequirement, set labels.Set) bool {
	for _, r := range requirements {
		op, ok := nodeSelectorOperators[r.Operator]
		if !ok {
			return false
		}
		requirement, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil || !requirement.Matches(set) {
			return false
		}
	}
	return true
}
