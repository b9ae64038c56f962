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

// Package managerproc runs the manager binary (cmd/manager) as a child process
// against an internal/testenv control plane: the end-to-end tests of the fleet
// use it where process death matters, `make run` (hack/runlocal) for the local
// demo, and the benchmark for its ports.
//
//	Build(ctx, root, dir)   ──▶ go build ./cmd/manager ──▶ path of the binary
//	                            (or $PROVFLEET_MANAGER_BIN, built beforehand)
//	Start(Options)          ──▶ manager process (own process group, free loopback ports)
//	Process ──▶ WaitReady   polls /readyz
//	        ──▶ Metrics     text of /metrics
//	        ──▶ Terminate   SIGTERM, SIGKILL after a timeout; Kill: SIGKILL
//
// Processes and goroutines: one manager process per Start, and a goroutine
// that waits for its exit and closes Done. Nothing else runs; the caller ends
// the process with Terminate or Kill (it runs in its own process group, so a
// Ctrl-C reaches only the caller, which stops the manager before the control
// plane).
package managerproc
