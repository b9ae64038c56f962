// Package provisioning holds the end-to-end tests of pkg/provisioning: provision
// controllers run as a ServiceAccount with the project's RBAC against a real
// etcd, kube-apiserver and kube-controller-manager (test/e2e/framework), with a
// backend that makes directories in a temporary folder.
package provisioning
