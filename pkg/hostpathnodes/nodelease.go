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
	"encoding/json"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// A node agent holds one Lease per node, named by NodeLeaseName in the
// agents' namespace: only its holder serves the node, and its renewals tell
// the manager which nodes have a live agent. Its annotations carry what the
// agent and the manager tell each other about the node.
const (
	// AnnNodeReport holds, in JSON (a nodeReport), how the node's agent runs
	// each hostPath ProvisionerConfig that selects the node. The agent
	// writes it with its renewals.
	AnnNodeReport = "provfleet.io/provisioners"
	// AnnRemovedVolumes is where, on a node Lease, the manager listed the
	// volumes it deleted while the node was removed, before it kept them in
	// removal lists (RemovedListName) that no agent may write: the manager
	// moves what it finds there into the node's list. An agent may not
	// change it.
	AnnRemovedVolumes = "provfleet.io/removed-volumes"
)

// NodeLeaseName is the name of the Lease of node.
func NodeLeaseName(node string) string {
	return provisioning.LeaseName("provfleet-node-" + node)
}

// nodeReport is how one node agent runs each hostPath ProvisionerConfig
// that selects its node, by ProvisionerConfig name.
type nodeReport map[string]provisionerReport

// provisionerReport is the state of one ProvisionerConfig on one node.
type provisionerReport struct {
	// Generation is the metadata.generation the agent runs with.
	Generation int64 `json:"generation"`
	// Reason and Message are what the agent's Ready condition would say:
	// Running when it serves the node.
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// Available and Total are the space of the node's base directory, as
	// the agent's last probe found it; nil when unknown.
	Available *int64 `json:"available,omitempty"`
	Total     *int64 `json:"total,omitempty"`
	// ProbedAt is when that probe began: placement counts the volumes made
	// since against Available.
	ProbedAt *metav1.Time `json:"probedAt,omitempty"`
}

// readNodeReport returns the report a node Lease carries; a Lease without one
// reports nothing.
func readNodeReport(lease *coordinationv1.Lease) (nodeReport, error) {
	return readAnnotation[nodeReport](lease, AnnNodeReport)
}

func readAnnotation[T any](lease *coordinationv1.Lease, key string) (T, error) {
	var v T
	data, ok := lease.Annotations[key]
	if !ok {
		return v, nil
	}
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		return v, fmt.Errorf("cannot read annotation %s of Lease %s/%s: %w", key, lease.Namespace, lease.Name, err)
	}
	return v, nil
}
