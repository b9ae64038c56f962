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
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// TestHandOver has a coordinator sync one Immediate claim that no node was
// selected for, and checks whether it wrote a placement or left the claim to
// the process's own node instance.
func TestHandOver(t *testing.T) {
	tests := map[string]struct {
		nodeName, localNode string
		// open: the local node instance runs.
		open         bool
		hostname     string
		topologyNode string
		wantPlaced   string
		wantHanded   bool
	}{
		"one-node config of this process's node": {nodeName: "n1", localNode: "n1", open: true, wantHanded: true},
		"one-node config of another node":        {nodeName: "n1", localNode: "n2", open: true, wantPlaced: "n1"},
		"config of every node":                   {localNode: "n1", open: true, wantPlaced: "n1"},
		"process without the node role":          {nodeName: "n1", wantPlaced: "n1"},
		"node instance not running":              {nodeName: "n1", localNode: "n1", wantPlaced: "n1"},
		"host name label other than the name":    {nodeName: "n1", localNode: "n1", open: true, hostname: "n1.example", wantPlaced: "n1"},
		"class that does not allow the node":     {nodeName: "n1", localNode: "n1", open: true, topologyNode: "n9"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			claim := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid-c", ResourceVersion: "1",
					Annotations: map[string]string{provisioning.AnnStorageProvisioner: "provfleet.io/fake"}},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("local"),
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}},
			}
			client := kubefake.NewClientset(claim)
			c, _ := fakeCoordinator(t, client, &v1alpha1.HostPathBackend{Path: "/v", NodeName: tc.nodeName})
			var requeued []types.UID
			if tc.localNode != "" {
				c.localNode = tc.localNode
				c.handovers = newHandovers(func(config string, claim *corev1.PersistentVolumeClaim) { requeued = append(requeued, claim.UID) })
				if tc.open {
					c.handovers.open(c.configName)
				}
			}
			hostname := tc.hostname
			if hostname == "" {
				hostname = "n1"
			}
			addToStore(t, c.informers.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelHostname: hostname}}})
			addToStore(t, c.nodeLeases, runningLease(t, c.configName, "n1"))
			class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: "provfleet.io/fake",
				VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate)}
			if tc.topologyNode != "" {
				class.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
					{Key: corev1.LabelHostname, Values: []string{tc.topologyNode}}}}}
			}
			addToStore(t, c.informers.Classes, class)
			addToStore(t, c.informers.Claims, claim)
			term := &coordTerm{wake: make(chan struct{}, 1), warned: map[types.UID]string{}, placed: map[types.UID]string{}}
			c.sync(ctx, term)

			got, err := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "c", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantPlaced, got.Annotations[provisioning.AnnSelectedNode]); diff != "" {
				t.Errorf("selected node written (-want +got):\n%s", diff)
			}
			if handed := c.handovers.owns(c.configName, claim.UID); handed != tc.wantHanded {
				t.Errorf("handed over to the node instance: %v, want %v", handed, tc.wantHanded)
			}
			var wantRequeued []types.UID
			if tc.wantHanded {
				wantRequeued = []types.UID{claim.UID}
			}
			if diff := cmp.Diff(wantRequeued, requeued); diff != "" {
				t.Errorf("claims the node instance was asked to look at (-want +got):\n%s", diff)
			}
			// A second sync neither hands the claim over again nor places it.
			c.sync(ctx, term)
			if len(requeued) != len(wantRequeued) {
				t.Errorf("the node instance was asked again: %v", requeued)
			}
		})
	}
}

// TestHandoversLifecycle checks that a claim stays the node instance's while
// it stops, and that the coordinator may place it anew once it stopped.
func TestHandoversLifecycle(t *testing.T) {
	h := newHandovers(func(string, *corev1.PersistentVolumeClaim) {})
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	scope := handoverScope{node: "n1", config: "cfg", handovers: h}
	if h.give("cfg", claim) || scope.Claim(claim) {
		t.Fatal("a claim was given to a node instance that does not run")
	}
	h.open("cfg")
	if !h.give("cfg", claim) || !scope.Claim(claim) {
		t.Fatal("the running node instance was not given the claim")
	}
	other := claim.DeepCopy()
	other.Annotations = map[string]string{provisioning.AnnSelectedNode: "n2"}
	if scope.Claim(other) {
		t.Error("the node instance takes a claim given to it that another node was then selected for")
	}
	h.close("cfg")
	if h.give("cfg", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{UID: "u2"}}) {
		t.Error("a stopping node instance was given a claim")
	}
	if !scope.Claim(claim) {
		t.Error("a stopping node instance no longer owns the claim it was given: another could make its volume while it does")
	}
	h.forget("cfg")
	if scope.Claim(claim) {
		t.Error("a stopped node instance still owns its claim: it is never placed anew")
	}
	h.open("cfg")
	h.give("cfg", claim)
	h.keepOnly("cfg", map[types.UID]bool{})
	if scope.Claim(claim) {
		t.Error("a claim that no longer waits for a volume is still remembered")
	}
}

func addToStore(t *testing.T, informer cache.SharedIndexInformer, obj any) {
	t.Helper()
	if err := informer.GetStore().Add(obj); err != nil {
		t.Fatal(err)
	}
}

// runningLease is the node Lease of node, renewed now, whose agent reports
// config Running.
func runningLease(t *testing.T, config, node string) *coordinationv1.Lease {
	t.Helper()
	report, err := json.Marshal(nodeReport{config: {Generation: 1, Reason: v1alpha1.ReasonRunning}})
	if err != nil {
		t.Fatal(err)
	}
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "nodes", Name: NodeLeaseName(node), Annotations: map[string]string{AnnNodeReport: string(report)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent"), LeaseDurationSeconds: ptr.To[int32](600),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
}
