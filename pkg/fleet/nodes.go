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
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// selectsNode reports whether a hostPath backend serves node: nodeName names
// it, or else nodeSelector (every node when unset) selects it.
func selectsNode(spec *v1alpha1.HostPathBackend, node *v1.Node) (bool, error) {
	if spec.NodeName != "" {
		return spec.NodeName == node.Name, nil
	}
	return matchesNode(spec.NodeSelector, node)
}

// nodePaths are the base directories of a hostPath backend on node, the
// one new volumes go in by default first: those of the first nodePaths entry
// that names or selects it, else path and additionalPaths.
func nodePaths(spec *v1alpha1.HostPathBackend, node *v1.Node) ([]string, error) {
	for _, entry := range spec.NodePaths {
		matches := slices.Contains(entry.Nodes, node.Name)
		if entry.NodeSelector != nil {
			var err error
			if matches, err = matchesNode(entry.NodeSelector, node); err != nil {
				return nil, err
			}
		}
		if matches {
			return joinPaths(entry.Path, entry.AdditionalPaths), nil
		}
	}
	return joinPaths(spec.Path, spec.AdditionalPaths), nil
}

// joinPaths lists first and then others.
func joinPaths(first v1alpha1.AbsolutePath, others []v1alpha1.AbsolutePath) []string {
	paths := []string{string(first)}
	for _, p := range others {
		paths = append(paths, string(p))
	}
	return paths
}

// matchesNode reports whether selector, nil meaning every node, selects node.
func matchesNode(selector *v1alpha1.NodeLabelSelector, node *v1.Node) (bool, error) {
	if selector == nil {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(selector.LabelSelector())
	if err != nil {
		return false, fmt.Errorf("cannot use node selector: %w", err)
	}
	return s.Matches(labels.Set(node.Labels)), nil
}
