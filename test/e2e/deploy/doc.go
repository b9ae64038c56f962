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

// Package deploy holds the end-to-end tests of the deployment manifests of
// examples/deploy, against a real kube-apiserver (internal/testenv) with its
// Pod Security admission and RBAC: the manager's Deployment, the node
// agents' DaemonSet and Pods of their templates are admitted, in dry runs,
// at the Pod Security levels their namespaces are labelled for and refused
// below, and the shipped ServiceAccounts may make exactly the calls their
// roles need. The tests run one after the other on the package's one
// control plane and start no goroutine of their own.
package deploy
