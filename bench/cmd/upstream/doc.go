// Command upstream is the benchmark's peer: one provisioner driven by
// sigs.k8s.io/sig-storage-lib-external-provisioner, the way users run a
// provisioner today (one process, its own informers and Lease). Its backend is
// provfleet's hostPath backend behind an adapter, so the benchmark compares
// the controllers and not the storage code.
package main
