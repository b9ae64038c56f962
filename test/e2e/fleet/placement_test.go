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
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/pkg/hostpathnodes"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// A WaitForFirstConsumer claim the scheduler put on a node the provisioner
// does not select is sent back to the scheduler, and provisioned on the
// served node it chooses next; one that the scheduler keeps putting on such
// a node is sent back a bounded number of times, then waits, and its user
// is told.
func TestClaimOnUnselectedNodeIsRescheduled(t *testing.T) {
	c := newNodeCluster(t)
	const name = "local"
	served := c.nodes[2]
	// Only node c, labelled disk=nvme, is selected.
	c.provisioner(name, storagev1.VolumeBindingWaitForFirstConsumer, func(hp *v1alpha1.HostPathBackend) {
		hp.NodeSelector = &v1alpha1.NodeLabelSelector{MatchLabels: map[string]string{"disk": "nvme"}}
	})
	c.waitNodes(name, "1/1")
	c.waitReady(name, 1, v1alpha1.ReasonRunning)

	c.claimOn("moved", c.nodes[0])
	c.waitSentBack("moved", 1)
	c.waitEvent(c.namespace, "moved", corev1.EventTypeWarning, hostpathnodes.EventNodeNotServed, c.nodes[0], served, "scheduler chooses again")
	// The scheduler, acting for the claim's Pod, chooses again: first
	// another unserved node, then the served one.
	c.selectNode("moved", c.nodes[1])
	c.waitSentBack("moved", 2)
	c.selectNode("moved", served)
	c.waitBound("moved")
	if diff := cmp.Diff(placement{Node: served, Disk: served}, c.placements()["moved"]); diff != "" {
		t.Errorf("volume of the rescheduled claim (-want +got):\n%s", diff)
	}

	t.Log("A claim the scheduler keeps putting on an unselected node")
	c.claimOn("stubborn", c.nodes[0])
	for sent := 1; sent <= provisioning.MaxReschedules; sent++ {
		c.waitSentBack("stubborn", sent)
		c.selectNode("stubborn", c.nodes[0])
	}
	c.waitEvent(c.namespace, "stubborn", corev1.EventTypeWarning, provisioning.EventRescheduleLimit,
		c.nodes[0], fmt.Sprintf("%d times", provisioning.MaxReschedules))
	claim, err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).Get(c.ctx, "stubborn", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node := claim.Annotations[provisioning.AnnSelectedNode]; node != c.nodes[0] {
		t.Errorf("past the bound the claim is selected to %q, want it left on %s", node, c.nodes[0])
	}
	if got := claim.Annotations[provisioning.AnnReschedules]; got != strconv.Itoa(provisioning.MaxReschedules) {
		t.Errorf("the claim was sent back %s times, want %d", got, provisioning.MaxReschedules)
	}
	if p, ok := c.placements()["stubborn"]; ok {
		t.Errorf("the claim on the unselected node got a volume on %+v", p)
	}
}

// waitSentBack waits until the claim name has no selected node and was sent
// back to the scheduler times times.
func (c *nodeCluster) waitSentBack(name string, times int) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("claim %s sent back to the scheduler %d times", name, times), func(ctx context.Context) (bool, error) {
		claim, err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		_, selected := claim.Annotations[provisioning.AnnSelectedNode]
		return !selected && claim.Annotations[provisioning.AnnReschedules] == strconv.Itoa(times), nil
	})
}

// selectNode selects node for the claim name, as the scheduler does for a
// Pod's WaitForFirstConsumer claim; no scheduler runs here.
func (c *nodeCluster) selectNode(name, node string) {
	c.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, provisioning.AnnSelectedNode, node)
	if _, err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).Patch(c.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		c.t.Fatalf("cannot select node %s for claim %s: %v", node, name, err)
	}
}

// A burst of Immediate claims without a capacity budget spreads over three
// equal nodes: the free space the agents report is reported again only when
// it moves by a hundredth of the disk, so the claims placed since count
// against it, and the volumes it counts already do not count again. Node a
// holds a large volume (a directory, which takes no room until written)
// made before its agent's report.
func TestImmediateBurstSpreadsWithoutBudget(t *testing.T) {
	c := newNodeCluster(t)
	const name = "burst"
	c.provisioner(name, storagev1.VolumeBindingImmediate)
	c.waitNodes(name, "3/3")
	c.waitReady(name, 1, v1alpha1.ReasonRunning)

	var st unix.Statfs_t
	if err := unix.Statfs(c.disks[c.nodes[0]], &st); err != nil {
		t.Fatal(err)
	}
	large := int64(st.Bavail) * st.Bsize / 2 //nolint:gosec // a disk's size fits an int64
	if large < 8<<30 {
		t.Skipf("the disk has %d bytes free; the test needs a volume of 8Gi or more to tell nodes apart", 2*large)
	}
	c.claimSized("before-a", name, c.nodes[0], resource.NewQuantity(large, resource.BinarySI).String())
	c.claimSized("before-b", name, c.nodes[1], "1Mi")
	c.claimSized("before-c", name, c.nodes[2], "1Mi")
	c.waitBound("before-a", "before-b", "before-c")

	// Creation times are whole seconds, and the coordinator counts a volume
	// of its probe's second as made after the probe: the agents must probe
	// in a later second for their reports to count those volumes.
	pvs, err := c.kube.CoreV1().PersistentVolumes().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for _, pv := range pvs.Items {
		if pv.CreationTimestamp.After(last) {
			last = pv.CreationTimestamp.Time
		}
	}
	time.Sleep(time.Until(last.Add(time.Second)))

	t.Log("The agents start again: their reports come after those volumes")
	for i, node := range c.nodes {
		if err := c.agents[node].Terminate(10 * time.Second); err != nil {
			t.Fatalf("agent of %s on SIGTERM: %v", node, err)
		}
		identity := fmt.Sprintf("agent-%c-again", 'a'+i)
		c.agents[node] = c.startAgent(identity, node, c.disks[node])
		c.waitSpaceReported(node, name, identity)
	}

	var burst []string
	for i := range 6 {
		claim := fmt.Sprintf("burst-%d", i)
		c.claim(claim, name)
		burst = append(burst, claim)
	}
	c.waitBound(burst...)
	placements := c.placements()
	perNode := map[string]int{}
	for _, claim := range burst {
		perNode[placements[claim].Node]++
	}
	if diff := cmp.Diff(map[string]int{c.nodes[0]: 2, c.nodes[1]: 2, c.nodes[2]: 2}, perNode); diff != "" {
		t.Errorf("claims of the burst per node (-want +got):\n%s", diff)
	}
}

// claimSized creates a claim of class asking for size, selected to node.
func (c *nodeCluster) claimSized(name, class, node, size string) {
	c.t.Helper()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.namespace, Annotations: map[string]string{provisioning.AnnSelectedNode: node}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if _, err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).Create(c.ctx, claim, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("cannot create claim %s: %v", name, err)
	}
}

// waitSpaceReported waits until the agent identity holds the Lease of node
// and reports the free space of the ProvisionerConfig name there.
func (c *nodeCluster) waitSpaceReported(node, name, identity string) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("agent %s reporting the space of %s", identity, node), func(ctx context.Context) (bool, error) {
		lease, err := c.kube.CoordinationV1().Leases(testenv.NodeAgentNamespace).Get(ctx, hostpathnodes.NodeLeaseName(node), metav1.GetOptions{})
		if err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != identity {
			return false, nil
		}
		var reports map[string]struct {
			Reason    string `json:"reason"`
			Available *int64 `json:"available"`
		}
		if err := json.Unmarshal([]byte(lease.Annotations[hostpathnodes.AnnNodeReport]), &reports); err != nil {
			return false, nil
		}
		r := reports[name]
		return r.Reason == v1alpha1.ReasonRunning && r.Available != nil, nil
	})
}
