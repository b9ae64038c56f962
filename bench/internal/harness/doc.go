// Package harness runs the benchmark: it starts a fresh control plane with
// the PV binder unthrottled, builds and runs provfleet's manager, the
// upstream-library peer and the limit client, drives the scenarios of the
// benchmark issue against each, and measures them from the outside (its own
// watches, /proc, the apiserver's and the processes' metrics).
package harness
