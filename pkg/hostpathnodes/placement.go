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
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// Reasons of the Events the coordinator records.
const (
	EventNodeSelected   = "NodeSelected"
	EventNoNodeWithRoom = "NoNodeWithRoom"
	EventNodeNotServed  = "NodeNotServed"
)

// fleetView is what one sync looks at, read from the informers at its start.
type fleetView struct {
	now time.Time
	// retry is how soon a claim that waits for a node is tried again.
	retry time.Duration
	// nodes are all Node objects, by name.
	nodes map[string]*corev1.Node
	// volumes are those of this provisioner's names; claims those of its
	// names that have no volume yet, oldest first: only they wait for a
	// node or count on one, and bound claims are most of a large cluster's.
	volumes []*corev1.PersistentVolume
	claims  []*corev1.PersistentVolumeClaim
	// resizing are the bound claims of its names that ask for another size
	// or carry an unsettled resize.
	resizing []*corev1.PersistentVolumeClaim
}

func (c *Coordinator) view(cfg provisioning.Config) *fleetView {
	v := &fleetView{now: time.Now(), retry: cfg.Retry.InitialDelay, nodes: map[string]*corev1.Node{}}
	for _, obj := range c.informers.Nodes.GetStore().List() {
		if node, ok := obj.(*corev1.Node); ok {
			v.nodes[node.Name] = node
		}
	}
	for _, obj := range c.informers.Volumes.GetStore().List() {
		if volume, ok := obj.(*corev1.PersistentVolume); ok && cfg.KnownName(volumeProvisioner(volume)) {
			v.volumes = append(v.volumes, volume)
		}
	}
	for _, obj := range c.informers.Claims.GetStore().List() {
		claim, ok := obj.(*corev1.PersistentVolumeClaim)
		switch {
		case !ok || !cfg.KnownName(provisioning.StorageProvisioner(claim)):
		case claim.Spec.VolumeName == "":
			v.claims = append(v.claims, claim)
		case provisioning.WantsResize(claim):
			v.resizing = append(v.resizing, claim)
		}
	}
	// Oldest first: a claim that waits longer is placed first.
	slices.SortFunc(v.claims, func(a, b *corev1.PersistentVolumeClaim) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return v
}

// nodeCandidate is a served node and what its volumes take of its budget.
type nodeCandidate struct {
	Name string
	// Volumes and Used count the volumes of this provisioner on the node,
	// and the claims placed there whose volume is not made yet.
	Volumes int64
	Used    int64
	// Available and Total are the space its agent last reported; nil:
	// unknown.
	Available, Total *int64
	// Pending is what Available does not count yet: the claims placed
	// there whose volume is not made yet, and the volumes made since the
	// probe that found Available (all of them when the report does not say
	// when that was).
	Pending int64
}

// nodeBudget is spec.capacity, which applies to each node alone.
type nodeBudget struct {
	// MaxVolumes is zero for no bound; Storage nil for none.
	MaxVolumes int64
	Storage    *int64
}

func budgetOf(spec *v1alpha1.HostPathBackend) nodeBudget {
	var b nodeBudget
	if spec.Capacity != nil {
		b.MaxVolumes = int64(spec.Capacity.MaxVolumes)
		if spec.Capacity.Storage != nil {
			storage := spec.Capacity.Storage.Value()
			b.Storage = &storage
		}
	}
	return b
}

// fits reports whether n has room in b for one more volume of request bytes.
func (b nodeBudget) fits(n nodeCandidate, request int64) bool {
	return (b.MaxVolumes == 0 || n.Volumes < b.MaxVolumes) && (b.Storage == nil || n.Used+request <= *b.Storage)
}

// chooseNode picks the node of a claim among candidates: one with room in
// b, the most room first (within margin), then the fewest volumes, then the
// lowest hash of the claim's UID and the node name, so that equal nodes
// share the claims and every leader picks the same. It returns false when
// none has room.
func chooseNode(uid types.UID, request int64, candidates []nodeCandidate, b nodeBudget) (nodeCandidate, bool) {
	fitting := slices.DeleteFunc(slices.Clone(candidates), func(n nodeCandidate) bool { return !b.fits(n, request) })
	if len(fitting) == 0 {
		return nodeCandidate{}, false
	}
	most := slices.MaxFunc(fitting, func(x, y nodeCandidate) int { return cmp.Compare(b.rank(x), b.rank(y)) })
	least := b.rank(most) - b.margin(fitting)
	roomiest := slices.DeleteFunc(fitting, func(n nodeCandidate) bool { return b.rank(n) < least })
	return slices.MinFunc(roomiest, func(x, y nodeCandidate) int {
		return cmp.Or(
			cmp.Compare(x.Volumes, y.Volumes),
			cmp.Compare(placementHash(uid, x.Name), placementHash(uid, y.Name)),
			cmp.Compare(x.Name, y.Name),
		)
	}), true
}

// minSpaceMargin is the least difference of reported free space that
// tells nodes apart: the free space of a disk moves with every write.
const minSpaceMargin = 1 << 30

// rank is what the most room means in comparing nodes: the storage budget
// left, else the volumes left of maxVolumes, else the reported free space
// less what it does not count yet.
func (b nodeBudget) rank(n nodeCandidate) int64 {
	switch {
	case b.Storage != nil:
		return *b.Storage - n.Used
	case b.MaxVolumes > 0:
		return b.MaxVolumes - n.Volumes
	case n.Available != nil:
		return *n.Available - n.Pending
	}
	return 0
}

// margin is how far below the most room a node still counts as having the
// most. A budget is counted exactly; free space is reported again only
// once it moved by a step of the disk's size (provisioning.Space.Step), so
// nodes whose reports are less than the largest step apart may have the
// same room: they share claims by their volumes rather than all going to
// the one whose report is older or happened to be a little ahead.
func (b nodeBudget) margin(nodes []nodeCandidate) int64 {
	if b.Storage != nil || b.MaxVolumes > 0 {
		return 0
	}
	margin := int64(minSpaceMargin)
	for _, n := range nodes {
		if n.Total != nil {
			margin = max(margin, provisioning.Space{TotalBytes: *n.Total}.Step())
		}
	}
	return margin
}

func placementHash(uid types.UID, node string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(string(uid) + "/" + node))
	return h.Sum64()
}

// candidates are the nodes this provisioner serves right now: selected by
// the spec, with a live node Lease whose report runs this ProvisionerConfig,
// with the volumes and placed claims of each.
func (c *Coordinator) candidates(v *fleetView) map[string]*nodeCandidate {
	served := map[string]*nodeCandidate{}
	// probed is, by served node, when its agent's probe found the free space
	// it reports; nil when the report does not say.
	probed := map[string]*metav1.Time{}
	for name, node := range v.nodes {
		if selected, err := selectsNode(c.spec, node); err != nil || !selected {
			continue
		}
		// Served, and Running: the status counts a Paused or Standby node
		// as served, but its instance provisions nothing, so a new claim
		// placed there would wait while a Running node could take it.
		service := serviceOf(c.nodeLeases.GetStore(), c.leaseClock, c.leaseNS, name, c.configName, v.now)
		if r := service.report; service.state == agentServing && r.Reason == v1alpha1.ReasonRunning {
			served[name] = &nodeCandidate{Name: name, Available: r.Available, Total: r.Total}
			probed[name] = r.ProbedAt
		}
	}
	// A claim counts until its volume does: the volume may be seen before
	// the binder binds the claim to it.
	made := map[types.UID]bool{}
	for _, volume := range v.volumes {
		if ref := volume.Spec.ClaimRef; ref != nil {
			made[ref.UID] = true
		}
		if n := served[backend.VolumeNode(volume)]; n != nil {
			size := storageOf(volume.Spec.Capacity)
			n.Volumes++
			n.Used += size
			// Both times are in whole seconds: a volume of the probe's
			// second counts as made after it.
			if since := probed[n.Name]; since == nil || !volume.CreationTimestamp.Before(since) {
				n.Pending += size
			}
		}
	}
	for _, claim := range v.claims {
		if n := served[claim.Annotations[provisioning.AnnSelectedNode]]; n != nil && !made[claim.UID] {
			n.count(storageOf(claim.Spec.Resources.Requests))
		}
	}
	return served
}

// count counts on n a claim of request bytes placed there, whose volume is
// not made yet.
func (n *nodeCandidate) count(request int64) {
	n.Volumes++
	n.Used += request
	n.Pending += request
}

func storageOf(resources corev1.ResourceList) int64 {
	q := resources[corev1.ResourceStorage]
	return q.Value()
}

// agentGone reports whether no node agent serves node any more: its Node
// or its Lease is gone, or the Lease expired. An Immediate claim placed
// there and still unbound is placed again: the agent stopped its work when
// it could not renew the Lease, before the Lease expired, so it makes no
// volume for the claim any more. While the agent lives, expiry is when its
// Lease expires unless renewed.
func (c *Coordinator) agentGone(node string, v *fleetView) (gone bool, expiry time.Time) {
	if v.nodes[node] == nil {
		return true, time.Time{}
	}
	s := serviceOf(c.nodeLeases.GetStore(), c.leaseClock, c.leaseNS, node, c.configName, v.now)
	return !s.agentLive(), s.expiry
}

// place places every claim of Immediate binding that waits for a node and
// sends claims selected to nodes it does not select back to the scheduler.
// It returns how soon to look again: at the retry delay for a claim that
// found no node, or when the Lease of the agent a placed claim waits for
// would expire; zero when no claim waits.
//
// Placement is one write by one leader: the leader picks the node and sets
// the claim's selected-node annotation, with the claim's resourceVersion so
// that a second leader's write fails, and only that node's agent provisions
// the claim. external-provisioner's node deployment has every node's
// instance wait a random 20-60 s before racing to own a claim; here the
// claim is placed as soon as the leader hears of it, and it still yields one
// volume, since no other agent provisions a claim selected to another node.
func (c *Coordinator) place(ctx context.Context, t *coordTerm, v *fleetView) time.Duration {
	c.withPlacements(t, v)
	served := c.candidates(v)
	var next time.Duration
	var chosen []*placement
	pending := map[types.UID]bool{}
	for _, claim := range v.claims {
		if claim.DeletionTimestamp != nil {
			continue
		}
		pending[claim.UID] = true
		class := c.immediateClass(claim)
		node, selected := claim.Annotations[provisioning.AnnSelectedNode]
		if !selected && class == nil {
			continue
		}
		if selected && class == nil {
			if c.sendBackUnselected(ctx, t, claim, v.nodes[node]) {
				next = shorter(next, v.retry)
			}
			continue
		}
		if selected {
			if gone, expiry := c.agentGone(node, v); !gone {
				if c.sendBackUnselected(ctx, t, claim, v.nodes[node]) {
					next = shorter(next, v.retry)
				}
				// Looked at again when the agent's Lease would expire
				// unrenewed: neither a renewal nor an agent's end sends an
				// event the coordinator wakes on.
				next = shorter(next, expiry.Sub(v.now))
				continue
			}
		}
		p, ok := c.choosePlacement(t, claim, c.withCloneSource(claim, allowedBy(class, served, v.nodes)))
		if !ok {
			next = shorter(next, v.retry)
		}
		if p != nil {
			chosen = append(chosen, p)
		}
	}
	if !c.writePlacements(ctx, t, chosen) {
		next = shorter(next, v.retry)
	}
	t.forgetAllBut(pending)
	return next
}

// forgetAllBut forgets the warnings and placements of every claim not in
// pending: provisioned, deleted or no longer this provisioner's.
func (t *coordTerm) forgetAllBut(pending map[types.UID]bool) {
	for uid := range t.warned {
		if !pending[uid] {
			delete(t.warned, uid)
		}
	}
	for uid := range t.placed {
		if !pending[uid] {
			delete(t.placed, uid)
		}
	}
}

// withPlacements puts into v's claims the placements of this term that the
// cache does not show yet, on copies, and forgets those it shows.
func (c *Coordinator) withPlacements(t *coordTerm, v *fleetView) {
	for i, claim := range v.claims {
		node, ok := t.placed[claim.UID]
		if !ok {
			continue
		}
		if _, shown := claim.Annotations[provisioning.AnnSelectedNode]; shown {
			delete(t.placed, claim.UID)
			continue
		}
		placed := claim.DeepCopy()
		if placed.Annotations == nil {
			placed.Annotations = map[string]string{}
		}
		placed.Annotations[provisioning.AnnSelectedNode] = node
		v.claims[i] = placed
	}
}

// immediateClass returns claim's class when it binds at once
// (volumeBindingMode Immediate, or none); nil otherwise.
func (c *Coordinator) immediateClass(claim *corev1.PersistentVolumeClaim) *storagev1.StorageClass {
	name := claim.Annotations[provisioning.AnnBetaStorageClass]
	if claim.Spec.StorageClassName != nil {
		name = *claim.Spec.StorageClassName
	}
	obj, exists, err := c.informers.Classes.GetStore().GetByKey(name)
	if err != nil || !exists {
		return nil
	}
	class, ok := obj.(*storagev1.StorageClass)
	if !ok || class.VolumeBindingMode != nil && *class.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		return nil
	}
	return class
}

// allowedBy returns the served nodes that the allowedTopologies of class
// admit, sharing their counts with served.
func allowedBy(class *storagev1.StorageClass, served map[string]*nodeCandidate, nodes map[string]*corev1.Node) map[string]*nodeCandidate {
	if len(class.AllowedTopologies) == 0 {
		return served
	}
	allowed := map[string]*nodeCandidate{}
	for name, n := range served {
		if node := nodes[name]; node != nil && slices.ContainsFunc(class.AllowedTopologies, func(term corev1.TopologySelectorTerm) bool {
			return termMatches(term, node.Labels)
		}) {
			allowed[name] = n
		}
	}
	return allowed
}

// withCloneSource narrows the nodes a clone may be placed on to the node of
// its source's volume, among allowed, sharing its count with allowed: a
// copy is made where its source is, and a node agent refuses a clone placed
// elsewhere. A clone whose source is not bound yet, or on no node allowed,
// is placed as any claim, and its agent's refusal says why.
func (c *Coordinator) withCloneSource(claim *corev1.PersistentVolumeClaim, allowed map[string]*nodeCandidate) map[string]*nodeCandidate {
	name := provisioning.CloneSourceName(claim)
	if name == "" {
		return allowed
	}
	obj, exists, err := c.informers.Claims.GetStore().GetByKey(claim.Namespace + "/" + name)
	source, ok := obj.(*corev1.PersistentVolumeClaim)
	if err != nil || !exists || !ok || source.Spec.VolumeName == "" {
		return allowed
	}
	obj, exists, err = c.informers.Volumes.GetStore().GetByKey(source.Spec.VolumeName)
	volume, ok := obj.(*corev1.PersistentVolume)
	if err != nil || !exists || !ok {
		return allowed
	}
	node := backend.VolumeNode(volume)
	if n, ok := allowed[node]; ok {
		return map[string]*nodeCandidate{node: n}
	}
	return allowed
}

// termMatches reports whether labels meet every expression of term.
func termMatches(term corev1.TopologySelectorTerm, labels map[string]string) bool {
	for _, req := range term.MatchLabelExpressions {
		if value, ok := labels[req.Key]; !ok || !slices.Contains(req.Values, value) {
			return false
		}
	}
	return true
}

// placement is the node chosen for a claim in one sync, written into the
// claim once every claim of that sync has its node.
type placement struct {
	claim   *corev1.PersistentVolumeClaim
	node    nodeCandidate
	fitting int
	room    string
	err     error
}

// choosePlacement chooses the node of claim among served and counts the
// claim there, so that the next choice of the same sync sees it. It returns
// no placement when the claim was handed over to its node's agent instead,
// and false when no node has room.
func (c *Coordinator) choosePlacement(t *coordTerm, claim *corev1.PersistentVolumeClaim, served map[string]*nodeCandidate) (*placement, bool) {
	if c.handOver(claim, served) {
		return nil, true
	}
	list := make([]nodeCandidate, 0, len(served))
	for _, n := range served {
		list = append(list, *n)
	}
	request := storageOf(claim.Spec.Resources.Requests)
	budget := budgetOf(c.spec)
	node, ok := chooseNode(claim.UID, request, list, budget)
	if !ok {
		c.warnOnce(t, claim, EventNoNodeWithRoom, c.noRoomMessage(len(list), request))
		return nil, false
	}
	served[node.Name].count(request)
	return &placement{claim: claim, node: node, fitting: countFitting(list, budget, request), room: c.roomText(budget, node)}, true
}

// writePlacements writes the chosen nodes into their claims, as many at a
// time as the provisioner has workers: each write is an API round trip, and
// claims placed one after another would each wait for all those before it,
// a wait that grows with the apiserver's latency when it is busy. It
// reports whether every write succeeded; a claim whose write failed counted
// on its node only for this sync.
func (c *Coordinator) writePlacements(ctx context.Context, t *coordTerm, chosen []*placement) bool {
	var writes errgroup.Group
	writes.SetLimit(max(1, c.config().Workers))
	for _, p := range chosen {
		writes.Go(func() error {
			p.err = c.selectNode(ctx, p.claim, p.node.Name)
			return nil
		})
	}
	_ = writes.Wait() // each write keeps its own error
	logger := klog.FromContext(ctx)
	all := true
	for _, p := range chosen {
		if p.err != nil {
			all = false
			if apierrors.IsConflict(p.err) || apierrors.IsNotFound(p.err) {
				// Changed or gone meanwhile: its event brings the next sync.
				logger.V(2).Info("Claim changed before its placement", "claim", klog.KObj(p.claim), "err", p.err)
			} else {
				utilruntime.HandleErrorWithContext(ctx, p.err, "Cannot place claim", "claim", klog.KObj(p.claim), "node", p.node.Name)
			}
			continue
		}
		delete(t.warned, p.claim.UID)
		t.placed[p.claim.UID] = p.node.Name
		logger.Info("Placed claim", "claim", klog.KObj(p.claim), "node", p.node.Name)
		c.recorder.Eventf(p.claim, corev1.EventTypeNormal, EventNodeSelected,
			"Node %s chosen for this Immediate claim among %d served nodes with room: it has the most room (%s), then the fewest volumes (%d); its node agent provisions the volume",
			p.node.Name, p.fitting, p.room, p.node.Volumes)
	}
	return all
}

func countFitting(list []nodeCandidate, b nodeBudget, request int64) int {
	n := 0
	for _, node := range list {
		if b.fits(node, request) {
			n++
		}
	}
	return n
}

func (c *Coordinator) roomText(b nodeBudget, n nodeCandidate) string {
	switch {
	case b.Storage != nil:
		return resource.NewQuantity(b.rank(n), resource.BinarySI).String() + " left in its budget"
	case n.Available != nil:
		return resource.NewQuantity(b.rank(n), resource.BinarySI).String() + " available, less what was placed there since its agent's report"
	}
	return "space unknown"
}

func (c *Coordinator) noRoomMessage(served int, request int64) string {
	if served == 0 {
		return "No node is served: no node selected by this provisioner has a running node agent; the claim waits"
	}
	b := budgetOf(c.spec)
	storage := "none"
	if b.Storage != nil {
		storage = resource.NewQuantity(*b.Storage, resource.BinarySI).String()
	}
	return fmt.Sprintf("None of the %d served nodes has room for %s in its budget (per node: maxVolumes %d, storage %s); the claim waits until room frees up",
		served, resource.NewQuantity(request, resource.BinarySI).String(), b.MaxVolumes, storage)
}

// selectNode writes node into claim's selected-node annotation, unless the
// claim changed since this leader saw it.
func (c *Coordinator) selectNode(ctx context.Context, claim *corev1.PersistentVolumeClaim, node string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": claim.ResourceVersion,
		"annotations":     map[string]string{provisioning.AnnSelectedNode: node},
	}})
	if err != nil {
		return fmt.Errorf("cannot encode the placement of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	_, err = c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("cannot place claim %s/%s on node %s: %w", claim.Namespace, claim.Name, node, err)
	}
	return nil
}

// sendBackUnselected sends claim back to the scheduler when it was
// selected to a node this provisioner does not select, where no agent makes
// its volume, and reports whether to try again later. Past
// provisioning.MaxReschedules the claim stays and its user is told.
func (c *Coordinator) sendBackUnselected(ctx context.Context, t *coordTerm, claim *corev1.PersistentVolumeClaim, node *corev1.Node) (retry bool) {
	if node == nil {
		return false
	}
	if selected, err := selectsNode(c.spec, node); err != nil || selected {
		return false
	}
	unserved := fmt.Sprintf("Node %s was selected for this claim, but this provisioner serves only %s: no volume is made there",
		node.Name, nodeList(c.selectedNodes()))
	const advice = "give the StorageClass allowedTopologies that match the served nodes"
	updated, err := provisioning.Reschedule(ctx, c.client, claim)
	switch {
	case errors.Is(err, provisioning.ErrRescheduleLimit):
		c.warnOnce(t, claim, provisioning.EventRescheduleLimit, fmt.Sprintf(
			"%s; the claim was sent back to the scheduler %d times already, the most it is, and waits: %s, then remove the claim's %s annotation",
			unserved, provisioning.MaxReschedules, advice, provisioning.AnnSelectedNode))
		return false
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err) || errors.Is(err, provisioning.ErrSelectionChanged):
		// Changed or gone meanwhile: its event brings the next sync.
		klog.FromContext(ctx).V(2).Info("Claim changed before it was sent back to the scheduler", "claim", klog.KObj(claim), "err", err)
		return false
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot send claim back to the scheduler", "claim", klog.KObj(claim), "node", node.Name)
		return true
	}
	klog.FromContext(ctx).Info("Sent claim selected to an unserved node back to the scheduler", "claim", klog.KObj(claim), "node", node.Name)
	c.recorder.Eventf(claim, corev1.EventTypeWarning, EventNodeNotServed,
		"%s; its selected node is removed so that the scheduler chooses again (%d of at most %d times); %s",
		unserved, provisioning.Reschedules(updated), provisioning.MaxReschedules, advice)
	return false
}

// selectedNodes are the names of the nodes this provisioner selects.
func (c *Coordinator) selectedNodes() []string {
	var names []string
	for _, obj := range c.informers.Nodes.GetStore().List() {
		if n, ok := obj.(*corev1.Node); ok {
			if selected, err := selectsNode(c.spec, n); err == nil && selected {
				names = append(names, n.Name)
			}
		}
	}
	return names
}

// nodeList names a few nodes, sorted, and how many more there are.
func nodeList(names []string) string {
	const shown = 10
	if len(names) == 0 {
		return "no node"
	}
	slices.Sort(names)
	if len(names) <= shown {
		return "nodes " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("nodes %s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

// warnOnce records a Warning Event on claim unless its last one said the
// same.
func (c *Coordinator) warnOnce(t *coordTerm, claim *corev1.PersistentVolumeClaim, reason, message string) {
	if t.warned[claim.UID] == reason+message {
		return
	}
	t.warned[claim.UID] = reason + message
	c.recorder.Event(claim, corev1.EventTypeWarning, reason, message)
}
