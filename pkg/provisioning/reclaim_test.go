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
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/provfleet/provfleet/internal/polltest"
)

// recordingBackend is a fakeBackend that keeps a record of the volumes it
// made until it is told they are saved or deletes them: a Reclaimer.
type recordingBackend struct {
	*fakeBackend
	mu      sync.Mutex
	records map[string]*corev1.PersistentVolume
	// unsavedErr is what Unsaved returns with the records.
	unsavedErr error
}

var _ Reclaimer = (*recordingBackend)(nil)

func newRecordingBackend() *recordingBackend {
	return &recordingBackend{fakeBackend: newFakeBackend(), records: map[string]*corev1.PersistentVolume{}}
}

func (b *recordingBackend) Provision(ctx context.Context, options ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error) {
	volume, state, err := b.fakeBackend.Provision(ctx, options)
	if volume != nil {
		recorded := volume.DeepCopy()
		recorded.Spec.ClaimRef = claimRef(options.PVC)
		b.record(recorded)
	}
	return volume, state, err
}

func (b *recordingBackend) record(volume *corev1.PersistentVolume) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.records[volume.Name] = volume
}

func (b *recordingBackend) Delete(ctx context.Context, volume *corev1.PersistentVolume) error {
	if err := b.fakeBackend.Delete(ctx, volume); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.records, volume.Name)
	return nil
}

func (b *recordingBackend) Unsaved(context.Context) ([]UnsavedVolume, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var unsaved []UnsavedVolume
	for _, volume := range b.records {
		unsaved = append(unsaved, UnsavedVolume{Volume: volume.DeepCopy(), Since: time.Unix(0, 0)})
	}
	return unsaved, b.unsavedErr
}

// Saved drops the record: like Delete, the fake knows its volumes by name
// alone, so the saved PersistentVolume of that name uses the recorded one.
func (b *recordingBackend) Saved(_ context.Context, volume, _ *corev1.PersistentVolume) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.records, volume.Name)
	return nil
}

func (b *recordingBackend) recorded() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var names []string
	for name := range b.records {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// unsavedVolume is the record of a backend volume made for claim at path.
func unsavedVolume(claim *corev1.PersistentVolumeClaim, path string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: volumeNameFor(claim)},
		Spec: corev1.PersistentVolumeSpec{
			ClaimRef: claimRef(claim),
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path},
			},
		},
	}
}

// With a backend that keeps its own record, a claim costs one write, the
// PersistentVolume, and the record is dropped once it is saved.
func TestRecordingBackendProvisionRequests(t *testing.T) {
	claim := newClaim("c", "fast", testProvisioner)
	objects := []runtime.Object{claim, newClass("fast", testProvisioner)}
	f := newFixture(t, objects...)
	f.fill(objects...)
	backend := newRecordingBackend()
	recorder := &testRecorder{}
	c := f.newController(testConfig(testProvisioner), backend, recorder)
	if _, err := c.syncClaim(context.Background(), newTestTerm(t, c), keyOfClaim(claim)); err != nil {
		t.Fatal(err)
	}
	var requests []string
	for _, a := range f.client.Actions() {
		requests = append(requests, a.GetVerb()+" "+a.GetResource().Resource)
	}
	if diff := cmp.Diff([]string{"create persistentvolumes"}, requests); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string(nil), backend.recorded()); diff != "" {
		t.Errorf("records left (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{EventProvisioning, EventProvisioningSucceeded}, recorder.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := f.getClaim("c").Finalizers; len(got) != 0 {
		t.Errorf("claim finalizers written: %v", got)
	}
}

// A failing claim announces its provisioning once, not on every retry.
func TestRecordingBackendAnnouncesOnce(t *testing.T) {
	claim := newClaim("c", "fast", testProvisioner)
	objects := []runtime.Object{claim, newClass("fast", testProvisioner)}
	f := newFixture(t, objects...)
	f.fill(objects...)
	backend := newRecordingBackend()
	backend.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
		return ProvisioningFinished, errNotFound
	}
	recorder := &testRecorder{}
	cfg := testConfig(testProvisioner)
	// The queue's own retries wait; the test makes them.
	cfg.Retry.InitialDelay, cfg.Retry.MaxDelay = time.Hour, time.Hour
	c := f.newController(cfg, backend, recorder)
	tm := newTestTerm(t, c)
	for range 3 {
		claimWorker{c, tm}.work(context.Background(), keyOfClaim(claim))
	}
	want := []string{EventProvisioning, EventProvisioningFailed, EventProvisioningFailed, EventProvisioningFailed}
	if diff := cmp.Diff(want, recorder.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestReclaim(t *testing.T) {
	pending := newClaim("pending", "fast", testProvisioner)
	deleting := pending.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	boundElsewhere := pending.DeepCopy()
	boundElsewhere.Spec.VolumeName = "pv-by-hand"
	recreated := pending.DeepCopy()
	recreated.UID = "uid-pending-2"
	saved := newVolume(volumeNameFor(pending), testProvisioner, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete)
	saved.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/vols/pending"}
	savedByOther := saved.DeepCopy()
	savedByOther.Annotations[AnnDynamicallyProvisioned] = "other.io/x"
	savedByHand := saved.DeepCopy()
	savedByHand.Annotations = nil
	record := unsavedVolume(pending, "/vols/pending")
	noClaimRef := record.DeepCopy()
	noClaimRef.Spec.ClaimRef = nil

	tests := map[string]struct {
		record *corev1.PersistentVolume
		// informed is what the informers show; api holds objects too.
		informed, api []runtime.Object
		busy          bool
		wantDeleted   []string
		wantRecorded  []string
	}{
		"saved with this source": {
			record:   record,
			informed: []runtime.Object{pending, saved},
		},
		"saved, the informer has not seen it": {
			record: record,
			api:    []runtime.Object{pending, saved},
		},
		"saved with another source": {
			record:   unsavedVolume(pending, "/vols/pending-2"),
			informed: []runtime.Object{pending, saved},
		},
		"saved by another provisioner with another source": {
			record:       unsavedVolume(pending, "/vols/pending-2"),
			informed:     []runtime.Object{pending, savedByOther},
			wantRecorded: []string{"pvc-uid-pending"},
		},
		"saved by another provisioner with this source": {
			record:       record,
			informed:     []runtime.Object{pending, savedByOther},
			wantRecorded: []string{"pvc-uid-pending"},
		},
		"saved by hand with another source": {
			record:       unsavedVolume(pending, "/vols/pending-2"),
			informed:     []runtime.Object{pending, savedByHand},
			wantRecorded: []string{"pvc-uid-pending"},
		},
		"claim waits for it": {
			record:       record,
			informed:     []runtime.Object{pending},
			wantRecorded: []string{"pvc-uid-pending"},
		},
		"claim the informer has not seen yet": {
			record:       record,
			api:          []runtime.Object{pending},
			wantRecorded: []string{"pvc-uid-pending"},
		},
		"claim gone": {
			record:      record,
			wantDeleted: []string{"pvc-uid-pending"},
		},
		"claim being deleted": {
			record:      record,
			informed:    []runtime.Object{deleting},
			wantDeleted: []string{"pvc-uid-pending"},
		},
		"claim bound to another volume": {
			record:      record,
			informed:    []runtime.Object{boundElsewhere},
			wantDeleted: []string{"pvc-uid-pending"},
		},
		"claim of the same name created again": {
			record:      record,
			informed:    []runtime.Object{recreated},
			wantDeleted: []string{"pvc-uid-pending"},
		},
		"being provisioned": {
			record:       record,
			busy:         true,
			wantRecorded: []string{"pvc-uid-pending"},
		},
		"names no claim": {
			record:       noClaimRef,
			wantRecorded: []string{"pvc-uid-pending"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, append(slices.Clone(tc.informed), tc.api...)...)
			f.fill(tc.informed...)
			backend := newRecordingBackend()
			backend.record(tc.record)
			c := f.newController(testConfig(testProvisioner), backend, &testRecorder{})
			if tc.busy {
				c.provisioning.Store(tc.record.Name, struct{}{})
			}
			kept, err := c.reclaim(context.Background(), newTestTerm(t, c))
			if err != nil {
				t.Fatal(err)
			}
			if kept != len(tc.wantRecorded) {
				t.Errorf("reclaim reports %d volumes kept, want %d", kept, len(tc.wantRecorded))
			}
			_, _, deleted := backend.snapshot()
			if diff := cmp.Diff(tc.wantDeleted, deleted); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRecorded, backend.recorded()); diff != "" {
				t.Errorf("still recorded (-want +got):\n%s", diff)
			}
			for _, a := range f.client.Actions() {
				if _, ok := a.(k8stesting.GetAction); !ok {
					t.Errorf("reclaim wrote to the API: %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
		})
	}
}

// A controller that starts leading reclaims at once: a backend volume left by
// a crash for a claim deleted meanwhile is deleted.
func TestLeadingReclaims(t *testing.T) {
	f := newFixture(t)
	f.start()
	backend := newRecordingBackend()
	backend.record(unsavedVolume(newClaim("gone", "fast", testProvisioner), "/vols/gone"))
	c := f.newController(testConfig(testProvisioner), backend, &testRecorder{})
	startController(t, c)
	polltest.Eventually(t, "the orphan to be deleted", func() bool {
		_, _, deleted := backend.snapshot()
		return slices.Equal(deleted, []string{"pvc-uid-gone"}) && len(backend.recorded()) == 0
	})
	// Every leading controller reclaims: that must not cost an idle one
	// metric series.
	if n, err := testutil.GatherAndCount(f.registry); err != nil || n != 0 {
		t.Errorf("%d series after reclaiming (err %v), want 0", n, err)
	}
}

// A volume kept for a claim that may still take it is looked at again until
// the claim lets it go.
func TestReclaimLooksAgainAtKeptVolumes(t *testing.T) {
	claim := newClaim("elsewhere", "other", "provfleet.io/other")
	f := newFixture(t, claim)
	f.start()
	backend := newRecordingBackend()
	backend.record(unsavedVolume(claim, "/vols/elsewhere"))
	c := f.newController(testConfig(testProvisioner), backend, &testRecorder{})
	startController(t, c)
	if err := f.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Delete(context.Background(), claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "the volume of the deleted claim to be deleted", func() bool {
		_, _, deleted := backend.snapshot()
		return slices.Equal(deleted, []string{"pvc-uid-elsewhere"}) && len(backend.recorded()) == 0
	})
}

// A claim deleted while its backend works in the background, and whose
// backend then gives up without returning a volume, has the volume the
// backend recorded reclaimed at once, not at the next resync.
func TestGoneClaimWithoutVolumeIsReclaimed(t *testing.T) {
	claim := newClaim("c", "fast", testProvisioner)
	f := newFixture(t, claim, newClass("fast", testProvisioner))
	f.start()
	backend := newRecordingBackend()
	// The backend works in the background while the claim exists, and gives
	// up without a volume once it is gone.
	backend.provision = func(ctx context.Context, _ int, options ProvisionOptions) (ProvisioningState, error) {
		_, err := f.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ProvisioningFinished, errBackend
		}
		backend.record(unsavedVolume(options.PVC, "/vols/c"))
		return ProvisioningInBackground, errBackend
	}
	cfg := testConfig(testProvisioner)
	// Only the claim's deletion brings it back, and no resync comes.
	cfg.Retry.InitialDelay, cfg.Retry.MaxDelay = time.Hour, time.Hour
	c := f.newController(cfg, backend, &testRecorder{})
	startController(t, c)
	polltest.Eventually(t, "the claim in progress", func() bool {
		_, in := c.inProgress.Load(claim.UID)
		return in
	})
	if err := f.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Delete(context.Background(), claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "the recorded volume to be deleted", func() bool {
		_, _, deleted := backend.snapshot()
		return slices.Equal(deleted, []string{"pvc-uid-c"}) && len(backend.recorded()) == 0
	})
}

// Delete is never handed a volume whose name a PersistentVolume uses, but
// that PersistentVolume itself: a backend that deletes by name, as the fakes
// do, keeps the backend volume a saved PersistentVolume uses however the
// controller meets another source under its name.
func TestDeleteByNameSparesTheLiveVolume(t *testing.T) {
	claim := newClaim("c", "fast", testProvisioner)
	live := newVolume(volumeNameFor(claim), testProvisioner, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete)
	live.Spec.ClaimRef = claimRef(claim)
	live.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/vols/live"}
	reclaim := func(c *Controller, tm *term) error {
		_, err := c.reclaim(context.Background(), tm)
		return err
	}
	sync := func(c *Controller, tm *term) error {
		_, err := c.syncClaim(context.Background(), tm, keyOfClaim(claim))
		return err
	}
	tests := map[string]struct {
		reclaimer bool
		// informed: the informer shows the PersistentVolume too.
		informed bool
		run      func(*Controller, *term) error
	}{
		"reclaim of a record with another source":               {reclaimer: true, informed: true, run: reclaim},
		"save meets the saved volume, backend with a record":    {reclaimer: true, run: sync},
		"save meets the saved volume, backend without a record": {run: sync},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objects := []runtime.Object{claim, newClass("fast", testProvisioner), live}
			f := newFixture(t, objects...)
			if tc.informed {
				f.fill(objects...)
			} else {
				f.fill(objects[:2]...)
			}
			fake := newFakeBackend()
			fake.volumes[live.Name] = true
			var backend Provisioner = fake
			if tc.reclaimer {
				recording := &recordingBackend{fakeBackend: fake, records: map[string]*corev1.PersistentVolume{}}
				recording.record(unsavedVolume(claim, "/vols/second"))
				backend = recording
			}
			c := f.newController(testConfig(testProvisioner), backend, &testRecorder{})
			if err := tc.run(c, newTestTerm(t, c)); err != nil {
				t.Fatal(err)
			}
			_, volumes, deleted := fake.snapshot()
			if diff := cmp.Diff([]string(nil), deleted); diff != "" {
				t.Errorf("Delete calls (-want +got):\n%s", diff)
			}
			if !slices.Contains(volumes, live.Name) {
				t.Errorf("the backend volume of the saved PersistentVolume is gone: %v", volumes)
			}
		})
	}
}

// Volumes a backend lists with an error (housekeeping that failed, a part
// it could not read) are settled all the same, and the error is returned,
// so that reclaim runs again.
func TestReclaimSettlesVolumesListedWithAnError(t *testing.T) {
	gone := newClaim("gone", "fast", testProvisioner)
	f := newFixture(t)
	backend := newRecordingBackend()
	backend.record(unsavedVolume(gone, "/vols/gone"))
	errPurge := errors.New("the trash could not be purged")
	backend.unsavedErr = errPurge
	c := f.newController(testConfig(testProvisioner), backend, &testRecorder{})
	if _, err := c.reclaim(context.Background(), newTestTerm(t, c)); !errors.Is(err, errPurge) {
		t.Errorf("reclaim: %v, want the backend's error, so that it runs again", err)
	}
	_, _, deleted := backend.snapshot()
	if diff := cmp.Diff([]string{"pvc-uid-gone"}, deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
}
