// Package provisioning is a stoppable, multi-instance-safe Kubernetes external
// volume provision controller. Many controllers can run in one process on one set
// of shared informers, whose events a Router hands to the controllers they
// concern: each controller has its own work queues, metric series and Lease, an
// idle one holds no worker goroutine, and Run returns once its workers drained
// and its subscriptions ended.
package provisioning
