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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// TestLocalPathNodePathMap: local-path's nodePathMap becomes the hostPath
// backend's path for the nodes it does not list and nodePaths for the
// others, nodes of one path together; without a default entry only the
// listed nodes are served.
func TestLocalPathNodePathMap(t *testing.T) {
	hostname := func(nodes ...string) *v1alpha1.NodeLabelSelector {
		return &v1alpha1.NodeLabelSelector{MatchExpressions: []v1alpha1.NodeLabelRequirement{{Key: "kubernetes.io/hostname", Operator: metav1.LabelSelectorOpIn, Values: nodes}}}
	}
	tests := map[string]struct {
		nodePathMap string
		wantPath    v1alpha1.AbsolutePath
		wantNodes   []v1alpha1.NodePath
		wantOnly    *v1alpha1.NodeLabelSelector
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
			if diff := cmp.Diff(tc.wantNodes, got.NodePaths); diff != "" {
				t.Errorf("nodePaths (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOnly, got.NodeSelector); diff != "" {
				t.Errorf("nodeSelector (-want +got):\n%s", diff)
			}
		})
	}
}
