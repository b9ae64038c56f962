// Package provisioning is a stoppable, multi-instance-safe Kubernetes external
// volume provision controller. Many controllers can run in one process on one set
// of shared informers: each has its own work queues, metric series and Lease, and
// Run returns once its workers drained and its event handlers were removed.
package provisioning
