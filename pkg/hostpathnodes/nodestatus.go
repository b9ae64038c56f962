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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// maxUnservedListed bounds status.nodes.unserved.
const maxUnservedListed = 16

// Status counts the nodes the hostPath ProvisionerConfig pc selects and
// those an agent serves, as the node Leases say, and sums the space the
// serving agents report.
func (n *Nodes) Status(pc *v1alpha1.ProvisionerConfig) (*v1alpha1.NodesStatus, *provisioning.Space, error) {
	now := time.Now()
	all := n.nodeInf.GetStore().List()
	nodes := make([]*corev1.Node, 0, len(all))
	for _, obj := range all {
		if node, ok := obj.(*corev1.Node); ok {
			nodes = append(nodes, node)
		}
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	st := &v1alpha1.NodesStatus{}
	var space *provisioning.Space
	for _, node := range nodes {
		selected, err := selectsNode(pc.Spec.Backend.HostPath, node)
		if err != nil {
			return nil, nil, err
		}
		if !selected {
			continue
		}
		st.Selected++
		service := serviceOf(n.leaseInf.GetStore(), n.clock, n.settings.LeaseNamespace, node.Name, pc.Name, now)
		if service.unserved != nil {
			if len(st.Unserved) < maxUnservedListed {
				st.Unserved = append(st.Unserved, *service.unserved)
			}
			continue
		}
		st.Served++
		space = addSpace(space, service.report)
	}
	st.Summary = fmt.Sprintf("%d/%d", st.Served, st.Selected)
	return st, space, nil
}

// addSpace adds the space a node reports to sum.
func addSpace(sum *provisioning.Space, r provisionerReport) *provisioning.Space {
	if r.Available == nil || r.Total == nil {
		return sum
	}
	if sum == nil {
		sum = &provisioning.Space{}
	}
	sum.AvailableBytes += *r.Available
	sum.TotalBytes += *r.Total
	return sum
}
