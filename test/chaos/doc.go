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

// Package chaos runs provfleet under randomised faults on a real control
// plane and checks, from the end state and from histories recorded during
// the run, that no claim was provisioned twice, no volume leaked and every
// process survived or restarted cleanly.
//
// A run (Run, Options; `make chaos`, or the short form TestChaos in
// `make test`) starts etcd, kube-apiserver with an audit log of
// PersistentVolume creations, and kube-controller-manager's PV binder;
// manager replicas (cmd/manager built with the build tag chaos, which
// carries the store's fault layer and history) and a node agent for each
// of three simulated nodes, each process reaching the apiserver through
// its own endpoint of a fault-injecting proxy (faultproxy) with its own
// ServiceAccount token; and two NFS servers, each behind a front that
// fails a share of mutating calls (nfsserver.Faults). Four provisioners
// (hostPath WaitForFirstConsumer and Immediate on the nodes' disks, NFS
// Immediate and WaitForFirstConsumer with Archive) get claims made and
// deleted continuously while the schedule (schedule.go, drawn from the
// seed) SIGKILLs processes, rolls node agents (two of a node at once),
// cuts a leading manager or an agent off from the apiserver for longer
// than its Lease, restarts the NFS servers, edits, pauses, deletes and
// recreates ProvisionerConfigs, and removes and returns Nodes.
//
//	setUp ──▶ chaos (workload + disruptor, Duration)
//	      ──▶ converge (faults off, every process SIGTERMed and replaced
//	          by one without store faults, wait for checkState to pass)
//	      ──▶ check (checkHistory from the audit log and the stores'
//	          histories, actedWhileCut, the processes) ──▶ Result
//
// The seed replays the schedule and every fault layer's draws, not the
// ordering between processes. A run that fails keeps its work folder:
// each process's logs (logs/), the stores' histories (history/) and the
// disks.
package chaos
