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

// Package charttest holds the tests of the Helm chart beside it,
// charts/provfleet, and what they share with `make generate`: it renders the
// chart with helm's Go packages, as `helm template` does but without the
// helm binary, decodes the rendered manifest into typed Kubernetes objects,
// and splits it into the files of examples/deploy (cmd/deployexamples writes
// them). Its tests lint the chart, check that split, keep the chart's CRD
// in step with its kustomize base (which installs the CRD too) and crds/,
// its dashboard, alerts, ServiceMonitor and PodMonitor with
// examples/monitoring, and its image with the default tag of `make image`,
// check that the monitors scrape the manager and the node agents, check the
// Pod Security levels of its Pods in-process and against a real API server,
// and install it on the control plane of internal/testenv, where the
// manager and a node agent run as the chart's ServiceAccounts; on a control
// plane of its own, they run the documented CRD upgrade on a release that
// helm's install action made from an older chart.
//
// In: the chart's folder and values. Out: the release helm would install
// (its manifest in install order and its notes), the objects of a manifest,
// and the files of examples/deploy. It is a module of its own so that
// helm's dependencies stay out of the manager's go.mod.
//
// Nothing here starts goroutines or talks to a cluster; the tests start the
// control plane and the manager processes.
package charttest
