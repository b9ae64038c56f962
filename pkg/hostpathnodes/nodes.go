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
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// selectsNode reports whether a hostPath backend serves node: nodeName names
// it, or else nodeSelector (every node when unset) selects it.
func selectsNode(spec *v1alpha1.HostPathBackend, node *corev1.Node) (bool, error) {
	if spec.NodeName != "" {
		return spec.NodeName == node.Name, nil
	}
	return matchesNode(spec.NodeSelector, node)
}

// nodePaths are the base directories of a hostPath backend on node, the
// one new volumes go in by default first: those of the first nodePaths entry
// that names or selects it, else path and additionalPaths.
func nodePaths(spec *v1alpha1.HostPathBackend, node *corev1.Node) ([]string, error) {
	return pathsOn(node, spec.Path, spec.AdditionalPaths, spec.NodePaths)
}

// allPaths are the distinct base directories of a hostPath backend on
// node: nodePaths and then those classPaths adds.
func allPaths(spec *v1alpha1.HostPathBackend, node *corev1.Node) ([]string, error) {
	paths, err := nodePaths(spec, node)
	if err != nil {
		return nil, err
	}
	classes, err := classPaths(spec, node)
	if err != nil {
		return nil, err
	}
	for _, class := range spec.StorageClasses {
		for _, p := range classes[class.StorageClassName] {
			if !slices.Contains(paths, p) {
				paths = append(paths, p)
			}
		}
	}
	return paths, nil
}

// classPaths are the base directories of each StorageClass of a hostPath
// backend's storageClasses on node, read as nodePaths reads the backend's.
func classPaths(spec *v1alpha1.HostPathBackend, node *corev1.Node) (map[string][]string, error) {
	classes := map[string][]string{}
	for _, class := range spec.StorageClasses {
		paths, err := pathsOn(node, class.Path, class.AdditionalPaths, class.NodePaths)
		if err != nil {
			return nil, err
		}
		classes[class.StorageClassName] = paths
	}
	return classes, nil
}

// pathsOn are the base directories on node of path and additional unless an
// entry of nodePaths, the first that names or selects node, overrides them.
func pathsOn(node *corev1.Node, path v1alpha1.AbsolutePath, additional []v1alpha1.AbsolutePath, nodePaths []v1alpha1.NodePath) ([]string, error) {
	for _, entry := range nodePaths {
		matches := slices.Contains(entry.Nodes, node.Name)
		if entry.NodeSelector != nil {
			var err error
			if matches, err = matchesNode(entry.NodeSelector, node); err != nil {
				return nil, err
			}
		}
		if matches {
			return v1alpha1.JoinPaths(entry.Path, entry.AdditionalPaths), nil
		}
	}
	return v1alpha1.JoinPaths(path, additional), nil
}

// matchesNode reports whether selector, nil meaning every node, selects node.
func matchesNode(selector *v1alpha1.NodeLabelSelector, node *corev1.Node) (bool, error) {
	if selector == nil {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(selector.LabelSelector())
	if err != nil {
		return false, fmt.Errorf("cannot use node selector: %w", err)
	}
	return s.Matches(labels.Set(node.Labels)), nil
}
