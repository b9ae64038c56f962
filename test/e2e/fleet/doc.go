// Package fleet holds the end-to-end tests of the fleet manager: the real
// cmd/manager binary, run as processes under the RBAC of examples/deploy,
// against a real etcd, kube-apiserver and kube-controller-manager.
package fleet
