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
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// The kinds of Lease in provfleet_leases_held and of tenant in
// provfleet_api_budget_wait_seconds.
const (
	leaseKindProvisioner  = "provisioner"
	leaseKindNode         = "node"
	tenantKindManager     = "manager"
	tenantKindProvisioner = "provisioner"
	// labelProvisioner labels the series of one provisioner, as in
	// pkg/provisioning.
	labelProvisioner = "provisioner"
)

// fleetMetrics are the series of the fleet as a whole. The Leases held and
// the provisioners led are read from the manager when scraped, so that no
// elector needs a hook; the waits for the fair API budget are observed as
// they end. It collects the gauges; the histogram is registered apart.
type fleetMetrics struct {
	manager    *Manager
	leasesHeld *prometheus.Desc
	leading    *prometheus.Desc
	// assigned and replicas are those of the spread, with a membership.
	assigned   *prometheus.Desc
	replicas   *prometheus.Desc
	budgetWait *prometheus.HistogramVec
}

// newFleetMetrics creates the fleet's series of m and registers them with
// reg.
func newFleetMetrics(reg prometheus.Registerer, m *Manager) (*fleetMetrics, error) {
	f := &fleetMetrics{
		manager: m,
		leasesHeld: prometheus.NewDesc("provfleet_leases_held",
			"Leases this replica holds: its provisioners' Leases (kind provisioner) and, for a node agent, its node's Lease (kind node).",
			[]string{"kind"}, nil),
		leading: prometheus.NewDesc("provfleet_provisioner_leading",
			"1 for a provisioner this replica leads, 0 for one it knows of and does not lead; the manager's role only.",
			[]string{labelProvisioner}, nil),
		assigned: prometheus.NewDesc("provfleet_replica_assigned_provisioners",
			"ProvisionerConfigs the spread over the manager replicas gives this replica to run; with leader election in the manager's role only.",
			nil, nil),
		replicas: prometheus.NewDesc("provfleet_replica_members",
			"Manager replicas this replica counts live, itself included, from their membership Leases; with leader election in the manager's role only.",
			nil, nil),
		// By kind of tenant, not by provisioner: a histogram per provisioner
		// would add a dozen series for each of hundreds of provisioners.
		budgetWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "provfleet_api_budget_wait_seconds",
			Help:    "How long API requests waited for the fleet's fair API budget, by kind of tenant (manager or provisioner).",
			Buckets: []float64{0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"tenant_kind"}),
	}
	// The histogram on its own, so that its type shows before it is used.
	for _, c := range []prometheus.Collector{f, f.budgetWait} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register the fleet's metrics: %w", err)
		}
	}
	return f, nil
}

// observeBudgetWait records how long a request of tenant waited for the
// fair budget; it fits fairlimit.Limiter.ObserveWaits.
func (f *fleetMetrics) observeBudgetWait(tenant string, waited time.Duration) {
	kind := tenantKindProvisioner
	if tenant == managerTenant {
		kind = tenantKindManager
	}
	f.budgetWait.WithLabelValues(kind).Observe(waited.Seconds())
}

// Describe and Collect make the gauges read at scrape time.
func (f *fleetMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- f.leasesHeld
	ch <- f.leading
	ch <- f.assigned
	ch <- f.replicas
}

func (f *fleetMetrics) Collect(ch chan<- prometheus.Metric) {
	held, leading := f.manager.leadership()
	f.gauge(ch, f.leasesHeld, held, leaseKindProvisioner)
	if a := f.manager.agent; a != nil {
		node := 0
		if a.HoldsLease() {
			node = 1
		}
		f.gauge(ch, f.leasesHeld, node, leaseKindNode)
	}
	if ms := f.manager.membership; ms != nil {
		replicas, assigned := ms.counts()
		f.gauge(ch, f.assigned, assigned)
		f.gauge(ch, f.replicas, replicas)
	}
	for name, leads := range leading {
		value := 0
		if leads {
			value = 1
		}
		f.gauge(ch, f.leading, value, name)
	}
}

// gauge sends one gauge value of desc.
func (f *fleetMetrics) gauge(ch chan<- prometheus.Metric, desc *prometheus.Desc, value int, labels ...string) {
	metric, err := prometheus.NewConstMetric(desc, prometheus.GaugeValue, float64(value), labels...)
	if err != nil {
		metric = prometheus.NewInvalidMetric(desc, err)
	}
	ch <- metric
}

// leadership counts the provisioners' Leases this replica holds and tells,
// in the manager's role, whether it leads each provisioner it knows of: one
// it runs an instance of, or one a ProvisionerConfig names. The instances of
// a node agent hold no Lease of their own.
func (m *Manager) leadership() (held int, leading map[string]bool) {
	leading = map[string]bool{}
	m.instances.Each(func(key string, inst *instance) {
		if key != configOf(key) {
			return
		}
		cfg := inst.applied()
		leads := inst.controller.IsLeader()
		leading[cfg.ProvisionerName] = leading[cfg.ProvisionerName] || leads
		if leads && cfg.LeaderElection.Enabled {
			held++
		}
	})
	if !m.settings.Roles.Manager {
		return held, nil
	}
	all, err := m.all()
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("cannot list ProvisionerConfigs for provfleet_provisioner_leading: %w", err))
	}
	for _, pc := range all {
		name := string(pc.Spec.ProvisionerName)
		if _, ok := leading[name]; !ok {
			leading[name] = false
		}
	}
	return held, leading
}
