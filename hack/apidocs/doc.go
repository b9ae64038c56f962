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

// Command apidocs writes the API reference, docs/api.md, from the CRDs that
// controller-gen generates into crds/ out of the kubebuilder markers of
// api/v1alpha1: every field of every served version with its type, default,
// description and the validation the apiserver enforces (required, enums,
// bounds, patterns, list types and the CEL rules with their messages).
// hack/update-codegen.sh runs it after controller-gen:
//
//	go run ./hack/apidocs -out docs/api.md crds/*.yaml
//
// In: CRD YAML files. Out: one Markdown file, the same bytes for the same
// CRDs (fields sorted by name). A schema keyword the renderer does not show
// fails the run rather than being left out of the reference. No goroutines.
package main
