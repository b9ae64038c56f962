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
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/internal/polltest"
)

// refusing makes b refuse every Provision with refusal while full reports
// true.
func refusing(b *fakeBackend, refusal error, full func() bool) {
	b.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
		if full() {
			return ProvisioningFinished, refusal
		}
		return ProvisioningFinished, nil
	}
}

// TestNoRoomIsNotGivenUp: a claim refused for want of room is retried past
// its failure threshold, as is one refused by a backend that says it is
// unavailable, each refusal a ProvisioningFailed Event with the
// backend's message, and is provisioned once room frees up; any other
// error counts towards the threshold, whatever it says.
func TestNoRoomIsNotGivenUp(t *testing.T) {
	const message = "capacity exhausted: 1 of 1 volumes in use"
	tests := map[string]struct {
		refusal    error
		wantGiveUp bool
	}{
		"no room":                 {refusal: fmt.Errorf("%w: %s", ErrNoRoom, message)},
		"no room, wrapped again":  {refusal: fmt.Errorf("cannot create the volume: %w", fmt.Errorf("%w: %s", ErrNoRoom, message))},
		"backend unavailable":     {refusal: fmt.Errorf("cannot record the volume: %w: %s", ErrBackendUnavailable, message)},
		"another error":           {refusal: errors.New(message), wantGiveUp: true},
		"another error, wrapping": {refusal: fmt.Errorf("%s: %w", message, errBackend), wantGiveUp: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.start()
			f.createClass("fast", testProvisioner)
			backend := newFakeBackend()
			var full atomic.Bool
			full.Store(true)
			refusing(backend, tc.refusal, full.Load)
			cfg := testConfig(testProvisioner)
			cfg.Retry.ProvisionFailureThreshold = 1
			recorder := &testRecorder{}
			c := f.newController(cfg, backend, recorder)
			startController(t, c)
			f.createClaim(newClaim("c", "fast", testProvisioner))
			key := claimKey{Namespace: "default", Name: "c", UID: "uid-c"}

			if tc.wantGiveUp {
				polltest.Eventually(t, "giving up", func() bool { return c.claimRetries.GaveUp(key) })
				if calls, _, _ := backend.snapshot(); calls != 2 {
					t.Errorf("backend calls = %d, want 2: the threshold of 1 retry", calls)
				}
				return
			}
			// Well past the threshold of one retry.
			polltest.Eventually(t, "retries past the threshold", func() bool { return countEvents(recorder, EventProvisioningFailed) > 4 })
			if c.claimRetries.GaveUp(key) {
				t.Error("a claim refused for want of room was given up")
			}
			for _, got := range recorder.messagesOf(EventProvisioningFailed) {
				if !strings.Contains(got, message) {
					t.Errorf("ProvisioningFailed message %q does not carry the backend's %q", got, message)
				}
			}
			full.Store(false)
			polltest.Eventually(t, "the claim provisioned", func() bool { return f.volumeExists("pvc-uid-c") })
		})
	}
}

// TestBackgroundWorkIsNotGivenUp: a backend that answers a claim with
// ProvisioningInBackground while it works, as a long copy does, is asked
// again past the failure threshold, each time with a Normal Event and no
// Warning, until its volume is made.
func TestBackgroundWorkIsNotGivenUp(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)
	backend := newFakeBackend()
	var working atomic.Bool
	working.Store(true)
	backend.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
		if working.Load() {
			return ProvisioningInBackground, errors.New("copying the source volume")
		}
		return ProvisioningFinished, nil
	}
	cfg := testConfig(testProvisioner)
	cfg.Retry.ProvisionFailureThreshold = 1
	recorder := &testRecorder{}
	c := f.newController(cfg, backend, recorder)
	startController(t, c)
	f.createClaim(newClaim("c", "fast", testProvisioner))
	key := claimKey{Namespace: "default", Name: "c", UID: "uid-c"}

	// Well past the threshold of one retry.
	polltest.Eventually(t, "calls past the threshold", func() bool { calls, _, _ := backend.snapshot(); return calls > 4 })
	if c.claimRetries.GaveUp(key) {
		t.Error("a claim whose volume is made in the background was given up")
	}
	if n := countEvents(recorder, EventProvisioningFailed); n != 0 {
		t.Errorf("%d ProvisioningFailed Events for work under way, want none", n)
	}
	working.Store(false)
	polltest.Eventually(t, "the claim provisioned", func() bool { return f.volumeExists("pvc-uid-c") })
}

// TestRoomFreedRetriesAtOnce: a claim refused for want of room is tried
// again as soon as room may have freed up, long before its backoff of an
// hour is over: when the controller deleted a backend volume, when a
// PersistentVolume of its provisioner is gone (a backend may count either),
// and when either happened while the backend was refusing the claim.
func TestRoomFreedRetriesAtOnce(t *testing.T) {
	refusal := fmt.Errorf("%w: 1 of 1 volumes in use", ErrNoRoom)
	tests := map[string]struct {
		// setup makes the backend refuse until room frees up, and returns
		// what frees it.
		setup func(f *fixture, b *fakeBackend, c func() *Controller) (free func())
	}{
		"the backend volume of an abandoned claim deleted": {
			setup: func(f *fixture, b *fakeBackend, _ func() *Controller) func() {
				b.volumes["pvc-uid-old"] = true
				refusing(b, refusal, func() bool {
					b.mu.Lock()
					defer b.mu.Unlock()
					return b.volumes["pvc-uid-old"]
				})
				return func() {
					// No PersistentVolume: only the backend volume goes.
					old := newClaim("old", "fast", testProvisioner)
					old.Finalizers = []string{IntentFinalizer(testProvisioner)}
					old.DeletionTimestamp = &metav1.Time{Time: time.Now()}
					f.createClaim(old)
				}
			},
		},
		"a released volume deleted": {
			setup: func(f *fixture, b *fakeBackend, _ func() *Controller) func() {
				b.volumes["pv-old"] = true
				refusing(b, refusal, func() bool {
					b.mu.Lock()
					defer b.mu.Unlock()
					return b.volumes["pv-old"]
				})
				return func() {
					pv := newVolume("pv-old", testProvisioner, corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete)
					if _, err := f.client.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
						f.t.Fatal(err)
					}
				}
			},
		},
		"a PersistentVolume gone": {
			setup: func(f *fixture, b *fakeBackend, _ func() *Controller) func() {
				pv := newVolume("pv-old", testProvisioner, corev1.VolumeBound, corev1.PersistentVolumeReclaimRetain)
				if _, err := f.client.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
					f.t.Fatal(err)
				}
				polltest.Eventually(f.t, "the volume listed", func() bool {
					_, exists, _ := f.informers.Volumes.GetStore().GetByKey("pv-old")
					return exists
				})
				refusing(b, refusal, func() bool {
					_, exists, _ := f.informers.Volumes.GetStore().GetByKey("pv-old")
					return exists
				})
				return func() {
					if err := f.client.CoreV1().PersistentVolumes().Delete(context.Background(), "pv-old", metav1.DeleteOptions{}); err != nil {
						f.t.Fatal(err)
					}
				}
			},
		},
		"freed while the backend refused": {
			setup: func(_ *fixture, b *fakeBackend, c func() *Controller) func() {
				var refused atomic.Bool
				b.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
					if refused.CompareAndSwap(false, true) {
						// Room frees up after the backend counted it, before
						// the refusal reaches the controller.
						c().roomFreed()
						return ProvisioningFinished, refusal
					}
					return ProvisioningFinished, nil
				}
				return func() {}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.start()
			f.createClass("fast", testProvisioner)
			backend := newFakeBackend()
			cfg := testConfig(testProvisioner)
			// Only a retry for freed room comes within the test.
			cfg.Retry.InitialDelay = time.Hour
			cfg.Retry.MaxDelay = time.Hour
			recorder := &testRecorder{}
			var c *Controller
			free := tc.setup(f, backend, func() *Controller { return c })
			c = f.newController(cfg, backend, recorder)
			startController(t, c)
			f.createClaim(newClaim("c", "fast", testProvisioner))

			polltest.Eventually(t, "a refusal", func() bool { return countEvents(recorder, EventProvisioningFailed) > 0 })
			free()
			polltest.Eventually(t, "the claim provisioned", func() bool { return f.volumeExists("pvc-uid-c") })
		})
	}
}
