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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// nodeOnly serves the claims selected to one node and the volumes labelled
// with it, as a node agent's scope does.
type nodeOnly string

func (n nodeOnly) Claim(claim *corev1.PersistentVolumeClaim) bool {
	return claim.Annotations[AnnSelectedNode] == string(n)
}

func (n nodeOnly) Volume(volume *corev1.PersistentVolume) bool {
	return volume.Labels["node"] == string(n)
}

// Two controllers of one provisioner name, each limited to its node, share
// the work: each provisions only the claims selected to its node and deletes
// only its node's released volumes; a claim selected to no node is nobody's.
func TestScopeSplitsOneProvisionerBetweenNodes(t *testing.T) {
	selected := func(name, node string) *corev1.PersistentVolumeClaim {
		c := newClaim(name, "fast", testProvisioner)
		if node != "" {
			c.Annotations[AnnSelectedNode] = node
		}
		return c
	}
	released := func(name, node string) *corev1.PersistentVolume {
		pv := newVolume(name, testProvisioner, corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete)
		pv.Labels = map[string]string{"node": node}
		return pv
	}
	claims := []*corev1.PersistentVolumeClaim{selected("on-a", "a"), selected("on-b", "b"), selected("nowhere", "")}
	volumes := []*corev1.PersistentVolume{released("old-a", "a"), released("old-b", "b")}
	objects := []runtime.Object{newClass("fast", testProvisioner),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}}
	for _, c := range claims {
		objects = append(objects, c)
	}
	for _, v := range volumes {
		objects = append(objects, v)
	}
	f := newFixture(t, objects...)
	f.fill(objects...)

	type work struct{ Provisioned, Deleted []string }
	got := map[string]work{}
	for _, node := range []string{"a", "b"} {
		backend := newFakeBackend()
		c, err := New(testConfig(testProvisioner), Dependencies{
			Client: f.client, Informers: f.informers, Metrics: f.metrics, Provisioner: backend, Scope: nodeOnly(node),
		})
		if err != nil {
			t.Fatal(err)
		}
		tm := newTestTerm(t, c)
		for _, claim := range claims {
			if _, err := c.syncClaim(context.Background(), tm, keyOfClaim(claim)); err != nil {
				t.Errorf("node %s, claim %s: %v", node, claim.Name, err)
			}
		}
		for _, volume := range volumes {
			if _, err := c.syncVolume(context.Background(), volume.Name); err != nil {
				t.Errorf("node %s, volume %s: %v", node, volume.Name, err)
			}
		}
		_, made, deleted := backend.snapshot()
		slices.Sort(made)
		got[node] = work{Provisioned: made, Deleted: deleted}
	}
	want := map[string]work{
		"a": {Provisioned: []string{"pvc-uid-on-a"}, Deleted: []string{"old-a"}},
		"b": {Provisioned: []string{"pvc-uid-on-b"}, Deleted: []string{"old-b"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("work per node (-want +got):\n%s", diff)
	}
	if claim := f.getClaim("nowhere"); len(claim.Finalizers) > 0 {
		t.Errorf("a claim selected to no node got finalizers %q", claim.Finalizers)
	}
}

// switchScope serves the claims its set names, whatever their annotations.
type switchScope map[string]bool

func (s switchScope) Claim(claim *corev1.PersistentVolumeClaim) bool { return s[claim.Name] }

func (s switchScope) Volume(*corev1.PersistentVolume) bool { return false }

// A claim its Scope turned to serve without the claim changing is queued by
// Requeue, and only then; a controller that does not lead queues nothing.
func TestRequeueAfterTheScopeChanged(t *testing.T) {
	claim := newClaim("late", "fast", testProvisioner)
	f := newFixture(t, newClass("fast", testProvisioner), claim)
	f.fill(newClass("fast", testProvisioner), claim)
	scope := switchScope{}
	c, err := New(testConfig(testProvisioner), Dependencies{
		Client: f.client, Informers: f.informers, Metrics: f.metrics, Provisioner: newFakeBackend(), Scope: scope,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Requeue(claim)
	tm := newTestTerm(t, c)
	c.mu.Lock()
	c.term = tm
	c.mu.Unlock()
	c.Requeue(claim)
	if n := tm.claims.queue.Len(); n != 0 {
		t.Fatalf("%d claims queued out of scope", n)
	}
	scope[claim.Name] = true
	c.Requeue(claim)
	if n := tm.claims.queue.Len(); n != 1 {
		t.Fatalf("%d claims queued once the scope serves the claim, want 1", n)
	}
}
