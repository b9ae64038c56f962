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

package fleet

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

var leadershipMetrics = []string{"provfleet_leases_held", "provfleet_provisioner_leading"}

// TestLeadershipMetrics: a replica counts the provisioners' Leases it holds
// and its node's, and tells for each provisioner it knows of whether it
// leads it, refused ones included.
func TestLeadershipMetrics(t *testing.T) {
	tests := map[string]struct {
		leader bool
		want   string
	}{
		"leader": {leader: true, want: `
# HELP provfleet_leases_held Leases this replica holds: its provisioners' Leases (kind provisioner) and, for a node agent, its node's Lease (kind node).
# TYPE provfleet_leases_held gauge
provfleet_leases_held{kind="node"} 1
provfleet_leases_held{kind="provisioner"} 1
# HELP provfleet_provisioner_leading 1 for a provisioner this replica leads, 0 for one it knows of and does not lead; the manager's role only.
# TYPE provfleet_provisioner_leading gauge
provfleet_provisioner_leading{provisioner="x.io/a"} 1
provfleet_provisioner_leading{provisioner="x.io/refused"} 0
`},
		"standby": {leader: false, want: `
# HELP provfleet_leases_held Leases this replica holds: its provisioners' Leases (kind provisioner) and, for a node agent, its node's Lease (kind node).
# TYPE provfleet_leases_held gauge
provfleet_leases_held{kind="node"} 1
provfleet_leases_held{kind="provisioner"} 0
# HELP provfleet_provisioner_leading 1 for a provisioner this replica leads, 0 for one it knows of and does not lead; the manager's role only.
# TYPE provfleet_provisioner_leading gauge
provfleet_provisioner_leading{provisioner="x.io/a"} 0
provfleet_provisioner_leading{provisioner="x.io/refused"} 0
`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.mu.Lock()
			f.leader = tc.leader
			f.mu.Unlock()
			f.create(managed())
			refused := hostPathConfig("refused", "x.io/refused", 2)
			refused.Spec.Backend = v1alpha1.BackendSpec{Custom: &v1alpha1.CustomBackend{Driver: "no-such-driver"}}
			f.create(refused)
			f.eventually("both reconciled", func() bool {
				return f.readyReason("a", 1) != "" && f.readyReason("refused", 1) == v1alpha1.ReasonBackendUnavailable
			})
			var err error
			f.eventually("the series as wanted", func() bool {
				err = testutil.CollectAndCompare(f.manager.fleetMetrics, strings.NewReader(tc.want), leadershipMetrics...)
				return err == nil
			})
		})
	}
}

// TestBudgetWaitObserved: the requests of the manager and of a provisioner,
// made through the clients New builds, are observed by kind of tenant.
func TestBudgetWaitObserved(t *testing.T) {
	reg := prometheus.NewRegistry()
	// Nothing listens on port 1 of the loopback: each request fails at once,
	// after its wait for the budget.
	m, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, Settings{Roles: Roles{Manager: true}, QPS: 10, Burst: 10, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer m.deps.stop()
	ctx := context.Background()
	_, _ = m.deps.client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	client, err := m.deps.tenants.clientFor("x.io/a")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = client.CoreV1().PersistentVolumes().Get(ctx, "pv", metav1.GetOptions{})

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, family := range families {
		if family.GetName() != "provfleet_api_budget_wait_seconds" {
			continue
		}
		for _, metric := range family.GetMetric() {
			got[labelValue(metric, "tenant_kind")] = metric.GetHistogram().GetSampleCount() > 0
		}
	}
	if diff := cmp.Diff(map[string]bool{"manager": true, "provisioner": true}, got); diff != "" {
		t.Errorf("tenant kinds with observed waits (-want +got):\n%s", diff)
	}
}

func labelValue(metric *dto.Metric, name string) string {
	for _, pair := range metric.GetLabel() {
		if pair.GetName() == name {
			return pair.GetValue()
		}
	}
	return ""
}
