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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
