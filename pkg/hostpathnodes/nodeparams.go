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
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend"
)

// NodeVolumesParams names the ConfigMap, in the agents' namespace, that the
// admission policy of the node agents' volumes (examples/deploy's
// node-restriction.yaml) reads as its params: what only the manager can
// tell of each node, which the policy cannot look up. The manager keeps it
// current from the ProvisionerConfigs and the Nodes; nothing else writes it.
//
// Its data holds, by node name, one line per fact, each a word and its
// values separated by spaces:
//
//	host <the node's kubernetes.io/hostname label, which volumes are pinned with>
//	path <provisioner name> <base directory of the node>
//	pin <label key> <the node's value of that label, or its name>
//
// with a path line for every base directory (path and additionalPaths) of
// every name of every hostPath ProvisionerConfig that selects the node, and
// a pin line for the nodeAffinityKey of each of them that sets another key
// than kubernetes.io/hostname. A node no hostPath ProvisionerConfig selects
// is not listed: its agent may make no volume.
const NodeVolumesParams = "provfleet-node-volumes"

// nodeVolumesData is the data of NodeVolumesParams for configs and nodes.
// A base directory that cannot be told on one line is left out, and so its
// volumes are refused: nothing is let through in doubt.
func nodeVolumesData(ctx context.Context, configs []*v1alpha1.ProvisionerConfig, nodes []*corev1.Node) map[string]string {
	data := map[string]string{}
	for _, node := range nodes {
		var lines []string
		for _, pc := range configs {
			paths := nodeVolumePaths(ctx, pc, node)
			if len(paths) > 0 {
				lines = append(append(lines, paths...), nodePinLines(ctx, pc, node)...)
			}
		}
		if len(lines) == 0 {
			continue
		}
		slices.Sort(lines)
		lines = append([]string{"host " + backend.NodeLabelValue(node, corev1.LabelHostname)}, slices.Compact(lines)...)
		data[node.Name] = strings.Join(lines, "\n")
	}
	return data
}

// nodePinLines are the pin lines of pc, a hostPath ProvisionerConfig that
// selects node: none for the hostname label, which the host line says.
func nodePinLines(ctx context.Context, pc *v1alpha1.ProvisionerConfig, node *corev1.Node) []string {
	key := pc.Spec.Backend.HostPath.NodeAffinityKey
	if key == "" || key == corev1.LabelHostname {
		return nil
	}
	value := backend.NodeLabelValue(node, key)
	// The API server bounds label keys and values to characters without a
	// space; only an object that bypassed it could carry one.
	if strings.ContainsAny(key+value, " \t\n\r") || value == "" {
		klog.FromContext(ctx).Info("A node's value of the nodeAffinityKey cannot be told on one line: the node agents may pin no volume by it",
			"provisionerConfig", klog.KObj(pc), "node", klog.KObj(node), "key", key)
		return nil
	}
	return []string{"pin " + key + " " + value}
}

// nodeVolumePaths are the path lines of pc on node; none unless it is a
// hostPath one that selects the node.
func nodeVolumePaths(ctx context.Context, pc *v1alpha1.ProvisionerConfig, node *corev1.Node) []string {
	spec := pc.Spec.Backend.NodeHostPath()
	if spec == nil {
		return nil
	}
	selected, err := selectsNode(spec, node)
	if !selected || err != nil {
		return nil
	}
	bases, err := allPaths(spec, node)
	if err != nil {
		return nil
	}
	var lines []string
	for _, base := range bases {
		base = filepath.Clean(base)
		if strings.ContainsAny(base, "\n\r") {
			klog.FromContext(ctx).Info("A base directory holds a line break: the node agents may make no volume in it",
				"provisionerConfig", klog.KObj(pc), "node", klog.KObj(node))
			continue
		}
		for _, name := range pc.Spec.ProvisionerNames() {
			lines = append(lines, "path "+name+" "+base)
		}
	}
	return lines
}

// syncNodeVolumesParams writes NodeVolumesParams as the ProvisionerConfigs
// and Nodes in the caches call for, unless it says so already.
func (n *Nodes) syncNodeVolumesParams(ctx context.Context) error {
	configs, err := n.all()
	if err != nil {
		return err
	}
	var nodes []*corev1.Node
	for _, obj := range n.nodeInf.GetStore().List() {
		if node := asNode(obj); node != nil {
			nodes = append(nodes, node)
		}
	}
	data := nodeVolumesData(ctx, configs, nodes)
	api := n.client.CoreV1().ConfigMaps(n.settings.LeaseNamespace)
	current, err := api.Get(ctx, NodeVolumesParams, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		params := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: n.settings.LeaseNamespace, Name: NodeVolumesParams}, Data: data}
		if _, err := api.Create(ctx, params, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("cannot create ConfigMap %s: %w", NodeVolumesParams, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("cannot read ConfigMap %s: %w", NodeVolumesParams, err)
	case maps.Equal(current.Data, data):
		return nil
	}
	current.Data = data
	if _, err := api.Update(ctx, current, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("cannot update ConfigMap %s: %w", NodeVolumesParams, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated what the node agents may make", "configMap", klog.KObj(current), "nodes", len(data))
	return nil
}
