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

// Package fleet runs one provisioning.Controller per ProvisionerConfig object
// in one process.
//
// A process plays one or both of two roles (Settings.Roles). The manager's
// runs the NFS and custom backends, and for each hostPath backend a
// coordinator: under the provisioner's Lease it places Immediate claims on
// the served node with the most room (in a process that is also the node
// agent of the one node a ProvisionerConfig's nodeName names, it hands them to
// its own node instance with no write: handover.go), sends claims selected to
// a node it does not select back to the scheduler (a bounded number of
// times), and reports, or deletes, the volumes of removed nodes; it writes
// every status, with the served nodes of hostPath
// backends (status.nodes) as the node agents report them. A node agent's
// holds its node's Lease (NodeLeaseName) and, while it does, runs a
// controller without a Lease of its own for each hostPath backend that
// selects its node, limited to the node's claims and volumes (a
// provisioning.Scope), with the node's path; it publishes how each runs in
// the Lease's annotations with its renewals, and releases the directories of
// the volumes the manager deleted while its node was removed.
//
// What comes in: ProvisionerConfig objects, from an informer whose add, update
// and delete queue the object and every other that shares one of its names,
// its Lease or its backend base; Settings (the manager's flags: identity, Lease
// namespace, leader election, hostPath root, node, API budgets, backend probe
// interval, metrics registry) and Options (WithBackend: custom backends).
//
// What goes out: for each object, a Manager reconcile starts, re-tunes live
// (Reconfigure), restarts or stops one provisioning.Controller with the backend
// of spec.backend, and writes the object's status (Ready and Leading
// conditions, leader, observed generation, the storage space the leader's
// backend probe found) with a Warning Event when it refuses the object or
// its backend turns unavailable, and a Normal one when the backend is back. The fleet shares one set of claim, volume, class, node
// and Lease informers, with one event router and the PV path index, the
// claim, volume, class and node caches trimmed to what the controllers read
// (internal/cachetrim); one
// connection pool, each provisioner's requests named after it and spending its
// share of the fleet's fair API budget (internal/fairlimit), its Lease and
// Event writes budgets of their own; the provisioners' metrics on
// Settings.Registerer; and health checks (Ready, LeaseHealthy, Stuck).
//
// The node agents are held to their own nodes by the API server
// (examples/deploy/node-restriction.yaml); the manager writes what those
// policies cannot look up (NodeVolumesParams), lists the volumes it deleted
// while a node was removed in a ConfigMap per node that no agent may write
// (RemovedListName), takes off it what the agent says it released, deletes
// the Leases of nodes that are gone, and warns when the API server is too old
// to enforce the policies (nodetrust.go).
//
// Goroutines, all ended when Run returns: the shared informers, the
// ProvisionerConfig informer and those of the Nodes, node Leases and removal
// lists; the manager's node trust worker (watchNodeTrust); the
// manager's wait for node Leases that expire unrenewed (watchNodes), which
// with the Node and Lease events queues the hostPath ProvisionerConfigs a
// node's change concerns; the Event broadcaster; the reconcile workers (runWorker), which stop each
// instance and wait until it drained; a node agent's elector on its node's
// Lease; one goroutine per instance running its Controller.Run or its
// coordinator's Run, which while leading runs one more to place claims and
// watch removed nodes (registry.Start); and,
// while a request waits for the fair budget, its dispatcher (stopped with the
// budget once every instance stopped).
package fleet
