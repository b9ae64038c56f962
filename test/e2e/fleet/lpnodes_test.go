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
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// rackKey is the node label of the tests of nodeAffinityKey.
const rackKey = "topology.example.com/rack"

// A node with two base directories, as local-path-provisioner's nodePathMap
// lists several paths of a node: a class whose nodePath names the second
// gets its directory there, a class without one gets the first, and both are
// released by the node's agent, held by the API server to the bases the
// manager listed.
func TestNodeAgentServesSeveralPaths(t *testing.T) {
	c := newNodeCluster(t)
	const name = "local"
	a := c.nodes[0]
	first, second := filepath.Join(c.disks[a], "volumes"), filepath.Join(c.disks[a], "second")
	c.provisioner(name, storagev1.VolumeBindingWaitForFirstConsumer, func(hp *v1alpha1.HostPathBackend) {
		hp.NodePaths[0].AdditionalPaths = []v1alpha1.AbsolutePath{v1alpha1.AbsolutePath(second)}
	})
	c.waitNodes(name, "3/3")
	c.createClass(&storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name + "-second"},
		Provisioner:       "e2e.provfleet.io/" + name,
		Parameters:        map[string]string{"nodePath": second},
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	})
	c.claimOn("in-first", a)
	c.fixture.claimOn("in-second", name+"-second", a)
	c.waitBound("in-first", "in-second")
	volumes := map[string]*corev1.PersistentVolume{"in-first": c.boundVolume("in-first"), "in-second": c.boundVolume("in-second")}
	got := map[string]string{}
	for claim, pv := range volumes {
		got[claim] = filepath.Dir(volumePath(pv))
	}
	if diff := cmp.Diff(map[string]string{"in-first": first, "in-second": second}, got); diff != "" {
		t.Errorf("base of each volume (-want +got):\n%s", diff)
	}
	for claim, pv := range volumes {
		if _, err := os.Stat(volumePath(pv)); err != nil {
			t.Errorf("directory of %s: %v", claim, err)
		}
		if err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).Delete(c.ctx, claim, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for claim, pv := range volumes {
		c.waitGone(pv.Name)
		if _, err := os.Stat(volumePath(pv)); !os.IsNotExist(err) {
			t.Errorf("directory of %s after its release: %v, want it gone", claim, err)
		}
	}
}

// A ProvisionerConfig whose nodeAffinityKey is another label than the host
// name pins its volumes by that label at the node's value, as
// local-path-provisioner's class parameter does; the agent may write such a
// PV, and the binder binds it.
func TestNodeAffinityKeyPinsByTheNodesLabel(t *testing.T) {
	c := newNodeCluster(t)
	a := c.nodes[0]
	c.labelNode(a, rackKey, "rack-1")
	const name = "racked"
	c.provisioner(name, storagev1.VolumeBindingWaitForFirstConsumer, rackedOn(a, filepath.Join(c.disks[a], "racked")))
	c.waitNodes(name, "1/1")
	c.fixture.claimOn("racked", name, a)
	c.waitBound("racked")
	pv := c.boundVolume("racked")
	want := &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: rackKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"rack-1"}}},
	}}}}
	if diff := cmp.Diff(want, pv.Spec.NodeAffinity); diff != "" {
		t.Errorf("node affinity (-want +got):\n%s", diff)
	}
	if got := pv.Annotations["hostpath.provfleet.io/node"]; got != a {
		t.Errorf("node annotation %q, want %q", got, a)
	}
	if err := c.kube.CoreV1().PersistentVolumeClaims(c.namespace).Delete(c.ctx, "racked", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitGone(pv.Name)
	if _, err := os.Stat(volumePath(pv)); !os.IsNotExist(err) {
		t.Errorf("directory after the release: %v, want it gone", err)
	}
}

// rackedOn serves node alone, in base, pinning volumes by rackKey.
func rackedOn(node, base string) func(*v1alpha1.HostPathBackend) {
	return func(hp *v1alpha1.HostPathBackend) {
		hp.Path, hp.NodePaths = v1alpha1.AbsolutePath(base), nil
		hp.NodeName, hp.NodeAffinityKey = node, rackKey
	}
}

// labelNode sets the label key of node to value.
func (c *nodeCluster) labelNode(node, key, value string) {
	c.t.Helper()
	patch := `{"metadata":{"labels":{"` + key + `":"` + value + `"}}}`
	if _, err := c.kube.CoreV1().Nodes().Patch(c.ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		c.t.Fatal(err)
	}
}
