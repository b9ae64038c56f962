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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/provfleet/provfleet/internal/leaderelection/leasetest"
	"github.com/provfleet/provfleet/internal/polltest"
)

// deadlineBackend records, per operation, the deadline of its calls (zero
// for none).
type deadlineBackend struct {
	*fakeBackend

	mu        sync.Mutex
	deadlines map[string]time.Time
}

func newDeadlineBackend() *deadlineBackend {
	b := &deadlineBackend{fakeBackend: newFakeBackend(), deadlines: map[string]time.Time{}}
	b.provision = func(ctx context.Context, _ int, _ ProvisionOptions) (ProvisioningState, error) {
		b.record(ctx, "provision")
		return ProvisioningFinished, nil
	}
	return b
}

func (b *deadlineBackend) record(ctx context.Context, operation string) {
	deadline, _ := ctx.Deadline()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deadlines[operation] = deadline
}

func (b *deadlineBackend) Delete(ctx context.Context, volume *corev1.PersistentVolume) error {
	b.record(ctx, "delete")
	return b.fakeBackend.Delete(ctx, volume)
}

func (b *deadlineBackend) seen() map[string]bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return map[string]bool{"provision": !b.deadlines["provision"].IsZero(), "delete": !b.deadlines["delete"].IsZero()}
}

func TestBackendCallsHaveADeadline(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)
	backend := newDeadlineBackend()
	startController(t, f.newController(testConfig(testProvisioner), backend, &testRecorder{}))

	f.createClaim(newClaim("c", "fast", testProvisioner))
	polltest.Eventually(t, "the volume", func() bool { return f.volumeExists("pvc-uid-c") })
	pv, err := f.client.CoreV1().PersistentVolumes().Get(context.Background(), "pvc-uid-c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeReleased
	pv.ResourceVersion = "2"
	if _, err := f.client.CoreV1().PersistentVolumes().UpdateStatus(context.Background(), pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "the volume deleted", func() bool { return !f.volumeExists("pvc-uid-c") })

	if diff := cmp.Diff(map[string]bool{"provision": true, "delete": true}, backend.seen()); diff != "" {
		t.Errorf("backend calls with a deadline (-want +got):\n%s", diff)
	}
}

// hungCall blocks the backend calls that enter it, ignoring their context as
// a call on a hard NFS mount does, until it is released.
type hungCall struct {
	entered, released chan struct{}
	enterOnce         sync.Once
	releaseOnce       sync.Once
}

func newHungCall() *hungCall {
	return &hungCall{entered: make(chan struct{}), released: make(chan struct{})}
}

func (h *hungCall) block() {
	h.enterOnce.Do(func() { close(h.entered) })
	<-h.released
}

func (h *hungCall) release() { h.releaseOnce.Do(func() { close(h.released) }) }

func (h *hungCall) hasEntered() bool {
	select {
	case <-h.entered:
		return true
	default:
		return false
	}
}

// hungCallFunction is where goleak finds the goroutine of a hung call.
const hungCallFunction = "github.com/provfleet/provfleet/pkg/provisioning.(*hungCall).block"

// A stopping leader whose backend call hangs gives up on it after a bound:
// Run returns, the Lease is left to expire rather than released, and nothing
// but the hung call outlives Run.
func TestStopGivesUpOnAHungBackendCall(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)
	before := goleak.IgnoreCurrent()
	hung := newHungCall()
	// Registered after the fixture's cleanups, so it runs before them.
	t.Cleanup(hung.release)
	backend := newFakeBackend()
	backend.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
		hung.block()
		return ProvisioningFinished, nil
	}
	c := f.newController(leaderConfig("a"), backend, &testRecorder{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	polltest.Eventually(t, "a leading", c.IsLeader)
	f.createClaim(newClaim("c", "fast", testProvisioner))
	polltest.Eventually(t, "the backend call to hang", hung.hasEntered)

	cancel()
	var runErr error
	polltest.Eventually(t, "Run to return", func() bool {
		select {
		case runErr = <-done:
			return true
		default:
			return false
		}
	})
	if runErr != nil {
		t.Errorf("Run: %v", runErr)
	}
	if diff := cmp.Diff(leasetest.RecordSummary{Holder: "a", LeaseDurationSeconds: 2, Transitions: 0}, leasetest.Summary(getLease(t, f.client))); diff != "" {
		t.Errorf("Lease after the stop (-want +got):\n%s", diff)
	}
	// No elector goroutine renews any more, and no worker but the hung one
	// is left.
	if err := goleak.Find(before, goleak.IgnoreAnyFunction(hungCallFunction)); err != nil {
		t.Errorf("goroutines left besides the hung call: %v", err)
	}
	hung.release()
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left once the hung call returned: %v", err)
	}
}

// A call that honours its deadline fails with it and is retried; nothing is
// reported stuck.
func TestBackendCallDeadlineFires(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)
	backend := newFakeBackend()
	backend.provision = func(ctx context.Context, call int, _ ProvisionOptions) (ProvisioningState, error) {
		if call == 1 {
			<-ctx.Done()
			return ProvisioningFinished, ctx.Err()
		}
		return ProvisioningFinished, nil
	}
	cfg := testConfig(testProvisioner)
	cfg.Timeouts.Provision = 50 * time.Millisecond
	recorder := &testRecorder{}
	c := f.newController(cfg, backend, recorder)
	startController(t, c)

	f.createClaim(newClaim("c", "fast", testProvisioner))
	polltest.Eventually(t, "the volume", func() bool { return f.volumeExists("pvc-uid-c") })
	polltest.Eventually(t, "three events", func() bool { return len(recorder.events()) >= 3 })
	if diff := cmp.Diff([]string{EventProvisioning, EventProvisioningFailed, EventProvisioningSucceeded}, recorder.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if err := c.Stuck(); err != nil {
		t.Errorf("Stuck() = %v", err)
	}
}

// stuckCalls returns the provisioner_backend_calls_stuck series, by
// provisioner and operation.
func stuckCalls(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]float64{}
	for _, family := range families {
		if family.GetName() != "provisioner_backend_calls_stuck" {
			continue
		}
		for _, m := range family.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			series[strings.Join(labels, ",")] = m.GetGauge().GetValue()
		}
	}
	return series
}

// A call that ignores its deadline is reported by Stuck, OnStuck and the
// metric until it returns, also after its controller stopped.
func TestHungCallIsReportedUntilItReturns(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)
	hung := newHungCall()
	t.Cleanup(hung.release)
	backend := newFakeBackend()
	backend.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
		hung.block()
		return ProvisioningFinished, nil
	}
	cfg := testConfig(testProvisioner)
	cfg.Timeouts.Provision = 50 * time.Millisecond
	cfg.Timeouts.Drain = 50 * time.Millisecond
	var notified atomic.Int32
	c, err := New(cfg, Dependencies{
		Client:        f.client,
		Informers:     f.informers,
		EventRecorder: &testRecorder{},
		Metrics:       f.metrics,
		Provisioner:   backend,
		OnStuck:       func() { notified.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := startController(t, c)
	f.createClaim(newClaim("c", "fast", testProvisioner))
	polltest.Eventually(t, "the call to hang", hung.hasEntered)
	polltest.Eventually(t, "the call reported stuck", func() bool { return c.Stuck() != nil })
	// OnStuck is called once Stuck reports the call, not before.
	polltest.Eventually(t, "OnStuck called", func() bool { return notified.Load() > 0 })
	want := map[string]float64{"operation=provision,provisioner=" + testProvisioner: 1}
	if diff := cmp.Diff(want, stuckCalls(t, f.registry)); diff != "" {
		t.Errorf("stuck calls (-want +got):\n%s", diff)
	}

	stop()
	if err := c.Stuck(); err == nil || !strings.Contains(err.Error(), "past their deadline") || !strings.Contains(err.Error(), "has not ended yet") {
		t.Errorf("Stuck() after the stop gave up = %v, want the overdue call and the abandoned work", err)
	}
	if diff := cmp.Diff(want, stuckCalls(t, f.registry)); diff != "" {
		t.Errorf("stuck calls after the stop (-want +got):\n%s", diff)
	}

	hung.release()
	polltest.Eventually(t, "the call no longer stuck", func() bool { return c.Stuck() == nil })
	if diff := cmp.Diff(map[string]float64{}, stuckCalls(t, f.registry)); diff != "" {
		t.Errorf("stuck calls once the call returned (-want +got):\n%s", diff)
	}
}

// callDeadlines is a deadlineBackend of every optional interface.
type callDeadlines struct{ *deadlineBackend }

func (b *callDeadlines) ShouldProvision(ctx context.Context, _ *corev1.PersistentVolumeClaim) bool {
	b.record(ctx, "qualify")
	return true
}

func (b *callDeadlines) SupportsBlock(ctx context.Context) bool {
	b.record(ctx, "supportsBlock")
	return true
}

func (b *callDeadlines) SupportsDataSource(ctx context.Context, _ schema.GroupKind) bool {
	b.record(ctx, "supportsDataSource")
	return true
}

func (b *callDeadlines) ShouldDelete(ctx context.Context, _ *corev1.PersistentVolume) bool {
	b.record(ctx, "shouldDelete")
	return true
}

func (b *callDeadlines) Unsaved(ctx context.Context) ([]UnsavedVolume, error) {
	b.record(ctx, "unsaved")
	return nil, nil
}

func (b *callDeadlines) Saved(ctx context.Context, _, _ *corev1.PersistentVolume) error {
	b.record(ctx, "saved")
	return nil
}

// timeouts rounds what each call had left until its deadline to the
// configured timeout it came from: a minute or an hour.
func (b *callDeadlines) timeouts() map[string]time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	got := map[string]time.Duration{}
	for operation, deadline := range b.deadlines {
		got[operation] = time.Until(deadline).Round(time.Minute)
	}
	return got
}

// Every backend call about a claim has the provision deadline, every call
// about a volume the delete deadline.
func TestCallDeadlines(t *testing.T) {
	f := newFixture(t)
	f.fill(newClass("fast", testProvisioner))
	backend := &callDeadlines{newDeadlineBackend()}
	cfg := testConfig(testProvisioner)
	cfg.Timeouts.Provision, cfg.Timeouts.Delete = time.Minute, time.Hour
	c := f.newController(cfg, backend, &testRecorder{})
	ctx := context.Background()

	claim := newClaim("c", "fast", testProvisioner)
	block := corev1.PersistentVolumeBlock
	claim.Spec.VolumeMode = &block
	volume := newVolume("pvc-uid-c", testProvisioner, corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete)
	calls := map[string]func() error{
		"qualify":            func() error { _, err := c.shouldProvision(ctx, claim); return err },
		"supportsBlock":      func() error { return c.checkBlock(ctx, claim) },
		"supportsDataSource": func() error { _, err := c.checkDataSource(ctx, dataSourceOf(withSnapshotSource(claim))); return err },
		"provision": func() error {
			_, _, err := c.provisionVolume(ctx, ProvisionOptions{PVName: volume.Name, PVC: claim})
			return err
		},
		"delete":       func() error { _, err := c.deleteBackendVolume(ctx, volume); return err },
		"shouldDelete": func() error { _, err := c.shouldDelete(ctx, volume); return err },
		"saved":        func() error { _, err := c.savedVolumeOf(ctx, volume, volume); return err },
		"unsaved":      func() error { _, err := c.reclaim(ctx, newTestTerm(t, c)); return err },
	}
	for operation, call := range calls {
		if err := call(); err != nil {
			t.Errorf("%s: %v", operation, err)
		}
	}
	want := map[string]time.Duration{
		"provision": time.Minute, "qualify": time.Minute, "supportsBlock": time.Minute, "supportsDataSource": time.Minute,
		"delete": time.Hour, "shouldDelete": time.Hour, "saved": time.Hour, "unsaved": time.Hour,
	}
	if diff := cmp.Diff(want, backend.timeouts()); diff != "" {
		t.Errorf("deadline by operation (-want +got):\n%s", diff)
	}
}

// withSnapshotSource is claim filled from a VolumeSnapshot.
func withSnapshotSource(claim *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	claim = claim.DeepCopy()
	group := "snapshot.storage.k8s.io"
	claim.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "snap"}
	return claim
}
