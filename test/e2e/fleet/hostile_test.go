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
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/hostpathnodes"
)

// hostileAgent is a process that holds the credentials of the node agent of
// one node, as a compromised node does: the agents' ServiceAccount with a
// token bound to the agent's Pod on that node.
type hostileAgent struct {
	c      *nodeCluster
	client kubernetes.Interface
	node   string
}

// A node agent's credentials reach only its own node: a process holding
// those of node A, bound to A's agent Pod as the DaemonSet's are, is refused
// by the API server every write that would reach another node, another
// provisioner or what the manager alone decides, and nothing of node B
// changes; meanwhile the legitimate agent of node A provisions every claim
// selected for it. A provisioner that pins by another node label than the
// host name lets the agent pin to its own node's value of that label only.
func TestHostileNodeAgentReachesOnlyItsNode(t *testing.T) {
	c := newNodeCluster(t)
	const name = "local"
	c.provisioner(name, storagev1.VolumeBindingWaitForFirstConsumer)
	c.waitNodes(name, "3/3")
	a, b := c.nodes[0], c.nodes[1]
	c.labelNode(a, rackKey, "rack-1")
	c.labelNode(b, rackKey, "rack-2")
	racked := c.fixture.provisioner("racked", func(pc *v1alpha1.ProvisionerConfig) {
		rackedOn(a, filepath.Join(c.disks[a], "racked"))(pc.Spec.Backend.HostPath)
	})
	c.waitNodes("racked", "1/1")
	c.claimOn("on-a", a)
	c.claimOn("on-b", b)
	c.waitBound("on-a", "on-b")
	ownVolume, victim := c.boundVolume("on-a"), c.boundVolume("on-b")
	foreign := c.foreignVolume(a)

	config, err := testenv.Env(t).NodeAgentPodConfig(c.ctx, repoRootOf(t), a)
	if err != nil {
		t.Fatal(err)
	}
	h := &hostileAgent{c: c, client: kubernetes.NewForConfigOrDie(config), node: a}
	h.checkNodeName(t)

	before := c.nodeState(b, victim.Name, foreign.Name)
	var legit []string
	attacks := append(h.attacks(ownVolume, victim, foreign), h.pinAttacks(string(racked.Spec.ProvisionerName), filepath.Join(c.disks[a], "racked"))...)
	for i, attack := range attacks {
		err := attack.do(c.ctx)
		if !apierrors.IsForbidden(err) && (!attack.invalidToo || !apierrors.IsInvalid(err)) {
			t.Errorf("%s: want Forbidden from the API server, got %v", attack.name, err)
		} else {
			t.Logf("%s: refused: %v", attack.name, err)
		}
		// The agent of node A goes on provisioning between the attacks.
		claim := fmt.Sprintf("during-%d", i)
		c.claimOn(claim, a)
		legit = append(legit, claim)
	}
	c.waitBound(legit...)
	for _, claim := range legit {
		if got := c.placements()[claim]; got != (placement{Node: a, Disk: a}) {
			t.Errorf("claim %s: volume on %+v, want node %s", claim, got, a)
		}
	}
	if diff := cmp.Diff(before, c.nodeState(b, victim.Name, foreign.Name)); diff != "" {
		t.Errorf("node %s after the attacks (-before +after):\n%s", b, diff)
	}
}

// checkNodeName checks that the API server sees the hostile token's user
// with its node's name, which the node restriction policies key on.
func (h *hostileAgent) checkNodeName(t *testing.T) {
	t.Helper()
	review, err := h.client.AuthenticationV1().SelfSubjectReviews().Create(h.c.ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := []string(review.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"])
	if diff := cmp.Diff([]string{h.node}, got); diff != "" {
		t.Fatalf("node name in the agent's user (-want +got):\n%s", diff)
	}
}

// attack is one write a hostile agent tries.
type attack struct {
	name string
	do   func(ctx context.Context) error
	// invalidToo: the API server's validation may refuse it before the
	// policies see it.
	invalidToo bool
}

// attacks are the writes the agent of h.node may not make: own is a volume of
// its node, victim one of another node, foreign one of another provisioner
// on its node.
func (h *hostileAgent) attacks(own, victim, foreign *corev1.PersistentVolume) []attack {
	c, pvs := h.c, h.client.CoreV1().PersistentVolumes()
	victimNode := backend.VolumeNode(victim)
	provisioner := own.Annotations["pv.kubernetes.io/provisioned-by"]
	ownBase := filepath.Dir(volumePath(own))
	victimBase := filepath.Dir(volumePath(victim))
	create := func(pv *corev1.PersistentVolume) func(context.Context) error {
		return func(ctx context.Context) error { _, err := pvs.Create(ctx, pv, metav1.CreateOptions{}); return err }
	}
	patchPV := func(name, patch string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := pvs.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		}
	}
	deletePV := func(name string) func(context.Context) error {
		return func(ctx context.Context) error { return pvs.Delete(ctx, name, metav1.DeleteOptions{}) }
	}
	retarget := fmt.Sprintf(`{"spec":{"claimRef":{"namespace":%q,"name":"on-a","uid":%q}}}`, c.namespace, own.Spec.ClaimRef.UID)
	return []attack{
		{"create a PV pinned to node B", create(c.hostilePV("to-b", victimNode, victimNode, provisioner, filepath.Join(victimBase, "x"))), false},
		{"create a PV that says node A but is pinned to node B", create(c.hostilePV("says-a", h.node, victimNode, provisioner, filepath.Join(ownBase, "x"))), false},
		{"create a hostPath PV of /", create(c.hostilePV("root", h.node, h.node, provisioner, "/")), false},
		{"create a PV below its base that climbs out with ..", create(c.hostilePV("climb", h.node, h.node, provisioner, ownBase+"/x/../../../")), true},
		{"create a PV of another provisioner on its node", create(c.hostilePV("other", h.node, h.node, "example.com/other", filepath.Join(ownBase, "x"))), false},
		{"change the claimRef of a PV of node B", patchPV(victim.Name, retarget), false},
		{"change the reclaim policy of a PV of node B", patchPV(victim.Name, `{"spec":{"persistentVolumeReclaimPolicy":"Retain"}}`), false},
		{"change the claimRef of a PV of another provisioner", patchPV(foreign.Name, retarget), false},
		{"change the reclaim policy of a PV of another provisioner", patchPV(foreign.Name, `{"spec":{"persistentVolumeReclaimPolicy":"Delete"}}`), false},
		{"change the claimRef of a PV of its own", patchPV(own.Name, fmt.Sprintf(`{"spec":{"claimRef":{"namespace":%q,"name":"on-b","uid":%q}}}`, c.namespace, victim.Spec.ClaimRef.UID)), false},
		{"patch a claim selected for node B", h.patchClaim("on-b", `{"metadata":{"annotations":{"hostile":"yes"}}}`), false},
		{"select node B for a claim of its own", h.patchClaim("on-a", fmt.Sprintf(`{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":%q}}}`, victimNode)), false},
		{"update node B's Lease", h.takeLease(victimNode), false},
		{"delete node B's Lease", func(ctx context.Context) error {
			return h.client.CoordinationV1().Leases(testenv.NodeAgentNamespace).Delete(ctx, hostpathnodes.NodeLeaseName(victimNode), metav1.DeleteOptions{})
		}, false},
		{"add a removal entry for node B to its Lease", h.annotateLease(victimNode), false},
		{"add a removal entry for node B to its own Lease", h.annotateLease(h.node), false},
		{"write the removal list of node B", h.writeRemovedList(victimNode, victim), false},
		{"delete a PV of node B", deletePV(victim.Name), false},
		{"delete a PV of another provisioner", deletePV(foreign.Name), false},
	}
}

// pinAttacks are the PVs of the provisioner that pins by rackKey, in its
// base on h.node, that the agent may not make: pinned by that label to
// another node's value, or to a value no pin line lists.
func (h *hostileAgent) pinAttacks(provisioner, base string) []attack {
	create := func(name string, values ...string) func(context.Context) error {
		pv := h.c.hostilePV(name, h.node, h.node, provisioner, filepath.Join(base, name))
		pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0] = corev1.NodeSelectorRequirement{
			Key: rackKey, Operator: corev1.NodeSelectorOpIn, Values: values,
		}
		return func(ctx context.Context) error {
			_, err := h.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
			return err
		}
	}
	return []attack{
		{"create a PV pinned by the rack label to node B's rack", create("rack-b", "rack-2"), false},
		{"create a PV pinned by the rack label to a rack of no node", create("rack-x", "rack-9"), false},
		{"create a PV pinned by the rack label to its own rack and another", create("racks", "rack-1", "rack-2"), false},
	}
}

// volumePath is the directory of a local or hostPath volume.
func volumePath(pv *corev1.PersistentVolume) string {
	if pv.Spec.Local != nil {
		return pv.Spec.Local.Path
	}
	return pv.Spec.HostPath.Path
}

// hostilePV is a hostPath PV that says it is of node and provisioner, pinned
// to pinned, of the directory path.
func (c *nodeCluster) hostilePV(name, node, pinned, provisioner, path string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        c.prefix + "-hostile-" + name,
			Annotations: map[string]string{backend.AnnNode: node, "pv.kubernetes.io/provisioned-by": provisioner},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "local",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{pinned}}},
			}}}},
		},
	}
}

func (h *hostileAgent) patchClaim(name, patch string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := h.client.CoreV1().PersistentVolumeClaims(h.c.namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
}

// takeLease makes the hostile agent the holder of node's Lease.
func (h *hostileAgent) takeLease(node string) func(context.Context) error {
	return func(ctx context.Context) error {
		leases := h.client.CoordinationV1().Leases(testenv.NodeAgentNamespace)
		lease, err := leases.Get(ctx, hostpathnodes.NodeLeaseName(node), metav1.GetOptions{})
		if err != nil {
			return err
		}
		lease.Spec.HolderIdentity = ptr.To("hostile")
		lease.Spec.RenewTime = &metav1.MicroTime{Time: lease.CreationTimestamp.Time}
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err
	}
}

// annotateLease lists a removed volume of node on node's Lease, where
// older managers kept them, with an update: the agents may update Leases,
// not patch them.
func (h *hostileAgent) annotateLease(node string) func(context.Context) error {
	return func(ctx context.Context) error {
		leases := h.client.CoordinationV1().Leases(testenv.NodeAgentNamespace)
		lease, err := leases.Get(ctx, hostpathnodes.NodeLeaseName(node), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[hostpathnodes.AnnRemovedVolumes] = `{"local":{"pvc-retained":"Delete"}}`
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err
	}
}

// writeRemovedList creates node's removal list, naming volume.
func (h *hostileAgent) writeRemovedList(node string, volume *corev1.PersistentVolume) func(context.Context) error {
	return func(ctx context.Context) error {
		entry, err := json.Marshal([]map[string]string{{"name": volume.Name, "uid": string(volume.UID), "onDelete": "Delete"}})
		if err != nil {
			return err
		}
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: hostpathnodes.RemovedListName(node), Labels: map[string]string{hostpathnodes.LabelRemovedList: "true"},
				Annotations: map[string]string{hostpathnodes.AnnRemovedListNode: node}},
			Data: map[string]string{"local": string(entry)},
		}
		_, err = h.client.CoreV1().ConfigMaps(testenv.NodeAgentNamespace).Create(ctx, cm, metav1.CreateOptions{})
		return err
	}
}

// boundVolume is the PV bound to claim.
func (c *nodeCluster) boundVolume(claim string) *corev1.PersistentVolume {
	c.t.Helper()
	got, err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).Get(c.ctx, claim, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	pv, err := c.kube.CoreV1().PersistentVolumes().Get(c.ctx, got.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return pv
}

// foreignVolume makes, as an admin would, a Retained local PV of node of
// another provisioner, in the node's disk.
func (c *nodeCluster) foreignVolume(node string) *corev1.PersistentVolume {
	c.t.Helper()
	pv := c.hostilePV("foreign", node, node, "example.com/other", filepath.Join(c.disks[node], "foreign"))
	pv.Name = c.prefix + "-foreign"
	// A class no claim of the test asks for: the binder leaves it alone.
	pv.Spec.StorageClassName = "foreign"
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	created, err := c.kube.CoreV1().PersistentVolumes().Create(c.ctx, pv, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		_ = c.kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	return created
}

// volumeState is what an attack could change of a PV or a claim.
type volumeState struct {
	Annotations map[string]string
	Finalizers  []string
	Deleting    bool
	Spec        any
}

// nodeState is what the attacks could change of node: its volumes and
// claims, the holder of its Lease, its removal list, the volume
// directories on its disk, the PVs named, and the PVs the hostile agent
// tried to make.
func (c *nodeCluster) nodeState(node string, volumes ...string) map[string]any {
	c.t.Helper()
	state := map[string]any{}
	for _, name := range volumes {
		pv, err := c.kube.CoreV1().PersistentVolumes().Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			c.t.Fatal(err)
		}
		state["pv "+name] = volumeState{Annotations: pv.Annotations, Finalizers: pv.Finalizers, Deleting: pv.DeletionTimestamp != nil, Spec: pv.Spec}
	}
	claims, err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	for _, claim := range claims.Items {
		if claim.Annotations["volume.kubernetes.io/selected-node"] == node {
			state["claim "+claim.Name] = volumeState{Annotations: claim.Annotations, Finalizers: claim.Finalizers, Deleting: claim.DeletionTimestamp != nil, Spec: claim.Spec}
		}
	}
	lease, err := c.kube.CoordinationV1().Leases(testenv.NodeAgentNamespace).Get(c.ctx, hostpathnodes.NodeLeaseName(node), metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	state["lease holder"] = ptr.Deref(lease.Spec.HolderIdentity, "")
	state["lease removed volumes"] = lease.Annotations[hostpathnodes.AnnRemovedVolumes]
	_, err = c.kube.CoreV1().ConfigMaps(testenv.NodeAgentNamespace).Get(c.ctx, hostpathnodes.RemovedListName(node), metav1.GetOptions{})
	state["removal list"] = !apierrors.IsNotFound(err)
	state["directories"] = slices.Sorted(slices.Values(c.volumeDirs(node)))
	pvs, err := c.kube.CoreV1().PersistentVolumes().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var hostile []string
	for _, pv := range pvs.Items {
		if strings.HasPrefix(pv.Name, c.prefix+"-hostile-") {
			hostile = append(hostile, pv.Name)
		}
	}
	state["hostile PVs"] = hostile
	return state
}

// repoRootOf is the root of the repository.
func repoRootOf(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
