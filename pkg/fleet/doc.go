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
// hostpathnodes.Coordinator, and writes every status; a node agent's
// (hostpathnodes.Agent) holds its node's Lease and, while it does, has this
// fleet run a controller without a Lease of its own for each hostPath
// backend that selects its node. The node side, its Lease protocol and its
// trust boundary live in package hostpathnodes; this package starts,
// re-tunes, stops and reports the instances of both roles, and shares the
// informers and the API budget between them.
//
// What comes in: ProvisionerConfig objects, from an informer whose add, update
// and delete queue the object and every other that shares one of its names,
// its Lease or its backend base; Settings (the manager's flags: identity, Lease
// namespace, leader election, hostPath root, node, API budgets, backend probe
// interval, metrics registry) and Options (WithBackend: custom backends); and
// from the node side, the ProvisionerConfigs a node's change concerns and
// the node instances to run (nodeRole, hostpathnodes.Fleet).
//
// What goes out: for each object, a Manager reconcile starts, re-tunes live
// (Reconfigure), restarts or stops one provisioning.Controller with the backend
// of spec.backend, and writes the object's status (Ready and Leading
// conditions, leader, observed generation, the storage space the leader's
// backend probe found, the served nodes of a hostPath backend) with a Warning
// Event when it refuses the object or its backend turns unavailable, and a
// Normal one when the backend is back. The fleet shares one set of claim,
// volume, class, node and Lease informers, with one event router and the PV
// path index, the claim, volume, class and node caches trimmed to what the
// controllers read (internal/cachetrim), and in the manager's role the
// claim and volume caches limited to the objects of the ProvisionerConfigs
// served, the volumes inside their bases and those of no provisioner
// (cacheScope), which refresh when those change, every controller waiting
// until they hold its objects; one connection pool, each
// provisioner's requests named after it and spending its share of the
// fleet's fair API budget (internal/fairlimit), its Lease and Event writes
// budgets of their own; the provisioners' metrics on Settings.Registerer;
// and health checks (Ready, LeaseHealthy, Stuck).
//
// Manager replicas share the ProvisionerConfigs out (membership.go): each
// holds a membership Lease of its own while it runs, follows the others'
// through the fleet's Lease informer, and every one computes the same
// spread of the object names over the live replicas (spread.go, rendezvous
// hashing with bounded load). A replica starts and reports only the
// ProvisionerConfigs the spread gives it; one that leaves its share stops
// its instance, which drains and releases its Lease for the new owner. The
// provisioners' Leases still decide who works, so replicas that see the
// members differently for a moment never both lead. Without leader
// election, or in a node agent's role alone, there is no membership and the
// process runs everything.
//
// Goroutines, all ended when Run returns: the shared informers and the
// ProvisionerConfig informer; the one that sets the caches' scope again
// after a ProvisionerConfig changed (scopeCaches); the node side's
// (hostpathnodes.Nodes.Watch); with a membership, the elector of the
// replica's membership Lease;
// the Event broadcaster; the reconcile workers (runWorker), which stop each
// instance and wait until it drained; a node agent's elector on its node's
// Lease (hostpathnodes.Agent.Run); one goroutine per instance running its
// Controller.Run or its coordinator's Run (registry.Start); and, while a
// request waits for the fair budget, its dispatcher (stopped with the
// budget once every instance stopped).
//
// # Reading the code
//
// manager.go makes the Manager, its informers and its node side
// (hostpathnodes.New) and runs the reconcile workers, whose
// processNextWorkItem calls reconcile, or respread (membership.go) for
// the queue's spread key. From reconcile to a started
// controller, five hops, the first four in reconcile.go:
//
//	reconcile           reconcile.go: the ProvisionerConfig of a key
//	runInstance         reconcile.go: its Config (mapping.go), conflicts,
//	                    then the outcome in an observation
//	ensureInstance      reconcile.go: a live re-tune (updateInstance), or
//	startInstance       reconcile.go: builds the controller, a
//	                    hostpathnodes.Coordinator (Nodes.NewCoordinator) or
//	                    a provisioning.Controller (buildController, with its
//	                    backend of backends.go, through the tenants
//	                    interface of clients.go)
//	registry.Start      registry.go: the instance's goroutine
//	Run                 the controller interface: provisioning.Controller's
//	                    or hostpathnodes.Coordinator's, both the
//	                    provisioning.Elected skeleton's
//
// A node agent's instance starts on a longer path: reconcile hands the
// ProvisionerConfig to hostpathnodes.Agent.Reconcile, which decides what
// the node runs and calls back RunOnNode (noderole.go, the
// hostpathnodes.Fleet interface), which calls runInstance. status.go writes
// what reconcile observed, nodestatus.go adds a coordinator's nodes,
// fleetmetrics.go and clients.go hold the fleet's metrics, clients and
// budgets, cachescope.go what the caches keep.
//
// # Glossary
//
// Role: the part a process plays, the manager's or a node agent's
// (Settings.Roles); one process may play both.
//
// Controller: what the fleet runs for a ProvisionerConfig: a
// provisioning.Controller or, in the manager's role, a hostPath backend's
// hostpathnodes.Coordinator. The controller interface is what the fleet
// needs of either.
//
// Instance: one controller the fleet started for one ProvisionerConfig in
// one role, as the registry holds it: under its key (the object's name for
// the manager's instance; nodeKeyPrefix and the name for a node agent's, a
// node instance), with the token of its start and the Config, backend and
// generation it runs with. An instanceSpec is what an instance is made of.
//
// Token: the number of an instance's start, unique in the registry, so that
// stopping an old instance can never stop its replacement.
//
// Reconcile: one pass of a reconcile worker over one ProvisionerConfig,
// which starts, re-tunes, restarts or stops its instances and writes its
// status from the observation it made.
//
// Re-tune: a change of spec that an instance's controller takes live
// (Reconfigure). What it cannot take (provisioning.CheckReconfigure)
// restarts the instance, which keeps its Lease when the lease settings did
// not change.
//
// Refusal: the outcome of a ProvisionerConfig that cannot run as written (a
// name, Lease or backend base shared with an older one, an invalid spec, a
// backend that cannot start): Ready is False with a reason, and a Warning
// Event says why.
//
// Tenant: one provisioner of the fleet, as provisioning's doc says; here,
// its share of the fleet's API budget: its client names its requests after
// it and spends its share (the tenants interface builds it).
//
// Membership, spread, share: the live manager replicas, as their
// membership Leases show them; which replica runs each ProvisionerConfig;
// the ProvisionerConfigs one replica runs.
//
// Stuck instance: one whose controller has a backend call running past its
// deadline. Once stopped, it leaves its Lease to expire, and its
// replacement starts after that (leaseFree).
//
// Cache scope: the claims and PersistentVolumes the manager's caches keep,
// from the ProvisionerConfigs the replica serves (cacheScope.Update, called
// in updateCacheScope alone); for now every ProvisionerConfig in the cache.
// StorageClasses and Nodes are cached whole: a coordinator places claims on
// any node its selectors take and reads their classes as it places them.
package fleet
