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
	"fmt"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/fleet"
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
	c.waitEvent(c.namespace, "moved", corev1.EventTypeWarning, fleet.EventNodeNotServed, c.nodes[0], served, "scheduler chooses again")
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
