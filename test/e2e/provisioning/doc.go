// Package provisioning holds the end-to-end tests of pkg/provisioning. Provision
// controllers run as the manager's ServiceAccount, with the RBAC of
// examples/deploy, against a real etcd, kube-apiserver and
// kube-controller-manager (test/e2e/framework), over a backend that makes
// directories in a temporary folder.
package provisioning
