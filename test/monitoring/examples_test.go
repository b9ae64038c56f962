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

package monitoring

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The dashboard and the PrometheusRule of examples/monitoring, and the
// copies the chart ships and renders (make generate writes them,
// charts/charttest checks that they are equal and that the chart renders
// them).
var (
	dashboardFiles = []string{"../../examples/monitoring/dashboard.json", "../../charts/provfleet/files/monitoring/dashboard.json"}
	ruleFiles      = []string{"../../examples/monitoring/prometheusrule.yaml", "../../charts/provfleet/files/monitoring/prometheusrule.yaml"}
)

// queryable returns every series name a query may select: each exported
// family, with the _bucket, _sum and _count series of histograms and the
// _sum and _count of summaries.
func queryable(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for name, m := range exported(t) {
		names[name] = true
		switch m.Type {
		case "histogram":
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case "summary":
			names[name+"_sum"], names[name+"_count"] = true, true
		}
	}
	return names
}

// checkQueried fails for each name in queried that the manager does not
// export.
func checkQueried(t *testing.T, file string, queried []string) {
	t.Helper()
	known := queryable(t)
	for _, name := range queried {
		if !known[name] {
			t.Errorf("%s queries %s, which the manager does not export", file, name)
		}
	}
}

// dashboardQueries returns the PromQL of every panel's targets and every
// templating variable of a Grafana dashboard, and its panels' titles.
func dashboardQueries(t *testing.T, dashboardFile string) (queries, titles []string) {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Title  string `json:"title"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatalf("cannot read %s: %v", dashboardFile, err)
	}
	for _, panel := range dashboard.Panels {
		if panel.Type == "row" {
			continue
		}
		titles = append(titles, panel.Title)
		if len(panel.Targets) == 0 {
			t.Errorf("panel %q queries nothing", panel.Title)
		}
		for _, target := range panel.Targets {
			queries = append(queries, target.Expr)
		}
	}
	for _, variable := range dashboard.Templating.List {
		if variable.Type == "query" {
			queries = append(queries, variableQuery(t, variable.Name, variable.Query))
		}
	}
	return queries, titles
}

// variableQuery returns the PromQL of a query variable: Grafana's
// label_values(<expr>, <label>) holds an expression and a label name.
func variableQuery(t *testing.T, name string, raw json.RawMessage) string {
	t.Helper()
	var query struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(raw, &query); err != nil {
		t.Fatalf("cannot read the query of variable %s: %v", name, err)
	}
	inner, ok := strings.CutPrefix(query.Query, "label_values(")
	if !ok {
		return query.Query
	}
	expr, _, ok := cutLast(strings.TrimSuffix(inner, ")"), ",")
	if !ok {
		t.Fatalf("variable %s: label_values without a label: %s", name, query.Query)
	}
	return expr
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// TestDashboard: the dashboard parses, every panel queries something, it
// shows what an operator watches, and every metric it queries is exported.
func TestDashboard(t *testing.T) {
	for _, file := range dashboardFiles {
		t.Run(strings.TrimPrefix(file, "../../"), func(t *testing.T) { checkDashboard(t, file) })
	}
}

// checkDashboard checks one copy of the dashboard.
func checkDashboard(t *testing.T, dashboardFile string) {
	t.Helper()
	queries, titles := dashboardQueries(t, dashboardFile)
	var queried []string
	for _, q := range queries {
		names := metricNames(q)
		if len(names) == 0 {
			t.Errorf("%s: query %q selects no metric", dashboardFile, q)
		}
		queried = append(queried, names...)
	}
	checkQueried(t, dashboardFile, queried)
	for _, want := range []string{
		"controller_persistentvolumeclaim_provision_total", "controller_persistentvolumeclaim_provision_failed_total",
		"controller_persistentvolumeclaim_provision_duration_seconds_bucket", "provisioner_backend_up",
		"provisioner_backend_available_bytes", "provisioner_capacity_used_bytes", "provisioner_capacity_limit_bytes",
		"provisioner_capacity_used_volumes", "provisioner_capacity_limit_volumes", "provfleet_leases_held",
		"provfleet_provisioner_leading", "provfleet_api_budget_wait_seconds_bucket", "provisioner_removed_node_volumes",
		"provfleet_replica_assigned_provisioners", "provfleet_replica_members",
	} {
		if !slices.Contains(queried, want) {
			t.Errorf("%s shows no panel of %s", dashboardFile, want)
		}
	}
	if len(titles) != len(slices.Compact(slices.Sorted(slices.Values(titles)))) {
		t.Errorf("%s has panels of the same title: %v", dashboardFile, titles)
	}
}

// prometheusRule is the part of a monitoring.coreos.com/v1 PrometheusRule
// the test reads.
type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// TestPrometheusRule: the rule parses as a PrometheusRule, holds the alerts
// an operator needs, each with a severity and a summary, and every metric
// they query is exported.
func TestPrometheusRule(t *testing.T) {
	for _, file := range ruleFiles {
		t.Run(strings.TrimPrefix(file, "../../"), func(t *testing.T) { checkPrometheusRule(t, file) })
	}
}

// checkPrometheusRule checks one copy of the PrometheusRule.
func checkPrometheusRule(t *testing.T, ruleFile string) {
	t.Helper()
	data, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	var rule prometheusRule
	if err := yaml.UnmarshalStrict(data, &rule, yaml.DisallowUnknownFields); err != nil {
		t.Fatalf("cannot read %s: %v", ruleFile, err)
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" {
		t.Errorf("%s is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", ruleFile, rule.APIVersion, rule.Kind)
	}
	var alerts, queried []string
	for _, group := range rule.Spec.Groups {
		for _, r := range group.Rules {
			alerts = append(alerts, r.Alert)
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %q of group %s lacks an alert name, expr, severity or summary", r.Alert, group.Name)
			}
			names := metricNames(r.Expr)
			if len(names) == 0 {
				t.Errorf("alert %s: %q selects no metric", r.Alert, r.Expr)
			}
			queried = append(queried, names...)
		}
	}
	checkQueried(t, ruleFile, queried)
	for _, want := range []string{
		"ProvfleetProvisioningFailures", "ProvfleetBackendUnavailable", "ProvfleetProvisionerNotLed", "ProvfleetCapacityBudgetSaturated",
	} {
		if !slices.Contains(alerts, want) {
			t.Errorf("%s has no alert %s", ruleFile, want)
		}
	}
}
