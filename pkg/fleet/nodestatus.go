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
	"strings"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// withNodes adds to obs, of a running coordinator, the nodes of the
// hostPath ProvisionerConfig pc and the space they report, and turns Ready
// False when no node is served.
func (m *Manager) withNodes(pc *v1alpha1.ProvisionerConfig, obs observation) observation {
	if !obs.running {
		// Refused: its nodes say the same.
		return obs
	}
	nodes, space, err := m.nodes.Status(pc)
	if err != nil {
		return refusal(v1alpha1.ReasonInvalidSpec, err)
	}
	obs.nodes, obs.storage = nodes, space
	if obs.reason != v1alpha1.ReasonRunning && obs.reason != v1alpha1.ReasonStandby {
		return obs
	}
	switch {
	case nodes.Selected == 0:
		obs.reason, obs.message = v1alpha1.ReasonNoNodeServed, "no node is selected: nodeName or nodeSelector matches no Node"
	case nodes.Served == 0:
		obs.reason, obs.message = commonReason(nodes), "none of the selected nodes is served: "+describeUnserved(nodes)
	default:
		obs.message = fmt.Sprintf("%s; %d of %d selected nodes served", obs.message, nodes.Served, nodes.Selected)
	}
	return obs
}

// commonReason is the reason every selected node gives for not being
// served, NoNodeServed when they differ or some are not listed: one node
// whose disk is gone makes its provisioner BackendUnavailable, as an NFS
// server that is down does.
func commonReason(nodes *v1alpha1.NodesStatus) string {
	if len(nodes.Unserved) == 0 || len(nodes.Unserved) != int(nodes.Selected) {
		return v1alpha1.ReasonNoNodeServed
	}
	reason := nodes.Unserved[0].Reason
	for _, u := range nodes.Unserved[1:] {
		if u.Reason != reason {
			return v1alpha1.ReasonNoNodeServed
		}
	}
	return reason
}

// describeUnserved says why the first unserved nodes are not served.
func describeUnserved(nodes *v1alpha1.NodesStatus) string {
	var parts []string
	for _, u := range nodes.Unserved[:min(len(nodes.Unserved), 3)] {
		parts = append(parts, fmt.Sprintf("node %s: %s: %s", u.Node, u.Reason, u.Message))
	}
	if more := int(nodes.Selected) - len(parts); more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", more))
	}
	return strings.Join(parts, "; ")
}
