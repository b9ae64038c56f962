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

// Package harness runs the benchmark: it starts a fresh control plane with
// the PV binder unthrottled, builds and runs provfleet's manager, the
// upstream-library peer and the limit client, drives the scenarios of the
// benchmark issue against each, and measures them from the outside (its own
// watches, /proc, the apiserver's and the processes' metrics). For the NFS
// scenario it serves a folder over NFSv3 on loopback itself (go-nfs, one
// accepting goroutine and one per connection, stopped with the scenario), and
// checks the volumes' directories on that folder. For the node agents'
// scenario it creates Node objects, gives each a folder standing in for its
// disk, runs one node agent (or peer process) per node next to one manager,
// and checks that each volume landed on its claim's node. Scenario 10 needs
// none of that: it deletes volumes holding deep and wide trees through the
// hostpath and nfs backends in its own process (NFS against an export held
// in memory) and samples its own open files and live heap meanwhile; run
// alone, it starts no control plane. Scenario 11 writes a tree of mixed file
// sizes, times cp -a of it, moves it into a claim's volume on hostPath and
// on an export of its own NFS server (a rename, no copy), and times a claim
// cloning that one until it is Bound, then checks the clone holds the tree.
// Scenario 12 runs manager replicas in the manager role alone next to one
// node agent, and reads who leads each provisioner from the provisioners'
// Leases; scenario 13 starts one go-nfs server per provisioner, stopped
// with its run.
package harness
