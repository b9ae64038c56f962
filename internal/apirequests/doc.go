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

// Package apirequests counts the API requests a process sends, by verb,
// resource and response code, labelled as the apiserver labels its own
// apiserver_request_total. An operator sees where the fleet's client budget
// goes without access to the apiserver's metrics, and the benchmark compares
// the requests per claim of the manager and of its peer, which runs in a
// process of its own and uses the same counter.
//
// client-go has request metrics of its own (k8s.io/client-go/tools/metrics),
// but they are process-global hooks without the resource, and the manager
// keeps its metrics on a registry of its own.
package apirequests
