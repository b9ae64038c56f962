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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

func TestNodeSelectionAndPaths(t *testing.T) {
	ssd := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"disk": "ssd", "zone": "z1"}}}
	nvme := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"disk": "nvme", "zone": "z2"}}}
	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	type result struct {
		Selected bool
		Paths    []string
	}
	tests := map[string]struct {
		spec v1alpha1.HostPathBackend
		want map[string]result
	}{
		"every node": {
			spec: v1alpha1.HostPathBackend{Path: "/data"},
			want: map[string]result{"a": {true, []string{"/data"}}, "b": {true, []string{"/data"}}, "c": {true, []string{"/data"}}},
		},
		"one node by name": {
			spec: v1alpha1.HostPathBackend{Path: "/data", NodeName: "b"},
			want: map[string]result{"a": {false, []string{"/data"}}, "b": {true, []string{"/data"}}, "c": {false, []string{"/data"}}},
		},
		"labels and expressions": {
			spec: v1alpha1.HostPathBackend{Path: "/data", NodeSelector: &v1alpha1.NodeLabelSelector{
				MatchExpressions: []v1alpha1.NodeLabelRequirement{{Key: "disk", Operator: metav1.LabelSelectorOpIn, Values: []string{"ssd", "nvme"}}},
				MatchLabels:      map[string]string{"zone": "z2"},
			}},
			want: map[string]result{"a": {false, []string{"/data"}}, "b": {true, []string{"/data"}}, "c": {false, []string{"/data"}}},
		},
		"first matching override wins": {
			spec: v1alpha1.HostPathBackend{Path: "/data", NodePaths: []v1alpha1.NodePath{
				{Nodes: []string{"x", "a"}, Path: "/named"},
				{NodeSelector: &v1alpha1.NodeLabelSelector{MatchExpressions: []v1alpha1.NodeLabelRequirement{{Key: "disk", Operator: metav1.LabelSelectorOpExists}}}, Path: "/with-disk"},
			}},
			want: map[string]result{"a": {true, []string{"/named"}}, "b": {true, []string{"/with-disk"}}, "c": {true, []string{"/data"}}},
		},
		"additional paths, of the entry that matches": {
			spec: v1alpha1.HostPathBackend{Path: "/data", AdditionalPaths: []v1alpha1.AbsolutePath{"/data2", "/data3"}, NodePaths: []v1alpha1.NodePath{
				{Nodes: []string{"a"}, Path: "/named", AdditionalPaths: []v1alpha1.AbsolutePath{"/named2"}},
				{Nodes: []string{"b"}, Path: "/alone"},
			}},
			want: map[string]result{"a": {true, []string{"/named", "/named2"}}, "b": {true, []string{"/alone"}}, "c": {true, []string{"/data", "/data2", "/data3"}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := map[string]result{}
			for _, node := range []*corev1.Node{ssd, nvme, bare} {
				selected, err := selectsNode(&tc.spec, node)
				if err != nil {
					t.Fatal(err)
				}
				paths, err := nodePaths(&tc.spec, node)
				if err != nil {
					t.Fatal(err)
				}
				got[node.Name] = result{selected, paths}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("selection and paths (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStorageClassPaths: each StorageClass's base directories on a node are
// read as the backend's are, and a node serves the distinct paths of all.
func TestStorageClassPaths(t *testing.T) {
	spec := &v1alpha1.HostPathBackend{Path: "/data", StorageClasses: []v1alpha1.HostPathStorageClass{
		{StorageClassName: "fast", Path: "/fast", AdditionalPaths: []v1alpha1.AbsolutePath{"/data"}, NodePaths: []v1alpha1.NodePath{
			{NodeSelector: &v1alpha1.NodeLabelSelector{MatchLabels: map[string]string{"disk": "nvme"}}, Path: "/nvme", AdditionalPaths: []v1alpha1.AbsolutePath{"/nvme2"}},
		}},
		{StorageClassName: "slow", Path: "/slow"},
	}}
	type result struct {
		Classes map[string][]string
		All     []string
	}
	want := map[string]result{
		"a": {Classes: map[string][]string{"fast": {"/nvme", "/nvme2"}, "slow": {"/slow"}}, All: []string{"/data", "/nvme", "/nvme2", "/slow"}},
		"b": {Classes: map[string][]string{"fast": {"/fast", "/data"}, "slow": {"/slow"}}, All: []string{"/data", "/fast", "/slow"}},
	}
	got := map[string]result{}
	for _, node := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"disk": "nvme"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
	} {
		classes, err := classPaths(spec, node)
		if err != nil {
			t.Fatal(err)
		}
		all, err := allPaths(spec, node)
		if err != nil {
			t.Fatal(err)
		}
		got[node.Name] = result{classes, all}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
}
