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

package migrate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// TestLocalPathNodePathMap: local-path's nodePathMap becomes the hostPath
// backend's path for the nodes it does not list and nodePaths for the
// others, nodes of the same paths together, the first path of each as path
// and the others as additionalPaths; without a default entry only the
// listed nodes are served.
func TestLocalPathNodePathMap(t *testing.T) {
	hostname := func(nodes ...string) *v1alpha1.NodeLabelSelector {
		return &v1alpha1.NodeLabelSelector{MatchExpressions: []v1alpha1.NodeLabelRequirement{{Key: "kubernetes.io/hostname", Operator: metav1.LabelSelectorOpIn, Values: nodes}}}
	}
	tests := map[string]struct {
		nodePathMap    string
		wantPath       v1alpha1.AbsolutePath
		wantAdditional []v1alpha1.AbsolutePath
		wantNodes      []v1alpha1.NodePath
		wantOnly       *v1alpha1.NodeLabelSelector
	}{
		"the default only": {
			nodePathMap: `[{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/local-path-provisioner"]}]`,
			wantPath:    "/opt/local-path-provisioner",
		},
		"listed nodes, one on the default's path": {
			nodePathMap: `[{"node": "a", "paths": ["/disk"]}, {"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/lp"]},
				{"node": "b", "paths": ["/opt/lp"]}, {"node": "c", "paths": ["/ssd"]}, {"node": "d", "paths": ["/disk/"]}]`,
			wantPath:  "/opt/lp",
			wantNodes: []v1alpha1.NodePath{{Nodes: []string{"a", "d"}, Path: "/disk"}, {Nodes: []string{"c"}, Path: "/ssd"}},
		},
		"several paths of a node": {
			nodePathMap: `[{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/lp", "/mnt/second/"]},
				{"node": "a", "paths": ["/opt/lp"]}, {"node": "b", "paths": ["/opt/lp", "/mnt/second"]},
				{"node": "c", "paths": ["/disk", "/ssd"]}, {"node": "d", "paths": ["/disk", "/ssd"]}, {"node": "e", "paths": ["/ssd", "/disk"]}]`,
			wantPath: "/opt/lp", wantAdditional: []v1alpha1.AbsolutePath{"/mnt/second"},
			wantNodes: []v1alpha1.NodePath{
				{Nodes: []string{"a"}, Path: "/opt/lp"},
				{Nodes: []string{"c", "d"}, Path: "/disk", AdditionalPaths: []v1alpha1.AbsolutePath{"/ssd"}},
				{Nodes: []string{"e"}, Path: "/ssd", AdditionalPaths: []v1alpha1.AbsolutePath{"/disk"}},
			},
		},
		"no default, several paths": {
			nodePathMap: `[{"node": "a", "paths": ["/disk", "/ssd"]}, {"node": "b", "paths": ["/ssd"]}]`,
			wantPath:    "/disk", wantAdditional: []v1alpha1.AbsolutePath{"/ssd"},
			wantNodes: []v1alpha1.NodePath{{Nodes: []string{"b"}, Path: "/ssd"}},
			wantOnly:  hostname("a", "b"),
		},
		"no default": {
			nodePathMap: `[{"node": "a", "paths": ["/disk"]}, {"node": "b", "paths": ["/ssd"]}]`,
			wantPath:    "/disk",
			wantNodes:   []v1alpha1.NodePath{{Nodes: []string{"b"}, Path: "/ssd"}},
			wantOnly:    hostname("a", "b"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := localPathCluster()
			c.configMap.Data["config.json"] = `{"nodePathMap": ` + tc.nodePathMap + `}`
			c.volumes = nil
			plan, err := Make(t.Context(), kubefake.NewClientset(c.objects()...), Options{From: FromLocalPath})
			if err != nil {
				t.Fatalf("Make() error = %v", err)
			}
			if plan.Config == nil {
				t.Fatalf("no ProvisionerConfig planned; refusals: %v", plan.Refusals)
			}
			got := plan.Config.Spec.Backend.HostPath
			if diff := cmp.Diff(tc.wantPath, got.Path); diff != "" {
				t.Errorf("path (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAdditional, got.AdditionalPaths); diff != "" {
				t.Errorf("additionalPaths (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNodes, got.NodePaths); diff != "" {
				t.Errorf("nodePaths (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOnly, got.NodeSelector); diff != "" {
				t.Errorf("nodeSelector (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLocalPathNodeAffinityKey: the nodeAffinityKey the classes set becomes
// the backend's, where the release reads it; the host name, or none, is
// the default.
func TestLocalPathNodeAffinityKey(t *testing.T) {
	tests := map[string]struct {
		image   string
		classes map[string]string
		want    string
	}{
		"none":          {classes: map[string]string{"local-path": ""}},
		"the host name": {classes: map[string]string{"local-path": "kubernetes.io/hostname"}},
		"one key": {
			classes: map[string]string{"local-path": "topology.example.com/rack", "racked": "topology.example.com/rack"},
			want:    "topology.example.com/rack",
		},

		"a release before it": {
			image:   "rancher/local-path-provisioner:v0.0.34",
			classes: map[string]string{"local-path": "topology.example.com/rack"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := localPathCluster()
			if tc.image != "" {
				c.deployment.Spec.Template.Spec.Containers[0].Image = tc.image
			}
			c.classes = map[string]*storagev1.StorageClass{}
			for name, key := range tc.classes {
				c.classes[name] = class(name, localPathName, map[string]string{"nodeAffinityKey": key}, nil)
			}
			plan, err := Make(t.Context(), kubefake.NewClientset(c.objects()...), Options{From: FromLocalPath})
			if err != nil {
				t.Fatalf("Make() error = %v", err)
			}
			if plan.Config == nil || len(plan.Refusals) > 0 {
				t.Fatalf("plan refused: %v", plan.Refusals)
			}
			if diff := cmp.Diff(tc.want, plan.Config.Spec.Backend.HostPath.NodeAffinityKey); diff != "" {
				t.Errorf("nodeAffinityKey (-want +got):\n%s", diff)
			}
		})
	}
}
