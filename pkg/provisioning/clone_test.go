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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/provfleet/provfleet/internal/polltest"
)

// onNodeA binds volume to node-a, as the hostPath backends pin theirs.
func onNodeA(volume *corev1.PersistentVolume) {
	volume.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-a"},
		}}}},
	}}
}

func newNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
}

// A clone is provisioned only from a claim of its namespace and
// StorageClass, Bound to a volume of its provisioner that is no larger than
// its request and on its selected node; the backend is handed that claim
// and volume. Every other source is refused with a Warning Event that says
// why and retried, never provisioned empty. Sources a tenant shapes to
// reach what is not theirs (themselves, a volume of no provisioner or of
// another claim) are refused alike.
func TestCloneAdmission(t *testing.T) {
	type want struct {
		Err bool
		// Source is the source claim and volume the backend was given.
		Source  string
		Refusal []string
	}
	accepted := want{Source: "default/claim pvc-uid-claim"}
	refused := func(why string) want {
		return want{Err: true, Refusal: []string{"cannot clone claim default/claim: " + why}}
	}
	clone := func(edit func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
		c := newClaim("c", "fast", testProvisioner)
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "claim"}
		if edit != nil {
			edit(c)
		}
		return c
	}
	withNode := func(node string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) { c.Annotations[AnnSelectedNode] = node }
	}
	other := "other"
	tests := map[string]struct {
		claim *corev1.PersistentVolumeClaim
		// edit changes the source claim and its volume.
		edit        func(*corev1.PersistentVolumeClaim, *corev1.PersistentVolume)
		noVol       bool
		noClaim     bool
		sourceClass string
		want        want
	}{
		"accepted": {claim: clone(nil), want: accepted},
		"accepted by reference": {claim: clone(func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "claim"}
		}), want: accepted},
		"larger request": {claim: clone(func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		}), want: accepted},
		"volume of an additional name": {claim: clone(nil), edit: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			v.Annotations[AnnDynamicallyProvisioned] = "provfleet.io/also"
		}, want: accepted},
		"another namespace": {claim: clone(func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "claim", Namespace: &other}
		}), want: want{Err: true, Refusal: []string{"cannot clone claim other/claim: a clone's source must be in the clone's namespace default: " +
			"a source in another namespace needs a ReferenceGrant, which provfleet.io/test does not support"}}},
		"source missing": {claim: clone(nil), noClaim: true, want: refused("no such claim is known to provfleet.io/test (yet): it does not exist, or its volume is on another node")},
		"source is the clone itself": {claim: clone(func(c *corev1.PersistentVolumeClaim) {
			c.Name, c.UID = "claim", "uid-claim"
		}), noClaim: true, noVol: true, want: refused("a claim cannot be a clone of itself")},
		"source being deleted": {claim: clone(nil), edit: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) {
			c.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}, want: refused("it is being deleted")},
		"source pending": {claim: clone(nil), edit: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) {
			c.Status = corev1.PersistentVolumeClaimStatus{}
		}, want: refused("it is Pending, not Bound to a PersistentVolume")},
		"source lost": {claim: clone(nil), edit: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) {
			c.Status.Phase = corev1.ClaimLost
		}, want: refused("it is Lost, not Bound to a PersistentVolume")},
		"volume missing": {claim: clone(nil), noVol: true, want: refused("its PersistentVolume pvc-uid-claim does not exist")},
		"volume being deleted": {claim: clone(nil), edit: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			v.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}, want: refused("its PersistentVolume pvc-uid-claim is being deleted")},
		"volume of another claim": {claim: clone(nil), edit: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			v.Spec.ClaimRef.UID = "uid-victim"
		}, want: refused("its PersistentVolume pvc-uid-claim is not bound to it")},
		"volume of another provisioner": {claim: clone(nil), edit: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			v.Annotations[AnnDynamicallyProvisioned] = "other.io/x"
		}, want: refused("its PersistentVolume pvc-uid-claim was provisioned by other.io/x, not by provfleet.io/test: only a volume of the clone's provisioner can be copied")},
		"volume made by hand": {claim: clone(nil), edit: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			v.Annotations = nil
		}, want: refused("its PersistentVolume pvc-uid-claim was provisioned by no provisioner, not by provfleet.io/test: only a volume of the clone's provisioner can be copied")},
		"other class": {claim: clone(nil), sourceClass: "slow", want: refused(`its StorageClass is "slow" and the clone's "fast": a clone must be of its source's StorageClass`)},
		"request too small": {claim: clone(func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("512Mi")
		}), want: refused("the clone requests 512Mi, less than the 1Gi of its source's volume pvc-uid-claim: request at least that")},
		"no request": {claim: clone(func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests = nil
		}), want: refused("the clone requests 0, less than the 1Gi of its source's volume pvc-uid-claim: request at least that")},
		"volume without capacity, claim larger": {claim: clone(nil), edit: func(c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			v.Spec.Capacity = nil
			c.Status.Capacity[corev1.ResourceStorage] = resource.MustParse("3Gi")
		}, want: refused("the clone requests 1Gi, less than the 3Gi of its source's volume pvc-uid-claim: request at least that")},
		"on the source's node": {claim: clone(withNode("node-a")), edit: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			onNodeA(v)
		}, want: accepted},
		"on another node": {claim: clone(withNode("node-b")), edit: func(c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			c.Annotations[AnnSelectedNode] = "node-a"
			onNodeA(v)
		}, want: refused("the clone must be made on node node-a, the node of its source; the claim's selected node is node-b")},
		"on another node, source placed by no annotation": {claim: clone(withNode("node-b")), edit: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			onNodeA(v)
		}, want: refused("the clone must be made on a node its PersistentVolume pvc-uid-claim is bound to, the node of its source; the claim's selected node is node-b")},
		"node-bound source, no selected node": {claim: clone(nil), edit: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			onNodeA(v)
		}, want: accepted},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sourceClass := "fast"
			if tc.sourceClass != "" {
				sourceClass = tc.sourceClass
			}
			origin, volume, _ := boundClaim("1Gi", "1Gi", "1Gi", sourceClass)
			if tc.edit != nil {
				tc.edit(origin, volume)
			}
			objects := []runtime.Object{tc.claim, newClass("fast", testProvisioner), newNode("node-a"), newNode("node-b")}
			if !tc.noClaim {
				objects = append(objects, origin)
			}
			if !tc.noVol {
				objects = append(objects, volume)
			}
			f := newFixture(t, objects...)
			f.fill(objects...)
			backend := newFakeBackend()
			recorder := &testRecorder{}
			cfg := testConfig(testProvisioner)
			cfg.AdditionalProvisionerNames = []string{"provfleet.io/also"}
			c := f.newController(cfg, sourceBackend{backend, []schema.GroupKind{claimKind}}, recorder)

			_, err := c.syncClaim(context.Background(), newTestTerm(t, c), keyOfClaim(tc.claim))
			got := want{Err: err != nil, Refusal: recorder.messagesOf(EventProvisioningFailed)}
			calls, _, _ := backend.snapshot()
			if calls > 0 {
				if source := backend.options[0].CloneSource; source != nil {
					got.Source = source.Claim.Namespace + "/" + source.Claim.Name + " " + source.Volume.Name
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("after sync (-want +got):\n%s\nerror: %v", diff, err)
			}
			if tc.want.Err && (calls > 0 || f.volumeExists(volumeNameFor(tc.claim))) {
				t.Errorf("a refused clone was provisioned: %d backend calls", calls)
			}
			failed := testutil.ToFloat64(f.metrics.provisionFailed.WithLabelValues(testProvisioner, "fast", "PersistentVolumeClaim"))
			provisioned := testutil.ToFloat64(f.metrics.provisionTotal.WithLabelValues(testProvisioner, "fast", "PersistentVolumeClaim"))
			wantFailed, wantProvisioned := 0.0, 1.0
			if tc.want.Err {
				wantFailed, wantProvisioned = 1, 0
			}
			if failed != wantFailed || provisioned != wantProvisioned {
				t.Errorf("counted %v failed and %v provisioned clones, want %v and %v", failed, provisioned, wantFailed, wantProvisioned)
			}
		})
	}
}

// nodeMatches reads a volume's node affinity as the scheduler does: any of
// its terms, each with all its requirements, an empty term matching none.
func TestNodeMatches(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "a", "size": "4"}}}
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	tests := map[string]struct {
		terms []corev1.NodeSelectorTerm
		want  bool
	}{
		"no term":           {want: false},
		"empty term":        {terms: []corev1.NodeSelectorTerm{{}}, want: false},
		"in":                {terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpIn, "a", "b")}}}, want: true},
		"not in":            {terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpNotIn, "a")}}}, want: false},
		"exists, and gt":    {terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpExists), req("size", corev1.NodeSelectorOpGt, "3")}}}, want: true},
		"does not exist":    {terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpDoesNotExist)}}}, want: false},
		"lt fails":          {terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("size", corev1.NodeSelectorOpLt, "3")}}}, want: false},
		"second term":       {terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpIn, "b")}}, {MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "n")}}}, want: true},
		"field of another":  {terms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "m")}}}, want: false},
		"unknown operator":  {terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", "Near", "a")}}}, want: false},
		"invalid selection": {terms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpIn)}}}, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, nodeMatches(node, &corev1.NodeSelector{NodeSelectorTerms: tc.terms})); diff != "" {
				t.Errorf("nodeMatches (-want +got):\n%s", diff)
			}
		})
	}
}

// copyingBackend clones in the background: each call but an abandoned one
// leaves the copy running, until finishAt calls (0: never); an abandoned
// call stops it. It records each call's Abandoned and source.
func copyingBackend(finishAt int) *fakeBackend {
	b := newFakeBackend()
	b.provision = func(_ context.Context, call int, options ProvisionOptions) (ProvisioningState, error) {
		if options.Abandoned || call == finishAt {
			return ProvisioningFinished, nil
		}
		return ProvisioningInBackground, errors.New("still copying")
	}
	return b
}

// cloneSetup is a controller whose backend copies clones in the background
// until finishAt calls (copyingBackend), a bound claim origin with its
// volume, and a claim c that clones it; mutate changes origin's volume
// before the objects are made.
func cloneSetup(t *testing.T, finishAt int, mutate func(*corev1.PersistentVolume)) (f *fixture, c *Controller, backend *fakeBackend, origin, clone *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) {
	t.Helper()
	origin, volume, _ = boundClaim("1Gi", "1Gi", "1Gi", "fast")
	if mutate != nil {
		mutate(volume)
	}
	clone = newClaim("c", "fast", testProvisioner)
	clone.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: origin.Name}
	objects := []runtime.Object{clone, origin, volume, newClass("fast", testProvisioner)}
	f = newFixture(t, objects...)
	f.fill(objects...)
	backend = copyingBackend(finishAt)
	c = f.newController(testConfig(testProvisioner), sourceBackend{backend, []schema.GroupKind{claimKind}}, &testRecorder{})
	return f, c, backend, origin, clone, volume
}

// A clone provisioned in the background keeps the source it was admitted
// with, even once that source is gone, and a claim that no longer wants
// its volume (deleted, bound elsewhere, gone) has the backend called with
// Abandoned, so that it stops the copy rather than finish it; what it made
// is then deleted.
func TestCloneInBackground(t *testing.T) {
	type call struct {
		Abandoned bool
		Source    string
	}
	type want struct {
		Calls       []call
		InProgress  bool
		Volume      bool
		DeletedBack []string
		// Provisioned and Failed are what the metrics counted.
		Provisioned, Failed float64
	}
	source := "default/claim"
	tests := map[string]struct {
		// between changes the informer between the two calls.
		between func(f *fixture, clone, source *corev1.PersistentVolumeClaim)
		want    want
	}{
		"continued": {
			want: want{Calls: []call{{Source: source}, {Source: source}}, Volume: true, Provisioned: 1},
		},
		"source deleted during the copy": {
			between: func(f *fixture, _, source *corev1.PersistentVolumeClaim) {
				if err := f.informers.Claims.GetStore().Delete(source); err != nil {
					t.Fatal(err)
				}
			},
			want: want{Calls: []call{{Source: source}, {Source: source}}, Volume: true, Provisioned: 1},
		},
		"clone being deleted": {
			between: func(f *fixture, clone, _ *corev1.PersistentVolumeClaim) {
				deleting := clone.DeepCopy()
				deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
				if err := f.informers.Claims.GetStore().Update(deleting); err != nil {
					t.Fatal(err)
				}
			},
			want: want{Calls: []call{{Source: source}, {Abandoned: true, Source: source}}, DeletedBack: []string{"pvc-uid-c"}},
		},
		"clone bound elsewhere": {
			between: func(f *fixture, clone, _ *corev1.PersistentVolumeClaim) {
				bound := clone.DeepCopy()
				bound.Spec.VolumeName = "pv-by-hand"
				if err := f.informers.Claims.GetStore().Update(bound); err != nil {
					t.Fatal(err)
				}
			},
			want: want{Calls: []call{{Source: source}, {Abandoned: true, Source: source}}, DeletedBack: []string{"pvc-uid-c"}},
		},
		"clone gone": {
			between: func(f *fixture, clone, _ *corev1.PersistentVolumeClaim) {
				if err := f.informers.Claims.GetStore().Delete(clone); err != nil {
					t.Fatal(err)
				}
			},
			want: want{Calls: []call{{Source: source}, {Abandoned: true, Source: source}}, DeletedBack: []string{"pvc-uid-c"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, c, backend, origin, clone, _ := cloneSetup(t, 2, nil)
			tm := newTestTerm(t, c)
			if _, err := c.syncClaim(context.Background(), tm, keyOfClaim(clone)); err == nil {
				t.Fatal("the first call left the copy in the background without an error")
			}
			if tc.between != nil {
				tc.between(f, clone, origin)
			}
			_, err := c.syncClaim(context.Background(), tm, keyOfClaim(clone))
			_, inProgress := c.inProgress.Load(clone.UID)
			_, _, deleted := backend.snapshot()
			got := want{
				InProgress: inProgress, Volume: f.volumeExists("pvc-uid-c"), DeletedBack: deleted,
				Provisioned: testutil.ToFloat64(f.metrics.provisionTotal.WithLabelValues(testProvisioner, "fast", "PersistentVolumeClaim")),
				Failed:      testutil.ToFloat64(f.metrics.provisionFailed.WithLabelValues(testProvisioner, "fast", "PersistentVolumeClaim")),
			}
			for _, options := range backend.options {
				got.Calls = append(got.Calls, call{Abandoned: options.Abandoned, Source: options.CloneSource.Claim.Namespace + "/" + options.CloneSource.Claim.Name})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("after two calls (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

// A claim deleted while its clone is copied in the background is called
// again at once, with Abandoned, by its deletion's event: not after the
// backoff of its failures, which here is an hour.
func TestCloneAbandonedPromptly(t *testing.T) {
	origin, volume, _ := boundClaim("1Gi", "1Gi", "1Gi", "fast")
	f := newFixture(t, origin, volume)
	f.start()
	f.createClass("fast", testProvisioner)
	backend := copyingBackend(0)
	cfg := testConfig(testProvisioner)
	cfg.Retry.InitialDelay = time.Hour
	cfg.Retry.MaxDelay = time.Hour
	c := f.newController(cfg, sourceBackend{backend, []schema.GroupKind{claimKind}}, &testRecorder{})
	startController(t, c)
	clone := newClaim("c", "fast", testProvisioner)
	clone.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: origin.Name}
	f.createClaim(clone)
	polltest.Eventually(t, "the clone in progress", func() bool { _, ok := c.inProgress.Load(clone.UID); return ok })

	if err := f.client.CoreV1().PersistentVolumeClaims("default").Delete(context.Background(), "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "the copy stopped and its volume deleted", func() bool {
		_, _, deleted := backend.snapshot()
		return len(deleted) == 1
	})
	polltest.Eventually(t, "the clone done", func() bool { _, ok := c.inProgress.Load(clone.UID); return !ok })
	backend.mu.Lock()
	defer backend.mu.Unlock()
	if last := backend.options[len(backend.options)-1]; !last.Abandoned {
		t.Errorf("the last call was not told the claim abandoned its volume")
	}
}

// The backend volume of a source claim deleted while a clone is copied from
// it in the background is kept until the copy ends, a wait that does not
// count as a failure, and deleted then.
func TestCloneKeepsItsSource(t *testing.T) {
	// The source claim is deleted: its volume is Released.
	_, c, backend, _, clone, volume := cloneSetup(t, 2, func(v *corev1.PersistentVolume) { v.Status.Phase = corev1.VolumeReleased })
	tm := newTestTerm(t, c)
	type step struct {
		Deleted []string
		Waits   bool
	}
	var got []step
	syncSource := func() {
		_, err := c.syncVolume(context.Background(), volume.Name)
		_, _, waits := c.volumeWaits(volume.Name, err)
		_, _, deleted := backend.snapshot()
		got = append(got, step{Deleted: deleted, Waits: err != nil && waits})
	}

	_, _ = c.syncClaim(context.Background(), tm, keyOfClaim(clone))
	syncSource()
	if _, err := c.syncClaim(context.Background(), tm, keyOfClaim(clone)); err != nil {
		t.Fatal(err)
	}
	syncSource()
	want := []step{{Waits: true}, {Deleted: []string{volume.Name}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("source volume synced during and after the copy (-want +got):\n%s", diff)
	}
}

// A backend whose work in the background ended wakes its claim, which is
// queued at once rather than after its backoff; once the provisioner
// stopped, waking does nothing.
func TestWakeQueuesTheClaim(t *testing.T) {
	_, c, backend, _, clone, _ := cloneSetup(t, 2, nil)
	tm := newTestTerm(t, c)
	c.mu.Lock()
	c.term = tm
	c.mu.Unlock()
	if _, err := c.syncClaim(context.Background(), tm, keyOfClaim(clone)); err == nil {
		t.Fatal("the first call left the copy in the background without an error")
	}
	backend.mu.Lock()
	wake := backend.options[0].Wake
	backend.mu.Unlock()
	if n := tm.claims.queue.Len(); n != 0 {
		t.Fatalf("%d claims queued before the wake, want none", n)
	}
	wake()
	if n := tm.claims.queue.Len(); n != 1 {
		t.Fatalf("%d claims queued once woken, want the clone", n)
	}
	if key, _ := tm.claims.queue.Get(); key != keyOfClaim(clone) {
		t.Errorf("queued %v, want the clone %v", key, keyOfClaim(clone))
	}
	c.mu.Lock()
	c.term = nil
	c.mu.Unlock()
	wake()
}
