// Command manager runs the provfleet fleet manager: one provision controller per
// ProvisionerConfig, with metrics on --metrics-bind-address and health checks
// (/healthz, /readyz) on --health-probe-bind-address. SIGTERM or SIGINT drains
// every instance, releases every Lease and exits 0.
package main
