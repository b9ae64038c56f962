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

// Package testenv runs a real Kubernetes control plane on this machine for the
// end-to-end tests, for `make run` (hack/runlocal) and for the benchmark.
//
//	Start(ctx, Options) ──▶ etcd ──▶ kube-apiserver ──▶ kube-controller-manager ──▶ CRDs Established
//	                        (one child process each, loopback ports, own process group)
//	Environment ──▶ Config()                     admin rest.Config (system:masters)
//	            ──▶ ServiceAccountConfig(...)    rest.Config of a ServiceAccount, after applying its RBAC
//	            ──▶ ManagerServiceAccountConfig  the same for the manager's, with the RBAC of examples/deploy
//	            ──▶ NodeAgentServiceAccountConfig the same for the node agents', with examples/deploy/node-rbac.yaml
//	            ──▶ NodeAgentPodConfig(.., node) the node agents' with a token bound to a Pod on node, as the
//	                                         DaemonSet's get it, with node-restriction.yaml applied
//	            ──▶ Apply(...)                   server-side apply of YAML files
//	            ──▶ AdminKubeconfigPath(), BinDir() for kubectl and binaries under test
//	WriteKubeconfig(path, config)                a kubeconfig file of any rest.Config, for --kubeconfig
//	Stop()      ──▶ SIGTERM each server, newest first (SIGKILL after 10s), removes the folder
//
// What comes in: the binaries of `make controlplane` (PROVFLEET_CONTROLPLANE_BIN
// names another folder) and the CRD YAML of crds/. kube-apiserver authenticates
// client certificates and ServiceAccount tokens, authorizes with RBAC and
// admits with ValidatingAdmissionPolicies, so code under test gets exactly
// the permissions the project ships;
// kube-controller-manager runs the PersistentVolume binder, the PV and PVC
// protection controllers and the namespace controller.
//
// Processes and goroutines: the three servers (package childproc), each with a
// goroutine that waits for its exit, and a watchdog shell whose stdin only this
// process holds: when the process dies without Stop (a panic, a test timeout,
// SIGKILL) the watchdog kills the servers and removes the folder. Stop ends all
// of them.
//
// In a test binary RunMain is the body of TestMain: one Environment for the
// whole binary, handed to each test by Env (which skips the test in -short
// mode); the servers' last log lines are printed when a test failed, and two
// goroutines that wait for SIGINT or SIGTERM stop the Environment before the
// binary ends.
//
// Beside it: childproc starts and stops the child processes, managerproc
// runs the manager binary against an Environment, and nfsserver serves a
// folder over NFSv3 on loopback, with knfsd's secure and root_squash rules on
// request, for the NFS backend's tests.
package testenv
