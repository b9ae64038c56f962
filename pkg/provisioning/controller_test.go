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
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/provfleet/provfleet/internal/polltest"
	"github.com/provfleet/provfleet/internal/workqueue"
)

func (f *fixture) createClaim(claim *corev1.PersistentVolumeClaim) {
	f.t.Helper()
	if _, err := f.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// createClass creates a class and waits for the informer to see it.
func (f *fixture) createClass(name, provisioner string) {
	f.t.Helper()
	if _, err := f.client.StorageV1().StorageClasses().Create(context.Background(), newClass(name, provisioner), metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	polltest.Eventually(f.t, "class "+name, func() bool {
		_, exists, _ := f.informers.Classes.GetStore().GetByKey(name)
		return exists
	})
}

func TestRunProvisionsAndDeletes(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)
	backend := newFakeBackend()
	c := f.newController(testConfig(testProvisioner), backend, &testRecorder{})
	startController(t, c)

	f.createClaim(newClaim("c", "fast", testProvisioner))
	polltest.Eventually(t, "the volume", func() bool { return f.volumeExists("pvc-uid-c") })
	polltest.Eventually(t, "the intent finalizer removed", func() bool { return !hasFinalizer(f.getClaim("c"), c.finalizer) })

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
	if _, volumes, _ := backend.snapshot(); len(volumes) != 0 {
		t.Errorf("backend volumes left: %v", volumes)
	}
}

func TestFailureThreshold(t *testing.T) {
	tests := map[string]struct {
		threshold int
		wantCalls int // the calls after which the claim is given up; 0: never
	}{
		"gives up after 3 retries": {threshold: 3, wantCalls: 4},
		"gives up after 1 retry":   {threshold: 1, wantCalls: 2},
		"retries forever 0":        {threshold: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.start()
			f.createClass("fast", testProvisioner)
			backend := newFakeBackend()
			backend.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
				return ProvisioningFinished, errBackend
			}
			cfg := testConfig(testProvisioner)
			cfg.Retry.ProvisionFailureThreshold = tc.threshold
			c := f.newController(cfg, backend, &testRecorder{})
			startController(t, c)
			f.createClaim(newClaim("c", "fast", testProvisioner))
			key := claimKey{Namespace: "default", Name: "c", UID: "uid-c"}

			if tc.wantCalls == 0 {
				polltest.Eventually(t, "many retries", func() bool { calls, _, _ := backend.snapshot(); return calls > 10 })
				return
			}
			polltest.Eventually(t, "giving up", func() bool { return c.claimRetries.GaveUp(key) })
			// A resync of the same claim must not revive it.
			claim := f.getClaim("c")
			if c.claimRetries.Admit(key, claim.ResourceVersion) {
				t.Error("a given-up claim was admitted again at the same version")
			}
			if calls, _, _ := backend.snapshot(); calls != tc.wantCalls {
				t.Errorf("backend calls = %d, want %d", calls, tc.wantCalls)
			}
			// A change of the claim starts over.
			claim.Labels = map[string]string{"changed": "yes"}
			claim.ResourceVersion = "100"
			if _, err := f.client.CoreV1().PersistentVolumeClaims("default").Update(context.Background(), claim, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			polltest.Eventually(t, "retries after a change", func() bool { calls, _, _ := backend.snapshot(); return calls >= 2*tc.wantCalls })
		})
	}
}

func TestVolumeSaveRetryDeletesBackendVolume(t *testing.T) {
	f := newFixture(t)
	var creates atomic.Int32
	f.client.PrependReactor("create", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates.Add(1)
		return true, nil, errors.New("apiserver down")
	})
	f.start()
	f.createClass("fast", testProvisioner)
	backend := newFakeBackend()
	recorder := &testRecorder{}
	cfg := testConfig(testProvisioner)
	cfg.VolumeSave = VolumeSaveConfig{Mode: VolumeSaveRetry, Retries: 3, Interval: time.Millisecond}
	// A threshold of 1 allows one retry of the claim: it is due after the
	// test, which looks at the first try alone.
	cfg.Retry.ProvisionFailureThreshold = 1
	cfg.Retry.InitialDelay, cfg.Retry.MaxDelay = time.Hour, time.Hour
	c := f.newController(cfg, backend, recorder)
	startController(t, c)
	f.createClaim(newClaim("c", "fast", testProvisioner))

	polltest.Eventually(t, "the backend volume deleted", func() bool { _, _, deleted := backend.snapshot(); return len(deleted) == 1 })
	if got := creates.Load(); got != 3 {
		t.Errorf("PersistentVolume creates = %d, want 3", got)
	}
	want := []string{EventProvisioning, EventProvisioningFailed}
	if diff := cmp.Diff(want, recorder.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestVolumeSaveRetryForeverNeverDeletes(t *testing.T) {
	f := newFixture(t)
	var creates atomic.Int32
	f.client.PrependReactor("create", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if creates.Add(1) <= 5 {
			return true, nil, errors.New("apiserver down")
		}
		return false, nil, nil
	})
	f.start()
	f.createClass("fast", testProvisioner)
	backend := newFakeBackend()
	cfg := testConfig(testProvisioner)
	cfg.VolumeSave = VolumeSaveConfig{Mode: VolumeSaveRetryForever, Interval: time.Millisecond}
	c := f.newController(cfg, backend, &testRecorder{})
	startController(t, c)
	f.createClaim(newClaim("c", "fast", testProvisioner))

	polltest.Eventually(t, "the volume saved", func() bool { return f.volumeExists("pvc-uid-c") })
	polltest.Eventually(t, "the intent finalizer removed", func() bool { return !hasFinalizer(f.getClaim("c"), c.finalizer) })
	if _, _, deleted := backend.snapshot(); len(deleted) != 0 {
		t.Errorf("backend volumes deleted: %v", deleted)
	}
	if got := backend.provisionCount("pvc-uid-c"); got != 1 {
		t.Errorf("provisioned %d times, want 1", got)
	}
}

// A PersistentVolume whose create failed, its reply lost, is not created
// again once its claim is gone: the create may have been carried out and
// the volume deleted with its claim since, and a second create would
// provision a claim after its end. The API, not the informer, says so.
func TestVolumeSaveStopsWhenTheClaimIsGone(t *testing.T) {
	for name, mode := range map[string]VolumeSaveMode{"Retry": VolumeSaveRetry, "RetryForever": VolumeSaveRetryForever} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			var creates atomic.Int32
			f.client.PrependReactor("create", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
				if creates.Add(1) == 1 {
					// The user deletes the claim while the reply is lost.
					if err := f.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), "default", "c"); err != nil {
						t.Error(err)
					}
				}
				return true, nil, errors.New("the reply to this write was lost")
			})
			f.start()
			f.createClass("fast", testProvisioner)
			backend := newRecordingBackend()
			cfg := testConfig(testProvisioner)
			cfg.VolumeSave = VolumeSaveConfig{Mode: mode, Retries: 5, Interval: time.Millisecond}
			cfg.Retry.InitialDelay, cfg.Retry.MaxDelay = time.Hour, time.Hour
			c := f.newController(cfg, backend, &testRecorder{})
			startController(t, c)
			f.createClaim(newClaim("c", "fast", testProvisioner))

			polltest.Eventually(t, "the unsaved backend volume reclaimed", func() bool { _, _, deleted := backend.snapshot(); return len(deleted) == 1 })
			if got := creates.Load(); got != 1 {
				t.Errorf("PersistentVolume creates = %d, want 1: none after the claim was gone", got)
			}
		})
	}
}

func TestBackgroundClaimDeleted(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)
	backend := newFakeBackend()
	var finish atomic.Bool
	backend.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
		if finish.Load() {
			return ProvisioningFinished, nil
		}
		return ProvisioningInBackground, errors.New("still working")
	}
	cfg := testConfig(testProvisioner)
	// Retries are fast here: never give up while the test deletes the claim.
	cfg.Retry.ProvisionFailureThreshold = 0
	c := f.newController(cfg, backend, &testRecorder{})
	startController(t, c)
	f.createClaim(newClaim("c", "fast", testProvisioner))
	polltest.Eventually(t, "the claim in progress", func() bool { _, ok := c.inProgress.Load(UIDOf("c")); return ok })

	// The fake clientset ignores finalizers: the claim vanishes at once.
	if err := f.client.CoreV1().PersistentVolumeClaims("default").Delete(context.Background(), "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "the claim gone from the informer", func() bool {
		_, exists, _ := f.informers.Claims.GetStore().GetByKey("default/c")
		return !exists
	})
	// Let the backend finish only once no sync of the live claim can be in
	// flight: calls are sequential per claim, so the second call from now on
	// started after the informer lost the claim.
	seen, _, _ := backend.snapshot()
	polltest.Eventually(t, "two more calls", func() bool { calls, _, _ := backend.snapshot(); return calls >= seen+2 })
	finish.Store(true)
	polltest.Eventually(t, "the backend volume deleted", func() bool { _, _, deleted := backend.snapshot(); return len(deleted) == 1 })
	polltest.Eventually(t, "the claim done", func() bool { _, ok := c.inProgress.Load(UIDOf("c")); return !ok })
	if f.volumeExists("pvc-uid-c") {
		t.Error("a PersistentVolume was created for a deleted claim")
	}
	if _, volumes, _ := backend.snapshot(); len(volumes) != 0 {
		t.Errorf("backend volumes leaked: %v", volumes)
	}
}

// UIDOf is the UID newClaim gives a claim.
func UIDOf(name string) any { return newClaim(name, "", "").UID }

func TestRestartBetweenProvisionAndVolumeCreation(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)
	backend := newFakeBackend()
	var dying atomic.Bool
	dying.Store(true)
	backend.provision = func(ctx context.Context, _ int, options ProvisionOptions) (ProvisioningState, error) {
		if !dying.Load() {
			return ProvisioningFinished, nil
		}
		// The backend volume exists, then the process dies before the PV is saved.
		backend.mu.Lock()
		backend.volumes[options.PVName] = true
		backend.mu.Unlock()
		<-ctx.Done()
		return ProvisioningFinished, ctx.Err()
	}
	first := f.newController(testConfig(testProvisioner), backend, &testRecorder{})
	stopFirst := startController(t, first)
	f.createClaim(newClaim("c", "fast", testProvisioner))
	polltest.Eventually(t, "the backend volume", func() bool { _, volumes, _ := backend.snapshot(); return len(volumes) == 1 })
	stopFirst()
	dying.Store(false)

	// The claim is deleted while no controller runs; its intent finalizer holds it.
	claim := f.getClaim("c")
	if !hasFinalizer(claim, first.finalizer) {
		t.Fatal("the intent finalizer is not on the claim")
	}
	claim.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	claim.ResourceVersion = "50"
	if _, err := f.client.CoreV1().PersistentVolumeClaims("default").Update(context.Background(), claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The next controller starts on a cache that knows of the deletion, as
	// one started after it would.
	polltest.Eventually(t, "the informer sees the deletion", func() bool {
		obj, exists, _ := f.informers.Claims.GetStore().GetByKey("default/c")
		return exists && obj.(*corev1.PersistentVolumeClaim).DeletionTimestamp != nil
	})

	second := f.newController(testConfig(testProvisioner), backend, &testRecorder{})
	startController(t, second)
	polltest.Eventually(t, "the intent finalizer removed", func() bool { return !hasFinalizer(f.getClaim("c"), second.finalizer) })
	// Delete is idempotent and may be asked more than once.
	if _, volumes, deleted := backend.snapshot(); len(volumes) != 0 || !slices.Contains(deleted, "pvc-uid-c") {
		t.Errorf("backend volumes = %v, deleted = %v; want none left and pvc-uid-c deleted", volumes, deleted)
	}
	if f.volumeExists("pvc-uid-c") {
		t.Error("a PersistentVolume was created for a deleted claim")
	}
}

func TestPauseAndReconfigure(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)
	backend := newFakeBackend()
	cfg := testConfig(testProvisioner)
	cfg.Paused = true
	c := f.newController(cfg, backend, &testRecorder{})
	startController(t, c)
	f.createClaim(newClaim("a", "fast", "provfleet.io/alias"))
	f.createClaim(newClaim("b", "fast", testProvisioner))
	polltest.Eventually(t, "the claims in the informer", func() bool { return len(f.informers.Claims.GetStore().List()) == 2 })
	polltest.Eventually(t, "leading", c.IsLeader)
	// Paused, nothing is provisioned; the queue still sees the claim.
	time.Sleep(50 * time.Millisecond)
	if calls, _, _ := backend.snapshot(); calls != 0 {
		t.Fatalf("paused controller called the backend %d times", calls)
	}

	cfg.Paused = false
	cfg.Workers = 5
	cfg.Retry.QPS = 50
	if err := c.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "claim b provisioned", func() bool { return f.volumeExists("pvc-uid-b") })
	c.mu.Lock()
	want := c.term.claims.queue.MaxWorkers()
	c.mu.Unlock()
	if want != 5 {
		t.Errorf("claim workers = %d, want 5", want)
	}
	if f.volumeExists("pvc-uid-a") {
		t.Fatal("claim a of an unknown name was provisioned")
	}
	cfg.AdditionalProvisionerNames = []string{"provfleet.io/alias"}
	f.createClass("alias", "provfleet.io/alias")
	claimA := f.getClaim("a")
	claimA.Spec.StorageClassName = ptrTo("alias")
	claimA.ResourceVersion = "7"
	if _, err := f.client.CoreV1().PersistentVolumeClaims("default").Update(context.Background(), claimA, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "claim a provisioned under its additional name", func() bool { return f.volumeExists("pvc-uid-a") })
}

func ptrTo[T any](v T) *T { return &v }

func TestReconfigureRestartRequired(t *testing.T) {
	tests := map[string]struct {
		change  func(*Config)
		restart bool
		invalid bool
	}{
		"thresholds":       {change: func(c *Config) { c.Retry.ProvisionFailureThreshold = 2; c.Retry.DeleteFailureThreshold = 0 }},
		"backoff":          {change: func(c *Config) { c.Retry.MaxDelay = time.Hour; c.Retry.ExponentialBackoff = false }},
		"volume save":      {change: func(c *Config) { c.VolumeSave.Mode = VolumeSaveRetryForever }},
		"finalizer":        {change: func(c *Config) { c.Finalizer = false }},
		"provisioner name": {change: func(c *Config) { c.ProvisionerName = "provfleet.io/other" }, restart: true},
		"resync period":    {change: func(c *Config) { c.ResyncPeriod = time.Minute }, restart: true},
		"leader election": {change: func(c *Config) {
			c.LeaderElection.Enabled = true
			c.LeaderElection.Namespace = "default"
		}, restart: true},
		"invalid": {change: func(c *Config) { c.Workers = 0 }, invalid: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			cfg := testConfig(testProvisioner)
			c := f.newController(cfg, newFakeBackend(), &testRecorder{})
			tc.change(&cfg)
			err := c.Reconfigure(cfg)
			if got := errors.Is(err, ErrRestartRequired); got != tc.restart {
				t.Errorf("Reconfigure error = %v, want restart required %v", err, tc.restart)
			}
			if (err != nil) != (tc.restart || tc.invalid) {
				t.Errorf("Reconfigure error = %v", err)
			}
			if err == nil && !cmp.Equal(c.config(), cfg) {
				t.Errorf("config not applied: %s", cmp.Diff(cfg, c.config()))
			}
		})
	}
}

func TestRunTwice(t *testing.T) {
	f := newFixture(t)
	f.start()
	c := f.newController(testConfig(testProvisioner), newFakeBackend(), &testRecorder{})
	stop := startController(t, c)
	polltest.Eventually(t, "running", func() bool { return c.started.Load() })
	if err := c.Run(context.Background()); err == nil {
		t.Error("a second Run succeeded")
	}
	stop()
}

func TestNewRejectsMissingDependencies(t *testing.T) {
	if _, err := New(testConfig(testProvisioner), Dependencies{}); err == nil {
		t.Error("New without dependencies succeeded")
	}
	if _, err := New(Config{}, Dependencies{}); err == nil {
		t.Error("New with an invalid config succeeded")
	}
}

// failingDeletes is a backend whose Delete always fails, and counts its calls.
type failingDeletes struct {
	*fakeBackend
	calls atomic.Int32
}

func (b *failingDeletes) Delete(context.Context, *corev1.PersistentVolume) error {
	b.calls.Add(1)
	return errBackend
}

// A failure threshold counts retries, as the seed's does: with a threshold of
// N an item is tried N+1 times before it is given up.
func TestFailureThresholdCountsRetries(t *testing.T) {
	tests := map[string]struct {
		deletion  bool
		threshold int
		wantCalls int32
	}{
		"provision, threshold 1": {threshold: 1, wantCalls: 2},
		"provision, threshold 3": {threshold: 3, wantCalls: 4},
		"delete, threshold 1":    {deletion: true, threshold: 1, wantCalls: 2},
		"delete, threshold 3":    {deletion: true, threshold: 3, wantCalls: 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.start()
			f.createClass("fast", testProvisioner)
			backend := &failingDeletes{fakeBackend: newFakeBackend()}
			var provisions atomic.Int32
			backend.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
				provisions.Add(1)
				return ProvisioningFinished, errBackend
			}
			cfg := testConfig(testProvisioner)
			cfg.Retry.ProvisionFailureThreshold = tc.threshold
			cfg.Retry.DeleteFailureThreshold = tc.threshold
			c := f.newController(cfg, backend, &testRecorder{})
			startController(t, c)

			calls, gaveUp := &provisions, func() bool {
				return c.claimRetries.GaveUp(claimKey{Namespace: "default", Name: "c", UID: "uid-c"})
			}
			if tc.deletion {
				calls, gaveUp = &backend.calls, func() bool { return c.volumeRetries.GaveUp("pvc-uid-c") }
				volume := newVolume("pvc-uid-c", testProvisioner, corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete)
				if _, err := f.client.CoreV1().PersistentVolumes().Create(context.Background(), volume, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			} else {
				f.createClaim(newClaim("c", "fast", testProvisioner))
			}
			polltest.Eventually(t, "giving up", gaveUp)
			if got := calls.Load(); got != tc.wantCalls {
				t.Errorf("backend calls = %d, want %d", got, tc.wantCalls)
			}
		})
	}
}

// Raising a failure threshold gives a given-up claim the retries the new
// threshold has left: with 1 raised to 3, it is tried 4 times in all, as with
// a threshold of 3 from the start.
func TestRaisedThresholdGivesTheRemainingRetries(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)
	backend := newFakeBackend()
	backend.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
		return ProvisioningFinished, errBackend
	}
	cfg := testConfig(testProvisioner)
	cfg.Retry.ProvisionFailureThreshold = 1
	c := f.newController(cfg, backend, &testRecorder{})
	startController(t, c)
	f.createClaim(newClaim("c", "fast", testProvisioner))
	gaveUp := func() bool { return c.claimRetries.GaveUp(claimKey{Namespace: "default", Name: "c", UID: "uid-c"}) }
	polltest.Eventually(t, "giving up", gaveUp)

	cfg.Retry.ProvisionFailureThreshold = 3
	if err := c.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "giving up again", gaveUp)
	if calls, _, _ := backend.snapshot(); calls != 4 {
		t.Errorf("backend calls = %d, want 4", calls)
	}
}

// An item given up on stays given up until its object changes, even when a
// retry it was queued for before it was given up comes due afterwards: an
// update seen during its first failing sync queues it again at once, and the
// backoff of that first failure must not then bring a third try.
func TestGivenUpItemIsNotSyncedByAnEarlierRetry(t *testing.T) {
	limits := workqueue.RateLimits{InitialDelay: time.Hour, MaxDelay: time.Hour, QPS: 10, Burst: 100}
	retries := workqueue.NewRetries[string](limits)
	queue := workqueue.NewRateLimitingQueue[string](retries.Limiter(), workqueue.Config{Name: "test", MaxWorkers: 1}, func() {})
	t.Cleanup(queue.ShutDown)
	ctx := context.Background()
	l := loop[string]{queue: queue, retries: retries}
	noWait := func(string, error) (time.Duration, string, bool) { return 0, "", false }
	syncs := 0
	// What a worker does with the item: its sync fails.
	work := func() {
		if l.skips(ctx, "pv") {
			return
		}
		syncs++
		l.settle(ctx, "pv", "1", errors.New("backend down"), 1, noWait)
	}
	work() // fails, and is due again in an hour
	work() // an update queued it meanwhile: fails, and is given up
	if !retries.GaveUp("pv") {
		t.Fatal("not given up after a retry with threshold 1")
	}
	work() // the hour of the first failure has passed
	if syncs != 2 {
		t.Errorf("syncs = %d, want 2: a given-up item was synced again without a change", syncs)
	}
}
