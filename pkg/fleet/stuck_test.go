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
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/generated/clientset/versioned/fake"
	"github.com/provfleet/provfleet/pkg/provisioning"

	"github.com/provfleet/provfleet/internal/polltest"
)

// A stuck instance is reported in its status and by Manager.Stuck; once it
// is stopped for a restart, its replacement starts only after the old
// instance's Lease expired, and Manager.Stuck reports the old instance until
// its hung work ended.
func TestManagerReportsAStuckInstanceAndDelaysItsReplacement(t *testing.T) {
	const leaseDuration = 4 * time.Second
	f := newFixture(t)
	f.mu.Lock()
	f.restartOn = func(before, after provisioning.Config) bool { return before.Workers != after.Workers }
	f.mu.Unlock()
	pc := managed()
	pc.Spec.LeaderElection = v1alpha1.LeaderElectionSpec{
		LeaseDuration: &metav1.Duration{Duration: leaseDuration},
		RenewDeadline: &metav1.Duration{Duration: time.Second},
		RetryPeriod:   &metav1.Duration{Duration: 100 * time.Millisecond},
	}
	f.create(pc)
	f.eventually("a is Running", func() bool { return f.readyReason("a", 1) == v1alpha1.ReasonRunning })
	if err := f.manager.Stuck(); err != nil {
		t.Errorf("Stuck() before any hung call = %v", err)
	}

	old := f.started("x.io/a")[0]
	old.setStuck(errors.New("1 backend call(s) running past their deadline"))
	f.eventually("a is BackendStuck", func() bool { return f.readyReason("a", 1) == v1alpha1.ReasonBackendStuck })
	if err := f.manager.Stuck(); err == nil || !strings.Contains(err.Error(), "ProvisionerConfig a") {
		t.Errorf("Stuck() = %v, want an error naming ProvisionerConfig a", err)
	}

	f.edit("a", func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Workers = 9 })
	f.eventually("a reports its stuck predecessor", func() bool { return f.readyReason("a", 2) == v1alpha1.ReasonBackendStuck })
	if !isStopped(old) {
		t.Errorf("the stuck instance was not stopped")
	}
	if n := len(f.started("x.io/a")); n != 1 {
		t.Errorf("%d instances started before the old Lease expired, want 1", n)
	}
	f.eventually("the replacement runs", func() bool { return f.readyReason("a", 2) == v1alpha1.ReasonRunning })
	if n := len(f.started("x.io/a")); n != 2 {
		t.Errorf("%d instances started, want 2", n)
	}
	if err := f.manager.Stuck(); err == nil || !strings.Contains(err.Error(), "stopped instance of ProvisionerConfig a") {
		t.Errorf("Stuck() while the stopped instance's call hangs = %v, want an error naming it", err)
	}
	old.setStuck(nil)
	if err := f.manager.Stuck(); err != nil {
		t.Errorf("Stuck() once the hung call returned = %v", err)
	}
}

// hangingBackend's Provision hangs, ignoring its context, until released.
type hangingBackend struct {
	fakeBackend
	entered  chan struct{}
	released chan struct{}
}

func (b *hangingBackend) Provision(context.Context, provisioning.ProvisionOptions) (*corev1.PersistentVolume, provisioning.ProvisioningState, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.released
	return nil, provisioning.ProvisioningFinished, errors.New("released")
}

// stuckSeries returns the value of provisioner_backend_calls_stuck for
// provisioner, or -1 without a series.
func stuckSeries(t *testing.T, reg *prometheus.Registry, provisioner string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range families {
		if family.GetName() != "provisioner_backend_calls_stuck" {
			continue
		}
		for _, m := range family.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "provisioner" && l.GetValue() == provisioner {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// A real provision controller whose backend call hangs is reported by the
// status, Manager.Stuck (/readyz) and the metric of the manager's registry,
// and does not keep the manager from stopping: only the hung call outlives it.
func TestManagerReportsAHungBackendCallAndStops(t *testing.T) {
	const provisioner = "x.io/hang"
	before := goleak.IgnoreCurrent()
	_, ctx := ktesting.NewTestContext(t)
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hang"}, Provisioner: provisioner}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default", UID: "uid-c",
			Annotations: map[string]string{"volume.kubernetes.io/storage-provisioner": provisioner}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class.Name},
	}
	kube := kubefake.NewClientset(class, claim)
	servesAdmissionPolicies(kube)
	pcfg := fake.NewSimpleClientset()
	backend := &hangingBackend{entered: make(chan struct{}, 1), released: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(backend.released) }) }
	t.Cleanup(release)
	reg := prometheus.NewRegistry()
	m, err := newManager(Settings{Roles: Roles{Manager: true}, Identity: "replica-1", HostPathRoot: t.TempDir(), NodeName: "node-1", Registerer: reg},
		dependencies{
			client:  kube,
			pcfg:    pcfg,
			tenants: oneClient{kube},
			stop:    func() {},
		},
		WithBackend("hang", func(context.Context, BackendRequest) (provisioning.Provisioner, error) { return backend, nil }))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()

	pc := &v1alpha1.ProvisionerConfig{ObjectMeta: metav1.ObjectMeta{Name: "hang", Generation: 1}}
	pc.Spec.ProvisionerName = provisioner
	pc.Spec.Backend.Custom = &v1alpha1.CustomBackend{Driver: "hang"}
	pc.Spec.Timeouts = v1alpha1.TimeoutsSpec{Provision: &metav1.Duration{Duration: time.Second}, Drain: &metav1.Duration{Duration: time.Second}}
	if _, err := pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-backend.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("Provision was never called")
	}
	polltest.Until(ctx, t, "the status reporting BackendStuck", 10*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		got, err := pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(ctx, "hang", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Reason == v1alpha1.ReasonBackendStuck, nil
	})
	if err := m.Stuck(); err == nil {
		t.Error("Stuck() = nil while a backend call hangs")
	}
	if got := stuckSeries(t, reg, provisioner); got != 1 {
		t.Errorf("provisioner_backend_calls_stuck = %v, want 1", got)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not stop while a backend call hangs")
	}
	if err := goleak.Find(before, goleak.IgnoreAnyFunction("github.com/provfleet/provfleet/pkg/fleet.(*hangingBackend).Provision")); err != nil {
		t.Errorf("goroutines left besides the hung call: %v", err)
	}
	release()
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left once the hung call returned: %v", err)
	}
	if got := stuckSeries(t, reg, provisioner); got != -1 {
		t.Errorf("provisioner_backend_calls_stuck = %v once the call returned, want no series", got)
	}
}

// oneClient gives every provisioner client and a real provision controller.
type oneClient struct{ client provisioning.Client }

func (o oneClient) clientFor(string) (provisioning.Client, error) { return o.client, nil }

func (oneClient) newController(cfg provisioning.Config, deps provisioning.Dependencies) (controller, error) {
	return provisioning.New(cfg, deps)
}
