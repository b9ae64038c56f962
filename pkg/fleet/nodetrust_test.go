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
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kubetesting "k8s.io/client-go/testing"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// The params of the volume policy name, per node, its host name, every base
// of every name of every hostPath ProvisionerConfig that selects it, and its
// value of each nodeAffinityKey but the host name; a node none selects, an
// NFS backend, a base with a line break and a label value with a space are
// left out.
func TestNodeVolumesData(t *testing.T) {
	hostPath := func(name string, backend v1alpha1.HostPathBackend, more ...v1alpha1.ProvisionerName) *v1alpha1.ProvisionerConfig {
		return &v1alpha1.ProvisionerConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ProvisionerConfigSpec{
			ProvisionerName:            v1alpha1.ProvisionerName("example.com/" + name),
			AdditionalProvisionerNames: more,
			Backend:                    v1alpha1.BackendSpec{HostPath: &backend},
		}}
	}
	configs := []*v1alpha1.ProvisionerConfig{
		hostPath("fast", v1alpha1.HostPathBackend{Path: "/var/lib/fast/", NodePaths: []v1alpha1.NodePath{{Nodes: []string{"b"}, Path: "/disks/b"}}}, "example.com/old-fast"),
		hostPath("one", v1alpha1.HostPathBackend{Path: "/var/lib/one", NodeName: "a"}),
		hostPath("selected", v1alpha1.HostPathBackend{Path: "/var/lib/nvme", NodeSelector: &v1alpha1.NodeLabelSelector{MatchLabels: map[string]string{"disk": "nvme"}}}),
		hostPath("broken", v1alpha1.HostPathBackend{Path: "/var/lib/x\ny", NodeName: "a"}),
		hostPath("racked", v1alpha1.HostPathBackend{Path: "/var/lib/racked", AdditionalPaths: []v1alpha1.AbsolutePath{"/mnt/racked/"}, NodeAffinityKey: "topology.example.com/rack"}),
		hostPath("by-host", v1alpha1.HostPathBackend{Path: "/var/lib/by-host", NodeName: "b", NodeAffinityKey: corev1.LabelHostname,
			NodePaths: []v1alpha1.NodePath{{Nodes: []string{"b"}, Path: "/disks/by-host", AdditionalPaths: []v1alpha1.AbsolutePath{"/disks/by-host-2"}}}}),
		hostPath("spaced", v1alpha1.HostPathBackend{Path: "/var/lib/spaced", NodeName: "a", NodeAffinityKey: "example.com/spaced"}),
		hostPath("classes", v1alpha1.HostPathBackend{Path: "/var/lib/classes", NodeName: "b", StorageClasses: []v1alpha1.HostPathStorageClass{
			{StorageClassName: "fast", Path: "/mnt/fast", AdditionalPaths: []v1alpha1.AbsolutePath{"/var/lib/classes"}}}}),
		{ObjectMeta: metav1.ObjectMeta{Name: "nfs"}, Spec: v1alpha1.ProvisionerConfigSpec{ProvisionerName: "example.com/nfs", Backend: v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{}}}},
	}
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{
			corev1.LabelHostname: "host-a", "disk": "nvme", "topology.example.com/rack": "rack-1", "example.com/spaced": "x y",
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
	}
	want := map[string]string{
		"a": strings.Join([]string{"host host-a", "path example.com/fast /var/lib/fast", "path example.com/old-fast /var/lib/fast",
			"path example.com/one /var/lib/one", "path example.com/racked /mnt/racked", "path example.com/racked /var/lib/racked",
			"path example.com/selected /var/lib/nvme", "path example.com/spaced /var/lib/spaced", "pin topology.example.com/rack rack-1"}, "\n"),
		"b": strings.Join([]string{"host b", "path example.com/by-host /disks/by-host", "path example.com/by-host /disks/by-host-2",
			"path example.com/classes /mnt/fast", "path example.com/classes /var/lib/classes",
			"path example.com/fast /disks/b", "path example.com/old-fast /disks/b",
			"path example.com/racked /mnt/racked", "path example.com/racked /var/lib/racked", "pin topology.example.com/rack b"}, "\n"),
	}
	if diff := cmp.Diff(want, nodeVolumesData(t.Context(), configs, nodes)); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
	if got := nodeVolumesData(t.Context(), configs[1:4], []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "c"}}}); len(got) != 0 {
		t.Errorf("a node none selects is listed: %v", got)
	}
}

// A volume listed again takes the place of the one of its name; what the
// agent released, by name and UID, leaves the list, and a list that names
// something released is pending.
func TestRemovedList(t *testing.T) {
	list := removedList{"a": {{Name: "pv-1", UID: "u1", OnDelete: "Delete"}, {Name: "pv-2", UID: "u2", OnDelete: "Retain"}}, "b": {{Name: "pv-9", UID: "u9"}}}
	list.add("a", []removedVolume{{Name: "pv-2", UID: "u2b", OnDelete: "Archive"}, {Name: "pv-3", UID: "u3"}})
	want := removedList{"a": {{Name: "pv-1", UID: "u1", OnDelete: "Delete"}, {Name: "pv-2", UID: "u2b", OnDelete: "Archive"}, {Name: "pv-3", UID: "u3"}}, "b": {{Name: "pv-9", UID: "u9"}}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Fatalf("after add (-want +got):\n%s", diff)
	}
	released := releasedVolumes{"a": {{Name: "pv-1", UID: "u1"}, {Name: "pv-2", UID: "u2"}}, "b": {{Name: "pv-9", UID: "u9"}}}
	if !list.pending(released) {
		t.Error("a list naming released volumes is not pending")
	}
	if !list.drop(released) {
		t.Error("drop changed nothing")
	}
	// pv-2 of another UID is another volume: it stays.
	want = removedList{"a": {{Name: "pv-2", UID: "u2b", OnDelete: "Archive"}, {Name: "pv-3", UID: "u3"}}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("after drop (-want +got):\n%s", diff)
	}
	if list.pending(released) || list.drop(released) {
		t.Error("the released volumes are still listed")
	}
	data, err := list.encode()
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := readRemovedList(&corev1.ConfigMap{Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(list, decoded); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
}

// The removed volumes an older manager kept on a Lease read as a list
// without UIDs.
func TestReadLegacyRemoved(t *testing.T) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		AnnRemovedVolumes: `{"a":{"pv-2":"Retain","pv-1":"Delete"}}`,
	}}}
	got, err := readLegacyRemoved(lease)
	if err != nil {
		t.Fatal(err)
	}
	want := removedList{"a": {{Name: "pv-1", OnDelete: "Delete"}, {Name: "pv-2", OnDelete: "Retain"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A node Lease's name tells its node unless the node's name was too long
// for it.
func TestLeaseNode(t *testing.T) {
	for node, want := range map[string]string{
		"node-a": "node-a", "a.b.example.com": "a.b.example.com",
		strings.Repeat("n", 228): strings.Repeat("n", 228), strings.Repeat("n", 229): "", strings.Repeat("n", 250): "",
	} {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: NodeLeaseName(node)}}
		if got := leaseNode(lease); got != want {
			t.Errorf("node of Lease %s: %q, want %q", lease.Name, got, want)
		}
	}
}

// servesAdmissionPolicies makes client's discovery that of a 1.37 API
// server, which holds the node agents to their nodes.
func servesAdmissionPolicies(client *kubefake.Clientset) {
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "validatingadmissionpolicies"}}}}
	client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: "37"}
}

// A manager whose API server cannot hold the node agents to their nodes
// tells each hostPath ProvisionerConfig, once.
func TestManagerWarnsUnrestrictedAgents(t *testing.T) {
	f := newFixture(t, func(m *Manager) error {
		m.deps.client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: "29"}
		return nil
	})
	f.create(f.hostPath("local", "x.io/local", 1))
	f.eventually("a Warning Event on the hostPath ProvisionerConfig", func() bool {
		return slices.Contains(f.warnings("local"), EventNodeAgentsUnrestricted)
	})
	f.edit("local", func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Workers = 7 })
	f.eventually("the edit seen", func() bool { return f.get("local").Status.ObservedGeneration == 2 })
	count := 0
	for _, reason := range f.warnings("local") {
		if reason == EventNodeAgentsUnrestricted {
			count++
		}
	}
	if count != 1 {
		t.Errorf("told %d times, want once", count)
	}
}

// A cluster older than 1.30, or one that does not serve
// ValidatingAdmissionPolicies, is told unrestricted.
func TestCheckAdmissionPolicies(t *testing.T) {
	served := []*metav1.APIResourceList{{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "validatingwebhookconfigurations"}, {Name: "validatingadmissionpolicies"},
	}}}
	notServed := []*metav1.APIResourceList{{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "validatingwebhookconfigurations"}}}}
	tests := map[string]struct {
		major, minor string
		resources    []*metav1.APIResourceList
		want         string
	}{
		"1.37":               {major: "1", minor: "37", resources: served},
		"1.30 of a provider": {major: "1", minor: "30+", resources: served},
		"1.29":               {major: "1", minor: "29", resources: served, want: "Kubernetes 1.29 is older than 1.30"},
		"policies off":       {major: "1", minor: "31", resources: notServed, want: "does not serve"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := &fakediscovery.FakeDiscovery{Fake: &kubetesting.Fake{Resources: tc.resources},
				FakedServerVersion: &version.Info{Major: tc.major, Minor: tc.minor}}
			got := checkAdmissionPolicies(client)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
