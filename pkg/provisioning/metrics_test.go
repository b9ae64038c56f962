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

package provisioning

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/provfleet/provfleet/internal/polltest"
	"github.com/provfleet/provfleet/internal/workqueue"
)

// deletesFailFor is a backend whose Delete fails for one volume.
type deletesFailFor struct {
	*fakeBackend
	name string
}

func (b deletesFailFor) Delete(ctx context.Context, volume *corev1.PersistentVolume) error {
	if volume.Name == b.name {
		return errBackend
	}
	return b.fakeBackend.Delete(ctx, volume)
}

// The provision and delete series have the names, labels and buckets of
// sig-storage-lib-external-provisioner's controller/metrics package, which
// dashboards and alerts match, plus the provisioner label.
func TestMetricNamesMatchUpstream(t *testing.T) {
	good, bad := newClaim("good", "fast", testProvisioner), newClaim("bad", "fast", testProvisioner)
	released := func(name string) *corev1.PersistentVolume {
		return newVolume(name, testProvisioner, corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete)
	}
	objects := []runtime.Object{good, bad, newClass("fast", testProvisioner), released("pv-good"), released("pv-bad")}
	f := newFixture(t, objects...)
	f.fill(objects...)
	backend := newFakeBackend()
	backend.provision = func(_ context.Context, _ int, options ProvisionOptions) (ProvisioningState, error) {
		if options.PVC.Name == bad.Name {
			return ProvisioningFinished, errBackend
		}
		return ProvisioningFinished, nil
	}
	c := f.newController(testConfig(testProvisioner), deletesFailFor{backend, "pv-bad"}, &testRecorder{})
	tm := newTestTerm(t, c)
	for _, claim := range []*corev1.PersistentVolumeClaim{good, bad} {
		_, _ = c.syncClaim(context.Background(), tm, keyOfClaim(claim))
	}
	for _, name := range []string{"pv-good", "pv-bad"} {
		_, _ = c.syncVolume(context.Background(), name)
	}

	type family struct {
		Labels  []string
		Buckets []float64
	}
	families, err := f.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]family{}
	for _, mf := range families {
		if !strings.Contains(mf.GetName(), "persistentvolume") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var fam family
			for _, l := range m.GetLabel() {
				fam.Labels = append(fam.Labels, l.GetName())
			}
			slices.Sort(fam.Labels)
			for _, b := range m.GetHistogram().GetBucket() {
				fam.Buckets = append(fam.Buckets, b.GetUpperBound())
			}
			got[mf.GetName()] = fam
		}
	}
	byClassAndSource := []string{"class", "provisioner", "source"}
	byClass := []string{"class", "provisioner"}
	want := map[string]family{
		"controller_persistentvolumeclaim_provision_total":            {Labels: byClassAndSource},
		"controller_persistentvolumeclaim_provision_failed_total":     {Labels: byClassAndSource},
		"controller_persistentvolumeclaim_provision_duration_seconds": {Labels: byClassAndSource, Buckets: prometheus.DefBuckets},
		"controller_persistentvolume_delete_total":                    {Labels: byClass},
		"controller_persistentvolume_delete_failed_total":             {Labels: byClass},
		"controller_persistentvolume_delete_duration_seconds":         {Labels: byClass, Buckets: prometheus.DefBuckets},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("provision and delete metrics (-want +got):\n%s", diff)
	}
}

// A work queue's series, by the names and labels client-go's queues use,
// exist from its first use until it is shut down.
func TestQueueMetricsFromFirstUseToShutDown(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan string, 1), make(chan struct{})
	var q *workqueue.Queue[string]
	limiter := workqueue.NewRetryLimiter[string](rateLimits(testConfig(testProvisioner).Retry))
	q = workqueue.NewRateLimitingQueue(limiter,
		workqueue.Config{Name: queueName("claims", "p"), MaxWorkers: 1, MetricsProvider: queueMetricsProvider{m}},
		func() {
			runWorker(context.Background(), q, workFunc[string](func(_ context.Context, item string) {
				if item == "held" {
					held <- item
					<-release
				}
			}))
		})
	t.Cleanup(q.ShutDown)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("%d series before any work (err %v), want 0", n, err)
	}
	q.Add("a")
	polltest.Eventually(t, "queue drained", func() bool { return q.Len() == 0 && q.Workers() == 0 })
	// depth, adds, retries, latency, work duration and the two in-flight gauges.
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 7 {
		t.Errorf("%d series after one item (err %v), want 7", n, err)
	}
	q.AddAfter("b", time.Hour)
	if got := testutil.CollectAndCount(reg, "workqueue_retries_total"); got != 1 {
		t.Errorf("%d retry series, want 1", got)
	}

	q.Add("held")
	<-held
	if unfinished := gaugeValue(t, reg, "workqueue_unfinished_work_seconds"); unfinished <= 0 {
		t.Errorf("unfinished work = %v while an item is held, want > 0", unfinished)
	}
	close(release)
	q.ShutDown()
	q.Add("after")
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("%d series left after shut down (err %v), want 0", n, err)
	}
}

// gaugeValue returns the value of the one series of a gauge family in reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no single series of %s", name)
	return 0
}

// budgetedBackend is a probedBackend with a capacity budget.
type budgetedBackend struct {
	*probedBackend
	budget Budget
}

func (b budgetedBackend) Budget() (Budget, error) { return b.budget, nil }

// TestBudgetMetrics: a leader exports the used and limit pair of each limit
// its backend's budget sets, read at its probes, and drops them when it
// stops.
func TestBudgetMetrics(t *testing.T) {
	tests := map[string]struct {
		budget Budget
		want   string
	}{
		"both limits": {
			budget: Budget{UsedBytes: 3 << 30, LimitBytes: 10 << 30, UsedVolumes: 3, LimitVolumes: 5},
			want: `
# HELP provisioner_capacity_limit_bytes Storage limit in bytes of a provisioner's capacity budget.
# TYPE provisioner_capacity_limit_bytes gauge
provisioner_capacity_limit_bytes{provisioner="provfleet.io/test"} 1.073741824e+10
# HELP provisioner_capacity_limit_volumes Volume limit of a provisioner's capacity budget.
# TYPE provisioner_capacity_limit_volumes gauge
provisioner_capacity_limit_volumes{provisioner="provfleet.io/test"} 5
# HELP provisioner_capacity_used_bytes Bytes the volumes of a provisioner request against its capacity budget's storage limit.
# TYPE provisioner_capacity_used_bytes gauge
provisioner_capacity_used_bytes{provisioner="provfleet.io/test"} 3.221225472e+09
# HELP provisioner_capacity_used_volumes Volumes of a provisioner counted against its capacity budget's volume limit.
# TYPE provisioner_capacity_used_volumes gauge
provisioner_capacity_used_volumes{provisioner="provfleet.io/test"} 3
`,
		},
		"a volume limit only": {
			budget: Budget{UsedBytes: 3 << 30, UsedVolumes: 2, LimitVolumes: 5},
			want: `
# HELP provisioner_capacity_limit_volumes Volume limit of a provisioner's capacity budget.
# TYPE provisioner_capacity_limit_volumes gauge
provisioner_capacity_limit_volumes{provisioner="provfleet.io/test"} 5
# HELP provisioner_capacity_used_volumes Volumes of a provisioner counted against its capacity budget's volume limit.
# TYPE provisioner_capacity_used_volumes gauge
provisioner_capacity_used_volumes{provisioner="provfleet.io/test"} 2
`,
		},
		"no budget": {budget: Budget{UsedBytes: 3 << 30, UsedVolumes: 2}},
	}
	names := []string{"provisioner_capacity_used_bytes", "provisioner_capacity_limit_bytes",
		"provisioner_capacity_used_volumes", "provisioner_capacity_limit_volumes"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.start()
			cfg := testConfig(testProvisioner)
			cfg.ProbeInterval = time.Hour
			c := f.newController(cfg, budgetedBackend{newProbedBackend(nil), tc.budget}, &testRecorder{})
			stop := startController(t, c)
			polltest.Eventually(t, "the first probe", func() bool { return c.Health().Space != nil })
			if err := testutil.GatherAndCompare(f.registry, strings.NewReader(tc.want), names...); err != nil {
				t.Error(err)
			}
			stop()
			if n, err := testutil.GatherAndCount(f.registry, names...); err != nil || n != 0 {
				t.Errorf("%d capacity series left after the stop (%v), want none", n, err)
			}
		})
	}
}
