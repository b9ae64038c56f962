/*
Copyright The provfleet Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command manager runs the provfleet fleet manager: one provision controller per
// ProvisionerConfig, with metrics on --metrics-bind-address and health checks
// (/healthz, /readyz) on --health-probe-bind-address. SIGTERM or SIGINT drains
// every instance, releases every Lease and exits 0.
//
// "manager migrate --from nfs-subdir|local-path [--dry-run]" runs the
// migration plan of pkg/migrate instead: it prints what taking over the old
// provisioner would do and, without --dry-run, does it (docs/migrating.md).
package main
