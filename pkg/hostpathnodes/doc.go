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

// Package hostpathnodes is the node side of the fleet's hostPath
// provisioners: the node agents, each of which provisions and deletes the
// volumes of its own node, the manager's coordinator of each provisioner,
// which does what no node can do alone, and the Lease protocol between them.
//
// A hostPath provisioner's volumes are directories on its nodes' disks, so
// only a process on a node can make or delete them. A node agent holds its
// node's Lease (NodeLeaseName) and, while it does, has the fleet run an
// instance of every hostPath ProvisionerConfig that selects the node,
// limited to the node's claims and volumes (a provisioning.Scope) and
// without a Lease of its own; it publishes how each runs, and the space of
// its disk, in the Lease's annotations with its renewals (AnnNodeReport).
// The manager reads those reports (nodeservice.go, by its own clock:
// leaseclock.go) to count the served nodes in the status, to place the
// claims of Immediate binding on the served node with the most room
// (placement.go; a clone goes to the node of its source's volume, whose
// agent alone reads it and copies it: cloneplacement.go), and to tell the
// agents that stopped renewing.
//
// # In and out
//
// In: Settings (the process's roles, its node, its identity, the node
// Leases' namespace and duration), Deps (the manager's client, the node
// agent's, the ProvisionerConfig informer, the Fleet that runs the
// instances, a metrics registry), and the events of the Nodes, the node
// Leases and the removal lists, informed here, and of the fleet's shared
// claim, volume and class informers.
//
// Out: for the fleet, a Coordinator per hostPath ProvisionerConfig
// (Nodes.NewCoordinator), the nodes' part of a status (Nodes.Status), the
// Nodes informer it shares with its provision controllers, and calls of
// Fleet: reconcile a ProvisionerConfig again, run or stop a node instance.
// To the API: the node's Lease and its annotations (the agent); the
// selected-node annotation of placed claims, the node-gone annotation and
// the deletion of the volumes of removed nodes, the capacity of expanded
// volumes and the resize status of their claims, the removal lists
// (RemovedListName), NodeVolumesParams and the deletion of the Leases of
// nodes that are gone (the manager); Events on claims, volumes and
// ProvisionerConfigs; the metric provisioner_removed_node_volumes.
//
// # Trust
//
// The agents hold node credentials and are held to their own nodes by the
// API server (examples/deploy/node-restriction.yaml), not by their good
// behaviour. What those policies cannot look up the manager writes
// (nodeparams.go). The volumes the manager deleted while their node was
// removed are listed in a ConfigMap per node that no agent may write
// (noderemovedlist.go); the agent says in its own Lease which directories
// it released, the manager takes them off the list, and deletes the lists
// and Leases of nodes that are gone (nodegc.go). nodetrust.go runs that
// and warns when the API server is too old to enforce the policies.
//
// # Goroutines
//
// All end when the function that started them returned or its stop ran.
// Nodes.Watch: the manager's wait for node Leases that expire unrenewed
// (nodewatch.go), which with the Node and Lease events queues the hostPath
// ProvisionerConfigs a node's change concerns, and its node trust worker.
// Agent.Run: the elector of the node's Lease in the caller's goroutine. A
// Coordinator's Run, in the fleet's goroutine of that instance, elects on
// the provisioner's Lease as a provision controller does (the
// provisioning.Elected skeleton, through the shared router's Lease route)
// and, while leading, runs one goroutine that syncs placement and node
// removal. Nodes.Start: the informers.
//
// # Why not client-go's
//
// The node Leases are judged by this process's clock, as client-go's
// elector and the node lifecycle controller judge theirs, since an agent's
// clock may be off (leaseClock); the node agent elects with
// internal/leaderelection, which can put its report on the Lease with each
// renewal (Config.Annotate), which client-go's elector cannot; an agent
// alone caches only its own node's claims and volumes (nodecache.go), with
// internal/cachetrim's filtering list-watch, as client-go's informers
// filter by field and label only; in a process of both roles the fleet
// keeps them (NodeCacheScope) besides what the manager's role keeps.
//
// # Reading the code
//
// hostpathnodes.go makes the informers and holds the role; nodeagent.go is
// the Agent: Agent.Reconcile decides what this node runs of a
// ProvisionerConfig (nodeBackend, with the node's paths of nodes.go) and
// has the Fleet run it. coordinator.go is the Coordinator: its Run (the
// provisioning.Elected skeleton's) elects, its Lead starts a term whose
// work calls sync, which places claims
// (placement.go, handover.go), expands volumes within their node's budget
// (expansion.go) and handles the volumes of removed nodes
// (noderemoval.go). nodelease.go, nodeservice.go and leaseclock.go are the
// Lease protocol; nodestatus.go reads it into the status; nodewatch.go
// queues what a node's change concerns.
package hostpathnodes
