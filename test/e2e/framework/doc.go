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

// Package framework runs a real Kubernetes control plane for end-to-end tests:
// etcd, kube-apiserver (client-certificate auth, RBAC) and kube-controller-manager
// with the PersistentVolume binder, the PV and PVC protection controllers and the
// namespace controller. One Environment serves one test binary (see RunMain); it
// hands out an admin rest.Config and rest.Configs that authenticate as
// ServiceAccounts, so code under test runs with the RBAC rules the project ships.
//
// The binaries come from `make controlplane`; set PROVFLEET_CONTROLPLANE_BIN to
// use another folder.
package framework
