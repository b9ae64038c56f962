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

// Command upstream is the benchmark's peer: one provisioner driven by
// sigs.k8s.io/sig-storage-lib-external-provisioner, the way users run a
// provisioner today (one process, its own informers and Lease). Its backend is
// provfleet's hostPath backend behind an adapter, so the benchmark compares
// the controllers and not the storage code. With --node-name it is one node's
// process, as node-local provisioners built on the library run: no Lease,
// local volumes on that node, only the claims whose selected-node names it.
package main
