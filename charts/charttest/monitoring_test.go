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

package charttest_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/provfleet/provfleet/charts/charttest"
)

// monitoringFiles are the files of examples/monitoring the chart ships in
// files/monitoring.
var monitoringFiles = []string{"dashboard.json", "prometheusrule.yaml"}

// The chart's dashboard and alerts are those of examples/monitoring, as
// make generate copies them.
func TestMonitoringInStep(t *testing.T) {
	root := repoRoot(t)
	for _, name := range monitoringFiles {
		example, err := os.ReadFile(filepath.Join(root, "examples", "monitoring", name))
		if err != nil {
			t.Fatal(err)
		}
		shipped, err := os.ReadFile(filepath.Join(charttest.ChartDir(root), "files", "monitoring", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(example, shipped) {
			t.Errorf("charts/provfleet/files/monitoring/%s differs from examples/monitoring/%s: run make generate", name, name)
		}
	}
}

// The dashboard's ConfigMap holds the dashboard of examples/monitoring,
// labelled for Grafana's sidecar.
func TestDashboardConfigMap(t *testing.T) {
	objects := render(t, map[string]any{"metrics": map[string]any{"dashboard": map[string]any{"enabled": true}}})
	configMap := one[*corev1.ConfigMap](t, objects)
	if diff := cmp.Diff("provfleet-system/provfleet-dashboard", configMap.Namespace+"/"+configMap.Name); diff != "" {
		t.Errorf("ConfigMap (-want +got):\n%s", diff)
	}
	if got := configMap.Labels["grafana_dashboard"]; got != "1" {
		t.Errorf("want label grafana_dashboard=1, got %q", got)
	}
	var keys []string
	for key := range configMap.Data {
		keys = append(keys, key)
	}
	if diff := cmp.Diff([]string{"provfleet.json"}, keys); diff != "" {
		t.Fatalf("keys of the ConfigMap (-want +got):\n%s", diff)
	}
	example, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(decodeJSON(t, string(example)), decodeJSON(t, configMap.Data["provfleet.json"])); diff != "" {
		t.Errorf("dashboard of the ConfigMap (-example +rendered):\n%s", diff)
	}
}

func decodeJSON(t *testing.T, data string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The PrometheusRule's groups are those of examples/monitoring, with each
// alert's for and severity overridden, alerts turned off and groups of the
// admin's own added as the values say.
func TestPrometheusRuleGroups(t *testing.T) {
	extra := map[string]any{"name": "local", "rules": []any{map[string]any{"record": "provfleet:failures:rate10m", "expr": "sum(rate(controller_persistentvolumeclaim_provision_failed_total[10m]))"}}}
	cases := map[string]struct {
		values map[string]any
		// edit changes a rule of the example as the values should; false
		// drops it. nil: the example's rules as they are.
		edit  func(rule map[string]any) bool
		extra []any
	}{
		"as the example": {},
		"overridden": {
			values: map[string]any{"alerts": map[string]any{
				"ProvfleetRemovedNodeVolumes":      map[string]any{"for": "6h", "severity": "warning"},
				"ProvfleetCapacityBudgetSaturated": map[string]any{"severity": "critical"},
				"ProvfleetAPIBudgetSaturated":      map[string]any{"enabled": false},
				"ProvfleetBackendUnavailable":      map[string]any{"enabled": true, "for": "1m"},
			}},
			edit: func(rule map[string]any) bool {
				labels := rule["labels"].(map[string]any)
				switch rule["alert"] {
				case "ProvfleetRemovedNodeVolumes":
					rule["for"], labels["severity"] = "6h", "warning"
				case "ProvfleetCapacityBudgetSaturated":
					labels["severity"] = "critical"
				case "ProvfleetBackendUnavailable":
					rule["for"] = "1m"
				}
				return rule["alert"] != "ProvfleetAPIBudgetSaturated"
			},
		},
		// A group whose alerts are all off goes: Prometheus refuses an
		// empty one.
		"every alert off": {
			values: map[string]any{"alerts": allOff(t)},
			edit:   func(map[string]any) bool { return false },
		},
		"extra groups": {
			values: map[string]any{"extraGroups": []any{extra}},
			extra:  []any{extra},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			values := map[string]any{"enabled": true}
			maps.Copy(values, tc.values)
			rule := oneOfKind(t, render(t, map[string]any{"metrics": map[string]any{"prometheusRule": values}}), "PrometheusRule")
			if diff := cmp.Diff("provfleet-system/provfleet", rule.GetNamespace()+"/"+rule.GetName()); diff != "" {
				t.Errorf("PrometheusRule (-want +got):\n%s", diff)
			}
			got, _, err := unstructured.NestedSlice(rule.Object, "spec", "groups")
			if err != nil {
				t.Fatal(err)
			}
			want := append(editRules(exampleGroups(t), tc.edit), tc.extra...)
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
		})
	}
}

// An override of an alert the chart does not ship, a typo say, fails the
// install rather than being ignored.
func TestPrometheusRuleUnknownAlert(t *testing.T) {
	values := map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{
		"enabled": true, "alerts": map[string]any{"ProvfleetProvisioningFailure": map[string]any{"for": "1h"}},
	}}}
	_, err := charttest.Render(t.Context(), charttest.ChartDir(repoRoot(t)), values)
	if want := "the chart ships no alert ProvfleetProvisioningFailure"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("want an error with %q, got %v", want, err)
	}
}

// exampleGroups are the rule groups of examples/monitoring/prometheusrule.yaml,
// decoded as the rendered manifest is.
func exampleGroups(t *testing.T) []any {
	t.Helper()
	objects := decodeFiles(t, filepath.Join(repoRoot(t), "examples", "monitoring", "prometheusrule.yaml"))
	groups, _, err := unstructured.NestedSlice(oneOfKind(t, objects, "PrometheusRule").Object, "spec", "groups")
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

// editRules applies edit to each rule of groups, drops the rules it returns
// false for and the groups left empty; a nil edit leaves groups as they are.
func editRules(groups []any, edit func(rule map[string]any) bool) []any {
	if edit == nil {
		return groups
	}
	var edited []any
	for _, g := range groups {
		group := g.(map[string]any)
		var rules []any
		for _, rule := range group["rules"].([]any) {
			if edit(rule.(map[string]any)) {
				rules = append(rules, rule)
			}
		}
		if len(rules) > 0 {
			group["rules"] = rules
			edited = append(edited, group)
		}
	}
	return edited
}

// allOff turns every alert of the example off.
func allOff(t *testing.T) map[string]any {
	t.Helper()
	alerts := map[string]any{}
	editRules(exampleGroups(t), func(rule map[string]any) bool {
		alerts[rule["alert"].(string)] = map[string]any{"enabled": false}
		return false
	})
	return alerts
}

// With every value set, the dashboard's labels and annotations and the
// PrometheusRule's labels, overrides and extra groups reach their fields
// (TestRender checks their namespaces).
func TestFullValuesMonitoring(t *testing.T) {
	objects := render(t, readValues(t, fullValues))
	configMap := one[*corev1.ConfigMap](t, objects)
	rule := oneOfKind(t, objects, "PrometheusRule")
	groups, _, err := unstructured.NestedSlice(rule.Object, "spec", "groups")
	if err != nil {
		t.Fatal(err)
	}
	alerts := map[string][]string{}
	for _, g := range groups {
		group := g.(map[string]any)
		for _, r := range group["rules"].([]any) {
			rule := r.(map[string]any)
			name := group["name"].(string)
			alerts[name] = append(alerts[name], rule["alert"].(string)+" "+rule["for"].(string)+" "+rule["labels"].(map[string]any)["severity"].(string))
		}
	}
	got := map[string]any{
		"dashboard labels":      []string{configMap.Labels["grafana_dashboard"], configMap.Labels["example.com/dashboards"]},
		"dashboard annotations": configMap.Annotations,
		"rule labels":           rule.GetLabels()["release"],
		"alerts":                alerts,
	}
	want := map[string]any{
		// The labels add to the default one.
		"dashboard labels":      []string{"1", "storage"},
		"dashboard annotations": map[string]string{"grafana_folder": "Storage"},
		"rule labels":           "prometheus",
		"alerts": map[string][]string{
			"provfleet": {
				"ProvfleetProvisioningFailures 15m warning", "ProvfleetVolumeDeletionFailures 15m warning",
				"ProvfleetBackendUnavailable 5m critical", "ProvfleetProvisionerNotLed 10m critical",
				"ProvfleetCapacityBudgetSaturated 15m warning", "ProvfleetCapacityBudgetSaturated 15m warning",
				"ProvfleetBackendCallsStuck 10m warning", "ProvfleetRemovedNodeVolumes 6h warning",
			},
			"provfleet-local": {"ProvfleetManagerDown 5m critical"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rendered fields (-want +got):\n%s", diff)
	}
}
