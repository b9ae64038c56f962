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

// Command deployexamples writes examples/deploy, the plain manifests of a
// provfleet install, from the Helm chart: it renders charts/provfleet with
// the values of values.yaml beside it, as `helm template` would, splits the
// manifest into one file per template (charttest.DeployExamples) and replaces
// the YAML files of the output folder with them, so a file the chart no
// longer renders goes too. `make generate` runs it and `make verify` fails
// while examples/deploy differs from what it writes.
//
//	go run ./cmd/deployexamples -root ../..
//
// In: the chart and the values file. Out: the files of examples/deploy.
package main
