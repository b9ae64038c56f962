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
