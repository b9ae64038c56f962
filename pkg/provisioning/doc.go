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

// Package provisioning is a stoppable, multi-instance-safe Kubernetes external
// volume provision controller. Many controllers can run in one process on one set
// of shared informers, whose events a Router hands to the controllers they
// concern: each controller has its own work queues, metric series and Lease, an
// idle one holds no worker goroutine, and Run returns once its workers drained
// and its subscriptions ended.
//
// Backend calls get a deadline (Config.Timeouts). A call that ignores it
// cannot be cancelled: Run waits for it at most Timeouts.Drain, then returns
// without releasing the Lease, which expires, and leaves only that call's
// worker behind until the call returns; Stuck reports it meanwhile.
//
// No backend volume is leaked when a process dies between a backend's
// Provision and the creation of the PersistentVolume: a backend that is a
// Reclaimer keeps its own record, which the leader goes through when it starts
// leading and at every resync; for other backends an intent finalizer on the
// claim guards the window, at two more API writes per claim.
package provisioning
