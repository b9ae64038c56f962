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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/internal/polltest"
)

type guardedBackend struct {
	*fakeBackend
	allow bool
}

func (b guardedBackend) ShouldDelete(context.Context, *corev1.PersistentVolume) bool { return b.allow }

func TestDelete(t *testing.T) {
	released := func() *corev1.PersistentVolume {
		return newVolume("pv", testProvisioner, corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete)
	}
	with := func(pv *corev1.PersistentVolume, change func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
		change(pv)
		return pv
	}
	deleting := func(pv *corev1.PersistentVolume) { pv.DeletionTimestamp = &metav1.Time{Time: time.Now()} }
	finalized := func(pv *corev1.PersistentVolume) { pv.Finalizers = []string{VolumeFinalizer} }

	type want struct {
		Err        bool
		Deleted    []string
		Exists     bool
		Finalizers []string
		Events     []string
	}
	tests := map[string]struct {
		volume    *corev1.PersistentVolume
		finalizer bool
		backend   func(*fakeBackend) Provisioner
		deleteErr error
		want      want
	}{
		"released": {
			volume: released(),
			want:   want{Deleted: []string{"pv"}},
		},
		"released, additional name": {
			volume: newVolume("pv", "provfleet.io/alias", corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete),
			want:   want{Deleted: []string{"pv"}},
		},
		"bound": {
			volume: newVolume("pv", testProvisioner, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete),
			want:   want{Exists: true},
		},
		"bound gets the finalizer": {
			volume:    newVolume("pv", testProvisioner, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete),
			finalizer: true,
			want:      want{Exists: true, Finalizers: []string{VolumeFinalizer}},
		},
		"retained": {
			volume: newVolume("pv", testProvisioner, corev1.VolumeReleased, corev1.PersistentVolumeReclaimRetain),
			want:   want{Exists: true},
		},
		"retained loses the finalizer": {
			volume:    with(newVolume("pv", testProvisioner, corev1.VolumeReleased, corev1.PersistentVolumeReclaimRetain), finalized),
			finalizer: true,
			want:      want{Exists: true},
		},
		"another provisioner's volume keeps its finalizer": {
			volume:    with(newVolume("pv", "other.io/x", corev1.VolumeReleased, corev1.PersistentVolumeReclaimRetain), finalized),
			finalizer: true,
			want:      want{Exists: true, Finalizers: []string{VolumeFinalizer}},
		},
		"another provisioner's volume gets no finalizer": {
			volume:    newVolume("pv", "other.io/x", corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete),
			finalizer: true,
			want:      want{Exists: true},
		},
		"finalizer off: bound loses the finalizer": {
			volume: with(newVolume("pv", testProvisioner, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete), finalized),
			want:   want{Exists: true},
		},
		"finalizer off: released is deleted": {
			volume: with(released(), finalized),
			want:   want{Deleted: []string{"pv"}},
		},
		"finalizer off: deleting keeps the finalizer until the backend volume is deleted": {
			volume:    with(with(released(), deleting), finalized),
			deleteErr: errBackend,
			want:      want{Err: true, Exists: true, Finalizers: []string{VolumeFinalizer}, Events: []string{EventVolumeFailedDelete}},
		},
		// Without its last finalizer a volume being deleted goes.
		"finalizer off: deleting, guard vetoes": {
			volume:  with(with(released(), deleting), finalized),
			backend: func(b *fakeBackend) Provisioner { return guardedBackend{b, false} },
			want:    want{},
		},
		"finalizer off: another provisioner's volume keeps its finalizer": {
			volume: with(newVolume("pv", "other.io/x", corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete), finalized),
			want:   want{Exists: true, Finalizers: []string{VolumeFinalizer}},
		},
		"guard vetoes": {
			volume:  released(),
			backend: func(b *fakeBackend) Provisioner { return guardedBackend{b, false} },
			want:    want{Exists: true},
		},
		"guard agrees": {
			volume:  released(),
			backend: func(b *fakeBackend) Provisioner { return guardedBackend{b, true} },
			want:    want{Deleted: []string{"pv"}},
		},
		"backend fails": {
			volume:    released(),
			deleteErr: errBackend,
			want:      want{Err: true, Exists: true, Events: []string{EventVolumeFailedDelete}},
		},
		"backend ignores": {
			volume:    released(),
			deleteErr: &IgnoredError{Reason: "not mine"},
			want:      want{Exists: true},
		},
		"deleting without finalizer": {
			volume: with(released(), deleting),
			want:   want{Exists: true},
		},
		"deleting with finalizer": {
			volume:    with(with(released(), deleting), finalized),
			finalizer: true,
			want:      want{Deleted: []string{"pv"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.volume)
			f.fill(tc.volume)
			backend := newFakeBackend()
			backend.deleteErr = tc.deleteErr
			var p Provisioner = backend
			if tc.backend != nil {
				p = tc.backend(backend)
			}
			cfg := testConfig(testProvisioner)
			cfg.Finalizer = tc.finalizer
			cfg.AdditionalProvisionerNames = []string{"provfleet.io/alias"}
			recorder := &testRecorder{}
			c := f.newController(cfg, p, recorder)

			_, err := c.syncVolume(context.Background(), "pv")
			_, _, deleted := backend.snapshot()
			got := want{Err: err != nil, Deleted: deleted, Events: recorder.events()}
			pv, gerr := f.client.CoreV1().PersistentVolumes().Get(context.Background(), "pv", metav1.GetOptions{})
			if gerr == nil {
				got.Exists = true
				got.Finalizers = pv.Finalizers
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("after sync (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

// Turning the finalizer off takes it off the volumes that carry it at once,
// so none is left hanging once the provisioner is gone.
func TestFinalizerTurnedOff(t *testing.T) {
	bound := newVolume("pv", testProvisioner, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete)
	f := newFixture(t, bound)
	f.start()
	cfg := testConfig(testProvisioner)
	cfg.Finalizer = true
	c := f.newController(cfg, newFakeBackend(), &testRecorder{})
	startController(t, c)
	finalized := func() bool {
		pv, err := f.client.CoreV1().PersistentVolumes().Get(context.Background(), "pv", metav1.GetOptions{})
		return err == nil && hasFinalizer(pv, VolumeFinalizer)
	}
	polltest.Eventually(t, "the finalizer to be put on", finalized)
	cfg.Finalizer = false
	if err := c.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "the finalizer to be taken off", func() bool { return !finalized() })
}

// Deleting a volume costs what the benchmark measures against the upstream
// library: with the PV finalizer, two writes and no read unless the informer
// lagged behind; and a sync of the same volume that the informer still shows
// afterwards sends nothing and deletes nothing again.
func TestDeleteRequests(t *testing.T) {
	finalized := func() *corev1.PersistentVolume {
		pv := newVolume("pv", testProvisioner, corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete)
		pv.Finalizers = []string{VolumeFinalizer}
		return pv
	}
	tests := map[string]struct {
		volume *corev1.PersistentVolume
		// stale makes the informer's copy older than the API's.
		stale         bool
		finalizerOff  bool
		wantRequests  []string
		wantDeletions int
	}{
		"with the finalizer": {
			volume:        finalized(),
			wantRequests:  []string{"delete", "patch"},
			wantDeletions: 1,
		},
		"with the finalizer, informer behind": {
			volume:        finalized(),
			stale:         true,
			wantRequests:  []string{"delete", "get", "delete", "patch"},
			wantDeletions: 1,
		},
		"without the finalizer": {
			volume:        newVolume("pv", testProvisioner, corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete),
			finalizerOff:  true,
			wantRequests:  []string{"get", "delete"},
			wantDeletions: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.volume)
			cached := tc.volume.DeepCopy()
			if tc.stale {
				// The API moved on to a version the informer has not seen.
				fresh := tc.volume.DeepCopy()
				fresh.Labels = map[string]string{"edited": "true"}
				fresh.ResourceVersion = "2"
				if _, err := f.client.CoreV1().PersistentVolumes().Update(context.Background(), fresh, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			f.fill(cached)
			backend := newFakeBackend()
			cfg := testConfig(testProvisioner)
			cfg.Finalizer = !tc.finalizerOff
			c := f.newController(cfg, backend, &testRecorder{})
			f.client.ClearActions()

			if _, err := c.syncVolume(context.Background(), "pv"); err != nil {
				t.Fatalf("sync: %v", err)
			}
			// The informer shows the deletion late: the volume Terminating,
			// still with the finalizer.
			lagging := cached.DeepCopy()
			lagging.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			lagging.ResourceVersion = "99"
			if err := f.informers.Volumes.GetStore().Update(lagging); err != nil {
				t.Fatal(err)
			}
			if _, err := c.syncVolume(context.Background(), "pv"); err != nil {
				t.Fatalf("second sync: %v", err)
			}

			var requests []string
			for _, action := range f.client.Actions() {
				if action.GetResource().Resource == "persistentvolumes" {
					requests = append(requests, action.GetVerb())
				}
			}
			if diff := cmp.Diff(tc.wantRequests, requests); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if _, _, deleted := backend.snapshot(); len(deleted) != tc.wantDeletions {
				t.Errorf("backend deletions = %v, want %d", deleted, tc.wantDeletions)
			}
		})
	}
}
