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
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
)

// newTestTerm builds a term whose queues are shut down when the test ends.
func newTestTerm(t *testing.T, c *Controller) *term {
	t.Helper()
	tm := c.newTerm(context.Background())
	t.Cleanup(func() {
		tm.claims.queue.ShutDown()
		tm.volumes.queue.ShutDown()
		tm.saves.ShutDown()
		if tm.reclaims != nil {
			tm.reclaims.ShutDown()
		}
	})
	return tm
}

type blockBackend struct {
	*fakeBackend
	supports bool
}

func (b blockBackend) SupportsBlock(context.Context) bool { return b.supports }

type qualifyingBackend struct {
	*fakeBackend
	qualifies bool
}

func (b qualifyingBackend) ShouldProvision(context.Context, *corev1.PersistentVolumeClaim) bool {
	return b.qualifies
}

func TestProvision(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	withMode := func(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
		c.Spec.VolumeMode = &block
		return c
	}
	withNode := func(c *corev1.PersistentVolumeClaim, node string) *corev1.PersistentVolumeClaim {
		c.Annotations[AnnSelectedNode] = node
		return c
	}
	withIntent := func(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
		c.Finalizers = []string{IntentFinalizer(testProvisioner)}
		return c
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	existing := newVolume("pvc-uid-c", testProvisioner, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete)
	// saved is a PersistentVolume of claim c with the given source, as an
	// earlier attempt saves it and the API server defaults it.
	saved := func(claimUID types.UID, path string) *corev1.PersistentVolume {
		pv := newVolume("pvc-uid-c", testProvisioner, corev1.VolumeAvailable, corev1.PersistentVolumeReclaimDelete)
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "c", UID: claimUID}
		unset := corev1.HostPathUnset
		pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: path, Type: &unset}
		return pv
	}

	type want struct {
		Err          bool
		Calls        int
		Events       []string
		Volume       bool
		Intent       bool
		InProgress   bool
		SelectedNode string
		DeletedBack  []string
	}
	tests := map[string]struct {
		claim   *corev1.PersistentVolumeClaim
		objects []runtime.Object
		// unseen are in the API but not yet in the informers.
		unseen    []runtime.Object
		backend   func(*fakeBackend) Provisioner
		provision func(context.Context, int, ProvisionOptions) (ProvisioningState, error)
		want      want
	}{
		"provisions": {
			claim: newClaim("c", "fast", testProvisioner),
			want:  want{Calls: 1, Events: []string{EventProvisioning, EventProvisioningSucceeded}, Volume: true},
		},
		"volume exists already": {
			claim:   withIntent(newClaim("c", "fast", testProvisioner)),
			objects: []runtime.Object{existing},
			want:    want{Volume: true},
		},
		"volume saved, not yet seen": {
			claim:  withIntent(newClaim("c", "fast", testProvisioner)),
			unseen: []runtime.Object{saved("uid-c", "/tmp/pvc-uid-c")},
			want:   want{Calls: 1, Events: []string{EventProvisioningSucceeded}, Volume: true},
		},
		"volume saved with another backend volume, not yet seen": {
			claim:  withIntent(newClaim("c", "fast", testProvisioner)),
			unseen: []runtime.Object{saved("uid-c", "/elsewhere")},
			want:   want{Calls: 1, Events: []string{EventProvisioningSucceeded}, Volume: true},
		},
		"volume name taken by another claim": {
			claim:  newClaim("c", "fast", testProvisioner),
			unseen: []runtime.Object{saved("uid-other", "/tmp/pvc-uid-c")},
			want:   want{Err: true, Calls: 1, Events: []string{EventProvisioning, EventProvisioningFailed}, Volume: true, Intent: true},
		},
		"retry of a failed claim": {
			claim: withIntent(newClaim("c", "fast", testProvisioner)),
			provision: func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
				return ProvisioningFinished, errBackend
			},
			want: want{Err: true, Calls: 1, Events: []string{EventProvisioningFailed}, Intent: true},
		},
		"block refused": {
			claim: withMode(newClaim("c", "fast", testProvisioner)),
			want:  want{Events: []string{EventProvisioningFailed}},
		},
		"block refused by block provisioner without support": {
			claim:   withMode(newClaim("c", "fast", testProvisioner)),
			backend: func(b *fakeBackend) Provisioner { return blockBackend{b, false} },
			want:    want{Events: []string{EventProvisioningFailed}},
		},
		"a selector refused, whatever the backend": {
			claim: func() *corev1.PersistentVolumeClaim {
				c := newClaim("c", "fast", testProvisioner)
				c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"disk": "fast"}}
				return c
			}(),
			backend: func(b *fakeBackend) Provisioner { return blockBackend{b, true} },
			want:    want{Events: []string{EventProvisioningFailed}},
		},
		"block accepted": {
			claim:   withMode(newClaim("c", "fast", testProvisioner)),
			backend: func(b *fakeBackend) Provisioner { return blockBackend{b, true} },
			want:    want{Calls: 1, Events: []string{EventProvisioning, EventProvisioningSucceeded}, Volume: true},
		},
		"class missing": {
			claim: newClaim("c", "missing", testProvisioner),
			want:  want{Err: true},
		},
		"class of another provisioner": {
			claim: newClaim("c", "other", testProvisioner),
			want:  want{},
		},
		"selected node": {
			claim:   withNode(newClaim("c", "fast", testProvisioner), "node-1"),
			objects: []runtime.Object{node},
			want:    want{Calls: 1, Events: []string{EventProvisioning, EventProvisioningSucceeded}, Volume: true, SelectedNode: "node-1"},
		},
		"selected node missing": {
			claim: withNode(newClaim("c", "fast", testProvisioner), "node-2"),
			want:  want{Err: true, Events: []string{EventProvisioningFailed}, SelectedNode: "node-2"},
		},
		"backend fails, finished": {
			claim: newClaim("c", "fast", testProvisioner),
			provision: func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
				return ProvisioningFinished, errBackend
			},
			want: want{Err: true, Calls: 1, Events: []string{EventProvisioning, EventProvisioningFailed}, Intent: true},
		},
		"backend still working, in background": {
			claim: newClaim("c", "fast", testProvisioner),
			provision: func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
				return ProvisioningInBackground, errBackend
			},
			want: want{Err: true, Calls: 1, Events: []string{EventProvisioning, EventProvisioning}, Intent: true, InProgress: true},
		},
		"backend fails, no change": {
			claim: newClaim("c", "fast", testProvisioner),
			provision: func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
				return ProvisioningNoChange, errBackend
			},
			want: want{Err: true, Calls: 1, Events: []string{EventProvisioning, EventProvisioningFailed}, Intent: true},
		},
		"backend ignores": {
			claim: newClaim("c", "fast", testProvisioner),
			provision: func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
				return ProvisioningFinished, &IgnoredError{Reason: "not mine"}
			},
			want: want{Calls: 1, Events: []string{EventProvisioning}},
		},
		"backend asks to reschedule": {
			claim:   withNode(newClaim("c", "fast", testProvisioner), "node-1"),
			objects: []runtime.Object{node},
			provision: func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
				return ProvisioningReschedule, errBackend
			},
			want: want{Err: true, Calls: 1, Events: []string{EventProvisioning, EventProvisioningFailed}, Intent: true},
		},
		"backend panics": {
			claim:     newClaim("c", "fast", testProvisioner),
			provision: func(context.Context, int, ProvisionOptions) (ProvisioningState, error) { panic("backend bug") },
			want:      want{Err: true, Calls: 1, Events: []string{EventProvisioning, EventProvisioningFailed}, Intent: true},
		},
		"qualifier refuses": {
			claim:   newClaim("c", "fast", testProvisioner),
			backend: func(b *fakeBackend) Provisioner { return qualifyingBackend{b, false} },
			want:    want{},
		},
		"bound claim loses its intent": {
			claim: func() *corev1.PersistentVolumeClaim {
				c := withIntent(newClaim("c", "fast", testProvisioner))
				c.Spec.VolumeName = "pvc-uid-c"
				return c
			}(),
			want: want{},
		},
		"claim bound to another volume loses its intent and backend volume": {
			claim: func() *corev1.PersistentVolumeClaim {
				c := withIntent(newClaim("c", "fast", testProvisioner))
				c.Spec.VolumeName = "pv-by-hand"
				return c
			}(),
			want: want{DeletedBack: []string{"pvc-uid-c"}},
		},
		"claim bound to another volume, its own saved": {
			claim: func() *corev1.PersistentVolumeClaim {
				c := withIntent(newClaim("c", "fast", testProvisioner))
				c.Spec.VolumeName = "pv-by-hand"
				return c
			}(),
			objects: []runtime.Object{existing},
			want:    want{Volume: true},
		},
		"deleted claim with intent and no volume": {
			claim: func() *corev1.PersistentVolumeClaim {
				c := withIntent(newClaim("c", "fast", testProvisioner))
				c.DeletionTimestamp = &metav1.Time{Time: time.Now()}
				return c
			}(),
			want: want{DeletedBack: []string{"pvc-uid-c"}},
		},
		"deleted claim with intent and a volume": {
			claim: func() *corev1.PersistentVolumeClaim {
				c := withIntent(newClaim("c", "fast", testProvisioner))
				c.DeletionTimestamp = &metav1.Time{Time: time.Now()}
				return c
			}(),
			objects: []runtime.Object{existing},
			want:    want{Volume: true},
		},
		"deleted claim of another provisioner": {
			claim: func() *corev1.PersistentVolumeClaim {
				c := newClaim("c", "fast", testProvisioner)
				c.DeletionTimestamp = &metav1.Time{Time: time.Now()}
				c.Finalizers = []string{"other"}
				return c
			}(),
			want: want{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objects := append([]runtime.Object{tc.claim, newClass("fast", testProvisioner), newClass("other", "other.io/x")}, tc.objects...)
			f := newFixture(t, append(objects, tc.unseen...)...)
			f.fill(objects...)
			backend := newFakeBackend()
			backend.provision = tc.provision
			var p Provisioner = backend
			if tc.backend != nil {
				p = tc.backend(backend)
			}
			recorder := &testRecorder{}
			c := f.newController(testConfig(testProvisioner), p, recorder)
			tm := newTestTerm(t, c)

			_, err := c.syncClaim(context.Background(), tm, keyOfClaim(tc.claim))
			calls, _, deleted := backend.snapshot()
			claim := f.getClaim("c")
			_, inProgress := c.inProgress.Load(tc.claim.UID)
			got := want{
				Err:          err != nil,
				Calls:        calls,
				Events:       recorder.events(),
				Volume:       f.volumeExists("pvc-uid-c"),
				Intent:       hasFinalizer(claim, c.finalizer),
				InProgress:   inProgress,
				SelectedNode: claim.Annotations[AnnSelectedNode],
				DeletedBack:  deleted,
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("after sync (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

func TestProvisionedVolume(t *testing.T) {
	claim := newClaim("c", "fast", testProvisioner)
	objects := []runtime.Object{claim, newClass("fast", testProvisioner)}
	f := newFixture(t, objects...)
	f.fill(objects...)
	c := f.newController(testConfig(testProvisioner), newFakeBackend(), &testRecorder{})
	if _, err := c.syncClaim(context.Background(), newTestTerm(t, c), keyOfClaim(claim)); err != nil {
		t.Fatal(err)
	}
	pv, err := f.client.CoreV1().PersistentVolumes().Get(context.Background(), "pvc-uid-c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := struct {
		Provisioner, Class string
		Finalizers         []string
		ClaimRef           corev1.ObjectReference
	}{pv.Annotations[AnnDynamicallyProvisioned], pv.Spec.StorageClassName, pv.Finalizers, *pv.Spec.ClaimRef}
	want := struct {
		Provisioner, Class string
		Finalizers         []string
		ClaimRef           corev1.ObjectReference
	}{testProvisioner, "fast", []string{VolumeFinalizer}, corev1.ObjectReference{
		Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: "c", UID: "uid-c", ResourceVersion: claim.ResourceVersion,
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PersistentVolume (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(f.metrics.provisionTotal.WithLabelValues(testProvisioner, "fast", "")); got != 1 {
		t.Errorf("provision total = %v, want 1", got)
	}
}

func TestProvisionPanicCounted(t *testing.T) {
	claim := newClaim("c", "fast", testProvisioner)
	objects := []runtime.Object{claim, newClass("fast", testProvisioner)}
	f := newFixture(t, objects...)
	f.fill(objects...)
	backend := newFakeBackend()
	backend.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) { panic("bug") }
	c := f.newController(testConfig(testProvisioner), backend, &testRecorder{})
	if _, err := c.syncClaim(context.Background(), newTestTerm(t, c), keyOfClaim(claim)); err == nil {
		t.Fatal("want an error from a panicking backend")
	}
	if got := testutil.ToFloat64(f.metrics.panics.WithLabelValues(testProvisioner, "provision")); got != 1 {
		t.Errorf("panics = %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.metrics.provisionFailed.WithLabelValues(testProvisioner, "fast", "")); got != 1 {
		t.Errorf("provision failures = %v, want 1", got)
	}
}

func TestInBackgroundThenNoChangeKeepsClaimInProgress(t *testing.T) {
	claim := newClaim("c", "fast", testProvisioner)
	objects := []runtime.Object{claim, newClass("fast", testProvisioner)}
	f := newFixture(t, objects...)
	f.fill(objects...)
	backend := newFakeBackend()
	states := []ProvisioningState{ProvisioningInBackground, ProvisioningNoChange, ProvisioningFinished}
	backend.provision = func(_ context.Context, call int, _ ProvisionOptions) (ProvisioningState, error) {
		return states[call-1], errBackend
	}
	c := f.newController(testConfig(testProvisioner), backend, &testRecorder{})
	tm := newTestTerm(t, c)
	var got []bool
	for range states {
		_, _ = c.syncClaim(context.Background(), tm, keyOfClaim(claim))
		_, in := c.inProgress.Load(claim.UID)
		got = append(got, in)
	}
	if diff := cmp.Diff([]bool{true, true, false}, got); diff != "" {
		t.Errorf("in progress after each call (-want +got):\n%s", diff)
	}
}

// A claim costs three writes and no read: the intent finalizer on, the
// PersistentVolume, the intent finalizer off; both finalizer writes are
// patches without a resource version, so the binder's writes to the claim in
// between cannot make them conflict.
func TestProvisionRequests(t *testing.T) {
	claim := newClaim("c", "fast", testProvisioner)
	objects := []runtime.Object{claim, newClass("fast", testProvisioner)}
	f := newFixture(t, objects...)
	f.fill(objects...)
	// The binder wrote to the claim since the informer saw it.
	binder := claim.DeepCopy()
	binder.ResourceVersion = "7"
	binder.Finalizers = []string{"kubernetes.io/pvc-protection"}
	binder.Annotations["pv.kubernetes.io/bind-completed"] = "no"
	if err := f.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), binder, "default"); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	c := f.newController(testConfig(testProvisioner), newFakeBackend(), &testRecorder{})
	if _, err := c.syncClaim(context.Background(), newTestTerm(t, c), keyOfClaim(claim)); err != nil {
		t.Fatal(err)
	}

	type request struct{ Verb, Resource, Patch string }
	var got []request
	for _, a := range f.client.Actions() {
		r := request{Verb: a.GetVerb(), Resource: a.GetResource().Resource}
		if p, ok := a.(k8stesting.PatchAction); ok {
			r.Patch = string(p.GetPatchType()) + " " + string(p.GetPatch())
		}
		got = append(got, r)
	}
	intent := IntentFinalizer(testProvisioner)
	want := []request{
		{"patch", "persistentvolumeclaims", `application/strategic-merge-patch+json {"metadata":{"finalizers":["` + intent + `"],"uid":"uid-c"}}`},
		{"create", "persistentvolumes", ""},
		{"patch", "persistentvolumeclaims", `application/strategic-merge-patch+json {"metadata":{"$deleteFromPrimitiveList/finalizers":["` + intent + `"],"uid":"uid-c"}}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	after := f.getClaim("c")
	if diff := cmp.Diff([]string{"kubernetes.io/pvc-protection"}, after.Finalizers); diff != "" {
		t.Errorf("claim finalizers (-want +got):\n%s", diff)
	}
	if after.Annotations["pv.kubernetes.io/bind-completed"] != "no" {
		t.Errorf("the binder's annotation was lost: %v", after.Annotations)
	}
}

// A claim whose intent finalizer is on already is provisioned again without
// writing it again, and one whose volume the informer shows is finished with
// no write at all when its finalizer is off.
func TestProvisionSkipsUnchangedFinalizer(t *testing.T) {
	withIntent := newClaim("c", "fast", testProvisioner)
	withIntent.Finalizers = []string{IntentFinalizer(testProvisioner)}
	volume := newVolume("pvc-uid-c", testProvisioner, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete)
	tests := map[string]struct {
		claim   *corev1.PersistentVolumeClaim
		objects []runtime.Object
		want    []string
	}{
		"intent on record": {
			claim: withIntent,
			want:  []string{"create persistentvolumes", "patch persistentvolumeclaims"},
		},
		"volume seen, no intent": {
			claim:   newClaim("c", "fast", testProvisioner),
			objects: []runtime.Object{volume},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objects := append([]runtime.Object{tc.claim, newClass("fast", testProvisioner)}, tc.objects...)
			f := newFixture(t, objects...)
			f.fill(objects...)
			c := f.newController(testConfig(testProvisioner), newFakeBackend(), &testRecorder{})
			if _, err := c.syncClaim(context.Background(), newTestTerm(t, c), keyOfClaim(tc.claim)); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range f.client.Actions() {
				got = append(got, a.GetVerb()+" "+a.GetResource().Resource)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}
