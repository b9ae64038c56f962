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

// Package v1alpha1 is the provfleet.io/v1alpha1 API: the cluster-scoped
// ProvisionerConfig, one object per volume provisioner run by the fleet manager.
// Validation and defaults live in kubebuilder markers, so the CRD generated from
// these types refuses bad objects at the apiserver.
//
// +kubebuilder:object:generate=true
// +groupName=provfleet.io
package v1alpha1
