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

// Package childproc starts and stops the child processes of the test control
// plane, of the manager under test and of the benchmark's systems: one binary
// per Process, in its own process group so that a Ctrl-C reaches only the
// caller, which stops its children in order.
//
//	Start(name, binary, args, Options) ──▶ Process ──▶ Done, Exited   has it ended, and how
//	                                               ──▶ Terminate      SIGTERM, SIGKILL after a grace period
//	                                               ──▶ Kill           SIGKILL
//	FreeAddr()                         ──▶ a loopback address for a child to listen on
//
// Processes and goroutines: the child, and one goroutine per Process that waits
// for its exit, closes the log file of Options.LogPath and then closes Done.
// A Process is never stopped for the caller: it runs until Terminate, Kill or
// its own exit.
package childproc
