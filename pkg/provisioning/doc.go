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
// volume provision controller, the job sig-storage-lib-external-provisioner
// does. Many controllers run in one process on one set of shared informers;
// each has its own work queues, metric series and Lease, an idle one holds no
// worker goroutine, and Run returns once its workers drained and its
// subscriptions ended.
//
// # In and out
//
// In: a Config (Reconfigure re-tunes a running controller), a Provisioner
// (the backend, with its optional interfaces: Qualifier, BlockProvisioner,
// DataSourceProvisioner, DeletionGuard, Reclaimer, Prober, BudgetReporter,
// VolumeRecorder, Expander), and the events of the
// shared claim, volume, class and node informers, which the event router hands
// to the controllers they concern.
//
// Out: PersistentVolumes created for claims and deleted with their backend
// volumes, finalizer patches of claims and PersistentVolumes, the capacity
// of expanded PersistentVolumes and the resize status of their claims
// (Resizer, which a fleet's hostPath coordinator runs too), Events on
// claims and volumes, metric series labelled with the provisioner, and the
// backend's Health, whose changes OnHealthChange is told of.
//
// # Goroutines
//
// The Lease elector of each controller campaigns for its Lease and starts a
// term when it wins (without leader election, Run starts one at once). A
// term runs the work queues' workers on demand (claims, volumes, PV saves
// and, for a Reclaimer, reclaim), started when work arrives and ended when
// the queue is idle, and a resync timer that queues everything again every
// ResyncPeriod. For a Prober, a term also runs one goroutine that probes the
// backend every ProbeInterval and when a Provision or Delete failed; the
// term's end waits for it as for the workers. Every backend call runs under
// a deadline whose watcher, a timer, reports it once it is overdue.
//
// # Reading the code
//
// From Run to a claim's sync, six hops over three files:
//
//	Controller.Run       term.go: Elected's; waits for the caches, campaigns
//	LeaderElector.Run    internal/leaderelection/elector.go: each term it
//	                     wins calls its Leader's Lead
//	Controller.Lead      term.go: the Leader interface; starts a term
//	newTerm              term.go: the term's work queues
//	                     (internal/workqueue), each of which starts a worker
//	                     when work arrives
//	runWorker            term.go: one worker, handing it the queue's items
//	claimWorker.work     claim.go: the itemWorker interface; settles the
//	                     claim's retries
//	syncClaim            claim.go
//
// A PersistentVolume takes the same path to volumeWorker.work and
// syncVolume (delete.go). A fleet's hostPath coordinator is elected by the
// same skeleton, Elected. The event router (internal/eventrouter, router.go
// here) hands the term the events of this controller's claims and volumes,
// which the handlers of events.go filter and queue.
//
// A claim goes through syncClaim (claim.go), which provisions it
// (provision.go), saves its PersistentVolume (save.go) or abandons it; a
// PersistentVolume goes through syncVolume (delete.go), which first writes on
// it what a VolumeRecorder decided (record.go). reclaim.go goes
// through a Reclaimer's record, backendcall.go puts each backend call under
// its deadline, health.go probes a Prober, expand.go grows the volumes of
// bound claims that ask for more, room.go retries the claims
// waiting for room, finalizers.go and names.go hold the finalizers, annotations
// and names the others share.
//
// # Glossary
//
// Tenant: one provisioner of the fleet, that is one Controller (and one
// ProvisionerConfig object in the manager), sharing the process, its
// informers and its API budget with the others but nothing else.
//
// Known names: the provisioner name and its additional names; a claim, class
// or PersistentVolume naming one of them is this controller's.
//
// Term: one period of leadership of a controller, from winning its Lease to
// losing it or stopping. The work queues, workers and event handlers belong
// to a term and end with it.
//
// Backend volume: what a Provisioner made for a claim (a directory, an
// export), described by the PersistentVolume that Provision returns.
//
// Saved volume: a backend volume whose PersistentVolume exists in the API.
// Until then the backend volume is unsaved: only the backend knows about it.
// With VolumeSave mode Retry the save is tried a few times and the backend
// volume deleted when all fail; with RetryForever it waits in the PV save
// queue (a pending save) until it succeeds.
//
// Claim in progress: a claim whose provisioning the backend continues in the
// background (ProvisioningInBackground). It is remembered even once the claim
// is deleted, so that whatever the backend makes is deleted and never leaked,
// with the clone source it was admitted with and when it began, from which
// its duration is counted once it ends. Its calls are no failures: each is
// a Normal Event, none counts towards the failure threshold.
//
// Abandoned claim: a claim that no longer wants the volume made for it: gone
// (only the claims in progress still know it), being deleted, or bound to
// another PersistentVolume. Abandoning it deletes its backend volume unless a
// PersistentVolume took the volume over, and removes its intent finalizer; a
// claim in progress has its backend called once more with
// ProvisionOptions.Abandoned first, to stop what it runs in the background.
//
// Clone: a claim whose data source is another claim. Its source is admitted
// (clone.go) before the backend is asked, and handed to it as
// ProvisionOptions.CloneSource.
//
// Intent finalizer: a claim finalizer (IntentFinalizer) with which a
// controller whose backend is no Reclaimer records, before it asks the
// backend for a volume, that a backend volume may exist for the claim. It
// goes once the PersistentVolume is saved or the backend volume deleted, so a
// process that dies in between leaks nothing, at two more API writes per
// claim.
//
// Volume finalizer: VolumeFinalizer on a PersistentVolume (Config.Finalizer),
// which keeps the PersistentVolume, Terminating, until its backend volume is
// deleted.
//
// Unsaved record: the record a Reclaimer keeps of the backend volumes it made
// whose PersistentVolume it has not seen saved yet (Reclaimer.Unsaved).
//
// Reclaim: the leader's pass over the unsaved record, when a term starts and
// at every resync: a volume whose PersistentVolume exists is handed back to
// the backend to settle (Reclaimer.Saved), one that no claim wants any more is
// deleted.
//
// Backend call: one call of the Provisioner, with a deadline: Timeouts.Provision
// for calls about a claim (Provision and the questions before it),
// Timeouts.Delete for calls about a volume (Delete, ShouldDelete, Unsaved,
// Saved), ProbeInterval for a probe.
//
// Backend unavailable: the last probe of a Prober failed. Failures of
// Provision and Delete then do not count towards the failure thresholds:
// claims and volumes wait for the backend, and are retried at each probe
// interval.
//
// No room: a backend refused a claim with an error wrapping ErrNoRoom (a
// capacity budget used up, a file system too full). The refusal does not
// count towards the failure threshold either: the claim waits for room,
// retried with the backoff of Config.Retry and at once when this controller
// deleted a backend volume or saw a PersistentVolume of its provisioner go.
//
// Stuck call: a backend call that outlived its deadline by a grace period
// and has not returned (it may ignore its context, as a call on a hard NFS
// mount does). It cannot be cancelled: Stuck and the stuck-calls metric report
// it until it returns. Run waits for it at most Timeouts.Drain, then returns
// without releasing the Lease, which expires, and leaves only that call's
// worker behind.
package provisioning
