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

// Package faultproxy stands between the processes of a test and the
// kube-apiserver and fails a share of their requests, as a loaded or
// partitioned control plane would, so that chaos runs prove what the
// code does when the API misbehaves.
//
//	New(Options{Upstream, Transport, Seed, Rates}) ──▶ *Proxy
//	Proxy.Endpoint(name) ──▶ an https:// address on loopback for one process,
//	    and the certificate its clients trust
//	Proxy.Partition(name, true) ──▶ that endpoint answers nothing, its open
//	    watches stall, until Partition(name, false)
//	Proxy.SetRates(rates) ──▶ other shares from the next request on (zero: none)
//	Proxy.Injected() ──▶ the faults sent, by kind
//	Proxy.Close()
//
// A client reaches an endpoint over TLS (client-go sends no credentials
// over plain HTTP) with its own bearer token,
// which the proxy passes on to the apiserver over the Transport given: the
// apiserver authenticates and authorizes each process as itself. Each
// request draws one fault or none from Rates (Fault): an error before it
// is sent (500), a throttle (429 with Retry-After), a reply lost after a
// write was carried out (the write reaches the apiserver, the client gets
// a 500), a timeout (held until the client gives up, then the connection
// dropped), a slow answer, or, for a watch, a stream cut mid-way.
//
// Seed fixes the fault schedule: the n-th request an endpoint sees draws
// the same fault on every run with that seed. Which request is the n-th
// depends on the processes' ordering, which no seed replays.
//
// Goroutines: one HTTP server per endpoint, ended by Close.
package faultproxy
