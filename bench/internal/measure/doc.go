// Package measure reads what the benchmark reports: CPU and memory of
// processes from /proc, series from Prometheus text exposition (the
// apiserver's and the processes' own /metrics), and latency percentiles.
package measure
