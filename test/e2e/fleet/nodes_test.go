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
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
	"github.com/provfleet/provfleet/pkg/hostpathnodes"
)

// nodeCluster is three Nodes, each with a node agent whose own folder
// stands for the node's disk, and a manager in its own role.
type nodeCluster struct {
	*fixture
	nodes  []string
	disks  map[string]string // by node: the agent's --host-path-root
	agents map[string]*managerproc.Process
}

func newNodeCluster(t *testing.T) *nodeCluster {
	t.Helper()
	f := newFixture(t)
	c := &nodeCluster{fixture: f, disks: map[string]string{}, agents: map[string]*managerproc.Process{}}
	for i, suffix := range []string{"a", "b", "c"} {
		node := f.prefix + "-" + suffix
		labels := map[string]string{}
		if i == 2 {
			labels["disk"] = "nvme"
		}
		f.node(node, labels)
		c.nodes = append(c.nodes, node)
		c.disks[node] = filepath.Join(f.root, "disk-"+suffix)
		if err := os.MkdirAll(c.disks[node], 0o755); err != nil {
			t.Fatal(err)
		}
		c.agents[node] = f.startAgent("agent-"+suffix, node, c.disks[node])
	}
	f.startManagerRole("nodes-manager")
	return c
}

// provisioner creates a hostPath ProvisionerConfig served on every node:
// node a and b by name, c, labelled disk=nvme, by selector, each under its
// own disk, and a StorageClass of binding mode mode.
func (c *nodeCluster) provisioner(name string, mode storagev1.VolumeBindingMode, mutate ...func(*v1alpha1.HostPathBackend)) {
	c.t.Helper()
	c.fixture.provisioner(name, func(pc *v1alpha1.ProvisionerConfig) {
		hp := pc.Spec.Backend.HostPath
		hp.Path = v1alpha1.AbsolutePath(filepath.Join(c.root, "nowhere"))
		hp.NodePaths = []v1alpha1.NodePath{
			{Nodes: []string{c.nodes[0]}, Path: v1alpha1.AbsolutePath(filepath.Join(c.disks[c.nodes[0]], "volumes"))},
			{Nodes: []string{c.nodes[1]}, Path: v1alpha1.AbsolutePath(filepath.Join(c.disks[c.nodes[1]], "volumes"))},
			{NodeSelector: &v1alpha1.NodeLabelSelector{MatchLabels: map[string]string{"disk": "nvme"}}, Path: v1alpha1.AbsolutePath(filepath.Join(c.disks[c.nodes[2]], "fast"))},
		}
		for _, m := range mutate {
			m(hp)
		}
	})
	class, err := c.kube.StorageV1().StorageClasses().Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	if *class.VolumeBindingMode != mode {
		// The binding mode cannot change: make the class again.
		if err := c.kube.StorageV1().StorageClasses().Delete(c.ctx, name, metav1.DeleteOptions{}); err != nil {
			c.t.Fatal(err)
		}
		class.ResourceVersion, class.VolumeBindingMode = "", ptr.To(mode)
		if _, err := c.kube.StorageV1().StorageClasses().Create(c.ctx, class, metav1.CreateOptions{}); err != nil {
			c.t.Fatal(err)
		}
	}
}

// claimOn creates a claim of the class local whose volume the scheduler
// selected node for, as it does for a WaitForFirstConsumer claim of a
// scheduled Pod.
func (c *nodeCluster) claimOn(name, node string) {
	c.t.Helper()
	c.fixture.claimOn(name, "local", node)
}

// placement is where a claim's volume is: the node its PV is pinned to and
// the disk its directory is on.
type placement struct{ Node, Disk string }

// placements returns, per bound claim of the test, where its volume is.
func (c *nodeCluster) placements() map[string]placement {
	c.t.Helper()
	pvs, err := c.kube.CoreV1().PersistentVolumes().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]placement{}
	for _, pv := range pvs.Items {
		ref := pv.Spec.ClaimRef
		if ref == nil || ref.Namespace != c.namespace {
			continue
		}
		if _, twice := out[ref.Name]; twice {
			c.t.Errorf("claim %s has two PVs", ref.Name)
		}
		var p placement
		if aff := pv.Spec.NodeAffinity; aff != nil && aff.Required != nil {
			p.Node = strings.Join(aff.Required.NodeSelectorTerms[0].MatchExpressions[0].Values, ",")
		}
		for node, disk := range c.disks {
			if strings.HasPrefix(pv.Spec.HostPath.Path, disk+"/") {
				p.Disk = node
			}
		}
		out[ref.Name] = p
	}
	return out
}

// directories counts the volume directories on each node's disk.
func (c *nodeCluster) directories() map[string]int {
	out := map[string]int{}
	for node := range c.disks {
		if dirs := c.volumeDirs(node); len(dirs) > 0 {
			out[node] = len(dirs)
		}
	}
	return out
}

// volumeDirs returns the names of the volume directories on node's disk.
func (c *nodeCluster) volumeDirs(node string) []string {
	var dirs []string
	for _, base := range []string{"volumes", "fast"} {
		entries, err := os.ReadDir(filepath.Join(c.disks[node], base))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				dirs = append(dirs, e.Name())
			}
		}
	}
	return dirs
}

// nodeReport is what the agent of node reports on the ProvisionerConfig
// name in its Lease.
func (c *nodeCluster) nodeReport(node, name string) (reason string, generation int64) {
	c.t.Helper()
	lease, err := c.kube.CoordinationV1().Leases(testenv.NodeAgentNamespace).Get(c.ctx, hostpathnodes.NodeLeaseName(node), metav1.GetOptions{})
	if err != nil {
		return "", 0
	}
	var reports map[string]struct {
		Generation int64  `json:"generation"`
		Reason     string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(lease.Annotations[hostpathnodes.AnnNodeReport]), &reports); err != nil {
		return "", 0
	}
	return reports[name].Reason, reports[name].Generation
}

// nodeLeaseHolder is the holder of node's Lease.
func (c *nodeCluster) nodeLeaseHolder(node string) string {
	c.t.Helper()
	lease, err := c.kube.CoordinationV1().Leases(testenv.NodeAgentNamespace).Get(c.ctx, hostpathnodes.NodeLeaseName(node), metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// waitNodes waits until status.nodes of name reads summary.
func (c *nodeCluster) waitNodes(name, summary string) *v1alpha1.ProvisionerConfig {
	c.t.Helper()
	var pc *v1alpha1.ProvisionerConfig
	c.eventually(fmt.Sprintf("ProvisionerConfig %s serving %s nodes", name, summary), func(ctx context.Context) (bool, error) {
		var err error
		pc, err = c.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(ctx, name, metav1.GetOptions{})
		return err == nil && pc.Status.Nodes != nil && pc.Status.Nodes.Summary == summary, nil
	})
	return pc
}

// Three node agents serve one ProvisionerConfig: each claim lands on the node
// the scheduler selected, in that node's directory only (the per-node paths
// by name and by selector honoured); a re-tune reaches every agent; a
// killed agent stops its node's work only, and its node catches up when an
// agent returns; two agents of one node provision nothing twice.
func TestNodeAgentsServeTheirNodes(t *testing.T) {
	c := newNodeCluster(t)
	const name = "local"
	c.provisioner(name, storagev1.VolumeBindingWaitForFirstConsumer)
	c.waitNodes(name, "3/3")
	c.waitReady(name, 1, v1alpha1.ReasonRunning)

	want := map[string]placement{}
	for i, node := range c.nodes {
		for j := range 2 {
			claim := fmt.Sprintf("on-%d-%d", i, j)
			c.claimOn(claim, node)
			want[claim] = placement{Node: node, Disk: node}
		}
	}
	c.waitBound(slices.Collect(maps.Keys(want))...)
	if diff := cmp.Diff(want, c.placements()); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{c.nodes[0]: 2, c.nodes[1]: 2, c.nodes[2]: 2}, c.directories()); diff != "" {
		t.Errorf("directories per node (-want +got):\n%s", diff)
	}

	t.Log("A re-tune reaches every agent")
	var edited *v1alpha1.ProvisionerConfig
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		edited = c.config(name)
		edited.Spec.Workers = 3
		edited, err = c.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Update(c.ctx, edited, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c.eventually(fmt.Sprintf("every agent runs generation %d", edited.Generation), func(context.Context) (bool, error) {
		for _, node := range c.nodes {
			if reason, generation := c.nodeReport(node, name); reason != v1alpha1.ReasonRunning || generation != edited.Generation {
				return false, nil
			}
		}
		return true, nil
	})

	t.Log("A killed agent stops only its node's work")
	killed := c.nodes[1]
	c.agents[killed].Kill()
	c.claimOn("after-kill-b", killed)
	c.claimOn("after-kill-a", c.nodes[0])
	c.waitBound("after-kill-a")
	pc := c.waitNodes(name, "2/3")
	if u := pc.Status.Nodes.Unserved; len(u) != 1 || u[0].Node != killed || u[0].Reason != v1alpha1.ReasonNoNodeAgent {
		t.Errorf("unserved nodes: %+v", u)
	}
	c.waitEvent("", name, corev1.EventTypeWarning, "NodeNotServed", killed)
	if placed, ok := c.placements()["after-kill-b"]; ok {
		t.Errorf("the claim of the killed agent's node got a volume on %+v", placed)
	}
	c.agents[killed] = c.startAgent("agent-b-again", killed, c.disks[killed])
	c.waitBound("after-kill-b")
	// Made by the returned agent on its node: no other agent took the claim
	// while its node was unserved.
	if diff := cmp.Diff(placement{Node: killed, Disk: killed}, c.placements()["after-kill-b"]); diff != "" {
		t.Errorf("the killed node's claim once its agent returned (-want +got):\n%s", diff)
	}
	c.waitNodes(name, "3/3")

	t.Log("Two agents of one node provision nothing twice")
	surge := c.nodes[0]
	second := c.startAgent("agent-a-surge", surge, c.disks[surge])
	var surged []string
	for i := range 5 {
		claim := fmt.Sprintf("surge-%d", i)
		c.claimOn(claim, surge)
		surged = append(surged, claim)
	}
	c.waitBound(surged...)
	if holder := c.nodeLeaseHolder(surge); holder != "agent-a" {
		t.Errorf("node %s's Lease is held by %q, want the first agent", surge, holder)
	}
	// The first agent leaves, as a rolling update stops it: the second
	// takes over at once, the Lease released.
	if err := c.agents[surge].Terminate(10 * time.Second); err != nil {
		t.Errorf("first agent of %s on SIGTERM: %v", surge, err)
	}
	c.agents[surge] = second
	c.claimOn("after-surge", surge)
	c.waitBound("after-surge")
	placements := c.placements()
	byNode := map[string]int{}
	for claim, p := range placements {
		if p.Node != p.Disk {
			t.Errorf("claim %s: PV pinned to %s, directory on %s", claim, p.Node, p.Disk)
		}
		byNode[p.Node]++
	}
	if diff := cmp.Diff(byNode, c.directories()); diff != "" {
		t.Errorf("directories per node against PVs per node (-PVs +directories):\n%s", diff)
	}
}

// Immediate claims are placed by the manager on the served nodes by room,
// each provisioned once; a removed node's volumes are deleted after the
// grace period, and when the node comes back under its name its agent
// removes their directories, but for the one an admin switched to Retain.
func TestImmediateClaimsAndARemovedNode(t *testing.T) {
	c := newNodeCluster(t)
	const name = "spread"
	c.provisioner(name, storagev1.VolumeBindingImmediate, func(hp *v1alpha1.HostPathBackend) {
		hp.Capacity = &v1alpha1.CapacitySpec{MaxVolumes: 3}
		hp.NodeRemoval = &v1alpha1.NodeRemoval{Policy: v1alpha1.NodeRemovalDelete, GracePeriod: &metav1.Duration{Duration: 3 * time.Second}}
	})
	c.waitReady(name, 1, v1alpha1.ReasonRunning)
	c.waitNodes(name, "3/3")

	var claims []string
	for i := range 6 {
		claim := fmt.Sprintf("immediate-%d", i)
		c.claim(claim, name)
		claims = append(claims, claim)
	}
	c.waitBound(claims...)
	placements := c.placements()
	perNode := map[string]int{}
	for _, claim := range claims {
		p := placements[claim]
		if p.Node != p.Disk {
			t.Errorf("claim %s: PV pinned to %q, directory on %q", claim, p.Node, p.Disk)
		}
		live, err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).Get(c.ctx, claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if selected := live.Annotations["volume.kubernetes.io/selected-node"]; selected != p.Node {
			t.Errorf("claim %s selected to %q, its volume is on %q", claim, selected, p.Node)
		}
		perNode[p.Node]++
	}
	// Three nodes with equal room: two claims each, which the rest counts on.
	if diff := cmp.Diff(map[string]int{c.nodes[0]: 2, c.nodes[1]: 2, c.nodes[2]: 2}, perNode); diff != "" {
		t.Fatalf("claims per node (-want +got):\n%s", diff)
	}
	c.waitEvent(c.namespace, claims[0], corev1.EventTypeNormal, hostpathnodes.EventNodeSelected)

	t.Log("Node c is removed, with its agent")
	removed := c.nodes[2]
	var removedClaims, removedVolumes []string
	for _, claim := range claims {
		if placements[claim].Node == removed {
			removedClaims = append(removedClaims, claim)
			live, err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).Get(c.ctx, claim, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			removedVolumes = append(removedVolumes, live.Spec.VolumeName)
		}
	}
	// An admin keeps the data of one of them: its directory must stay.
	retained := removedVolumes[1]
	patch := []byte(`{"spec":{"persistentVolumeReclaimPolicy":"Retain"}}`)
	if _, err := c.kube.CoreV1().PersistentVolumes().Patch(c.ctx, retained, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c.agents[removed].Kill()
	if err := c.kube.CoreV1().Nodes().Delete(c.ctx, removed, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitEvent("", removedVolumes[0], corev1.EventTypeWarning, hostpathnodes.EventNodeRemoved)
	c.waitEvent(c.namespace, removedClaims[0], corev1.EventTypeWarning, hostpathnodes.EventNodeRemoved)
	// After the grace period the manager deletes the volumes; a bound PV
	// goes once its claim, lost, is deleted.
	c.waitEvent("", removedVolumes[0], corev1.EventTypeWarning, hostpathnodes.EventNodeRemovedVolumeDelete)
	for _, claim := range removedClaims {
		if err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).Delete(c.ctx, claim, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pv := range removedVolumes {
		c.waitGone(pv)
	}
	if got := c.directories()[removed]; got != 2 {
		t.Errorf("%d directories on the removed node's disk, want its 2, out of reach meanwhile", got)
	}
	// The manager lists them, by name and UID, where no agent may write.
	list, err := c.kube.CoreV1().ConfigMaps(testenv.NodeAgentNamespace).Get(c.ctx, hostpathnodes.RemovedListName(removed), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("removal list of node %s: %v", removed, err)
	}
	var listed []struct{ Name, UID string }
	if err := json.Unmarshal([]byte(list.Data[name]), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(removedVolumes) || listed[0].UID == "" {
		t.Errorf("removal list of node %s: %+v, want its %d volumes with their UIDs", removed, listed, len(removedVolumes))
	}
	// Its Node gone and its agent too, the node's Lease goes once expired;
	// the removal list stays for a node that may come back.
	c.eventually("the removed node's Lease deleted", func(ctx context.Context) (bool, error) {
		_, err := c.kube.CoordinationV1().Leases(testenv.NodeAgentNamespace).Get(ctx, hostpathnodes.NodeLeaseName(removed), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if _, err := c.kube.CoreV1().ConfigMaps(testenv.NodeAgentNamespace).Get(c.ctx, hostpathnodes.RemovedListName(removed), metav1.GetOptions{}); err != nil {
		t.Errorf("removal list of node %s once its Lease went: %v", removed, err)
	}

	t.Log("The node comes back under its name")
	c.node(removed, map[string]string{"disk": "nvme"})
	c.agents[removed] = c.startAgent("agent-c-again", removed, c.disks[removed])
	// The agent says what it released in its Lease; the manager takes them
	// off the list, and deletes the list once empty.
	c.eventually("the node's removal list emptied and deleted", func(ctx context.Context) (bool, error) {
		_, err := c.kube.CoreV1().ConfigMaps(testenv.NodeAgentNamespace).Get(ctx, hostpathnodes.RemovedListName(removed), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if diff := cmp.Diff([]string{retained}, c.volumeDirs(removed)); diff != "" {
		t.Errorf("directories left on the node that came back, want the retained volume's alone (-want +got):\n%s", diff)
	}
	if got := c.directories(); got[c.nodes[0]] != 2 || got[c.nodes[1]] != 2 {
		t.Errorf("directories of the other nodes: %v, want 2 each", got)
	}
}
