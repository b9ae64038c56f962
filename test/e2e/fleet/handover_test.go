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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
	"github.com/provfleet/provfleet/pkg/hostpathnodes"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// TestOneNodeConfigNeedsNoPlacement runs a ProvisionerConfig whose nodeName
// is the node of a process in both roles: its Immediate claims get their
// volumes on the node with no selected-node write. A second replica on the
// same node then takes over from the first, killed, and every claim still
// gets exactly one volume.
func TestOneNodeConfigNeedsNoPlacement(t *testing.T) {
	f := newFixture(t)
	node := f.prefix + "-node"
	f.node(node, nil)
	first := f.startOnNode("solo-1", node)
	const name = "solo"
	f.provisioner(name, func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Backend.HostPath.NodeName = node })
	f.waitReady(name, 1, v1alpha1.ReasonRunning)
	var claims []string
	for i := range 5 {
		claims = append(claims, fmt.Sprintf("before-%d", i))
		f.claim(claims[i], name)
	}
	f.waitBound(claims...)
	for _, claim := range claims {
		c, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Get(f.ctx, claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if selected, ok := c.Annotations[provisioning.AnnSelectedNode]; ok {
			t.Errorf("claim %s was placed on %q: a config that serves one node needs no placement write", claim, selected)
		}
		if n := f.eventCount(f.ctx, claim, hostpathnodes.EventNodeSelected); n > 0 {
			t.Errorf("claim %s got %d %s Events", claim, n, hostpathnodes.EventNodeSelected)
		}
	}

	// The second replica, on the same node, holds neither Lease until the
	// first is gone; it then leads and serves the node.
	f.startOnNode("solo-2", node)
	first.Kill()
	for i := range 5 {
		claims = append(claims, fmt.Sprintf("after-%d", i))
		f.claim(claims[len(claims)-1], name)
	}
	f.waitBound(claims...)
	want := map[string][]string{}
	for _, claim := range claims {
		want[claim] = []string{"e2e.provfleet.io/" + name}
	}
	if diff := cmp.Diff(want, f.volumesOf()); diff != "" {
		t.Errorf("PVs per claim (-want +got):\n%s", diff)
	}
	if dirs := volumeDirectories(t, filepath.Join(f.root, name)); len(dirs) != len(claims) {
		t.Errorf("%d volume directories for %d claims: %v", len(dirs), len(claims), dirs)
	}
	// Deleted while the second replica, which the test's end stops first,
	// still runs to remove its finalizer.
	f.deleteConfig(name)
}

// startOnNode runs a manager process in both roles as the agent of node,
// which exists already.
func (f *fixture) startOnNode(identity, node string) *managerproc.Process {
	f.t.Helper()
	return f.start(identity, managerproc.Options{
		Binary:     managerBinary,
		Kubeconfig: managerKubeconfig(f.t),
		Namespace:  testenv.ManagerNamespace,
		NodeName:   node,
		Args:       append([]string{"--role=manager,node", nodeLeaseDuration}, replicaLease...),
	})
}

// volumeDirectories returns the names of the volume directories under base.
func volumeDirectories(t *testing.T, base string) []string {
	t.Helper()
	entries, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "pvc-") {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}
