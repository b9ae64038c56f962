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

// Package monitoring holds the tests that keep what documents and watches
// the manager's metrics in step with what it exports: the table of
// docs/metrics.md, and the Grafana dashboard and PrometheusRule of
// examples/monitoring together with the copies of them that the Helm chart
// ships in charts/provfleet/files/monitoring (make generate writes those;
// charts/charttest checks that they are equal and that the chart renders
// them). The series come from the registry of a manager built in-process as
// cmd/manager builds it, without a control plane; the metric names a query
// selects come from a small PromQL tokenizer (promql.go), which serves these
// tests only.
// The tests start no goroutine of their own beyond one that describes each
// collector.
package monitoring
