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

// Package leaderelection elects one leader per Lease among the replicas of a
// process, for a fleet where each controller has a Lease of its own. It
// reads like client-go's tools/leaderelection: a Config, LeaderCallbacks,
// a LeaderElector with Run and IsLeader, CheckRenewal for a health check
// (client-go's HealthzAdaptor.Check), and an AlwaysLeader for when leader
// election is off.
//
// What comes in: the Lease's events, from a Lease router shared by many
// electors (NewLeaseRouter) or from an informer of the one Lease, and the
// Endpoints lock of an older provisioner, read once per attempt and per
// renewal. What goes out: Lease creates and updates, and the callbacks. Run
// runs in the caller's goroutine; a term adds one goroutine that waits for
// the term's end to stop its work; without a Lease router, the private
// informer runs its own goroutines until Run returns.
//
// Why not client-go's elector:
//   - Idle cost with hundreds of Leases: client-go's followers read the
//     Lease and its leader writes it once per retry period. Here followers
//     wait on informer events and write only when the record expired or was
//     released; the leader writes once per renew interval (the renew
//     deadline less two retry periods).
//   - Work never outlives the term: OnStartedLeading returns a function that
//     waits for the work to end, and the Lease is renewed until it returned.
//     client-go stops renewing at once and does not wait.
//   - A term ends as soon as the Lease is seen deleted or held by another
//     elector (confirmed by a read), not at the next failed renewal.
//   - KeepLease leaves the Lease held when a stop gave up on work that
//     ignores cancellation, or for a successor of the same identity; client-go
//     decides on ReleaseOnCancel once, at start.
//   - The Endpoints lock of older provisioners is read and respected;
//     client-go no longer has Endpoints locks.
//   - Run may be started again after it returned, on a new elector, in the
//     same process: nothing is global, nothing exits the process.
//
// What it keeps of client-go's contract: the record format of client-go's
// LeaseLock (resourcelock.LeaderElectionRecord in the Lease spec, the lease
// duration rounded up to whole seconds, leader transitions counted), so that
// this elector and a client-go one never both lead a Lease; expiry judged by
// the local clock from when a follower saw the record change; the meaning of
// LeaseDuration, RenewDeadline and RetryPeriod, stepping down within the
// renew deadline; jitter between the attempts of followers; and the release
// on stop of ReleaseOnCancel (no holder, a lease of one second), so that a
// follower takes over at once.
package leaderelection
