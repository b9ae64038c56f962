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
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

type panickingQualifier struct{ *fakeBackend }

func (panickingQualifier) ShouldProvision(context.Context, *corev1.PersistentVolumeClaim) bool {
	panic("qualifier bug")
}

func TestShouldProvision(t *testing.T) {
	bound := newClaim("c", "fast", testProvisioner)
	bound.Spec.VolumeName = "pv"
	beta := newClaim("c", "fast", "")
	beta.Annotations[AnnBetaStorageProvisioner] = testProvisioner
	chosen := newClaim("c", "wffc", testProvisioner)
	chosen.Annotations[AnnSelectedNode] = "node-1"
	unchosen := newClaim("c", "wffc", testProvisioner)
	unchosen.Annotations[AnnSelectedNode] = ""
	tests := map[string]struct {
		claim   *corev1.PersistentVolumeClaim
		backend func(*fakeBackend) Provisioner
		want    bool
		wantErr bool
	}{
		"annotated with our name":                    {claim: newClaim("c", "fast", testProvisioner), want: true},
		"annotated with beta annotation":             {claim: beta, want: true},
		"annotated with additional name":             {claim: newClaim("c", "fast", "provfleet.io/alias"), want: true},
		"annotated with another name":                {claim: newClaim("c", "fast", "other.io/x")},
		"not annotated":                              {claim: newClaim("c", "fast", "")},
		"bound":                                      {claim: bound},
		"wait for first consumer, node selected":     {claim: chosen, want: true},
		"wait for first consumer, no node selected":  {claim: newClaim("c", "wffc", testProvisioner)},
		"wait for first consumer, empty node":        {claim: unchosen},
		"wait for first consumer, class unknown yet": {claim: newClaim("c", "missing", testProvisioner), want: true},
		"qualifier agrees": {
			claim:   newClaim("c", "fast", testProvisioner),
			backend: func(b *fakeBackend) Provisioner { return qualifyingBackend{b, true} },
			want:    true,
		},
		"qualifier refuses": {
			claim:   newClaim("c", "fast", testProvisioner),
			backend: func(b *fakeBackend) Provisioner { return qualifyingBackend{b, false} },
		},
		"qualifier panics": {
			claim:   newClaim("c", "fast", testProvisioner),
			backend: func(b *fakeBackend) Provisioner { return panickingQualifier{b} },
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.fill(newClass("fast", testProvisioner), newWaitingClass("wffc", testProvisioner))
			var backend Provisioner = newFakeBackend()
			if tc.backend != nil {
				backend = tc.backend(newFakeBackend())
			}
			cfg := testConfig(testProvisioner)
			cfg.AdditionalProvisionerNames = []string{"provfleet.io/alias"}
			c := f.newController(cfg, backend, &testRecorder{})
			got, err := c.shouldProvision(context.Background(), tc.claim)
			if (err != nil) != tc.wantErr {
				t.Fatalf("shouldProvision error = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("shouldProvision = %v, want %v", got, tc.want)
			}
		})
	}
}

func newWaitingClass(name, provisioner string) *storagev1.StorageClass {
	class := newClass(name, provisioner)
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	class.VolumeBindingMode = &mode
	return class
}

// A claim of a WaitForFirstConsumer class that the backend sent back to the
// scheduler is not provisioned again until the scheduler chose a node: the
// retry of the failed attempt and the update that removed the node provision
// nothing.
func TestRescheduledClaimWaitsForNode(t *testing.T) {
	claim := newClaim("c", "wffc", testProvisioner)
	claim.Annotations[AnnSelectedNode] = "node-1"
	objects := []runtime.Object{claim, newWaitingClass("wffc", testProvisioner), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}}
	f := newFixture(t, objects...)
	f.fill(objects...)
	backend := newFakeBackend()
	backend.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
		return ProvisioningReschedule, errBackend
	}
	c := f.newController(testConfig(testProvisioner), backend, &testRecorder{})
	tm := newTestTerm(t, c)
	if _, err := c.syncClaim(context.Background(), tm, keyOfClaim(claim)); err == nil {
		t.Fatal("want the rescheduled attempt to fail")
	}
	rescheduled := f.getClaim("c")
	if node, ok := rescheduled.Annotations[AnnSelectedNode]; ok {
		t.Fatalf("selected node %q kept after a reschedule", node)
	}
	if diff := cmp.Diff("1", rescheduled.Annotations[AnnReschedules]); diff != "" {
		t.Errorf("reschedules counted on the claim (-want +got):\n%s", diff)
	}
	f.fill(rescheduled)
	for range 2 {
		if _, err := c.syncClaim(context.Background(), tm, keyOfClaim(claim)); err != nil {
			t.Errorf("sync without a selected node: %v", err)
		}
	}
	var nodes []string
	backend.mu.Lock()
	for _, options := range backend.options {
		node := "<none>"
		if options.SelectedNode != nil {
			node = options.SelectedNode.Name
		}
		nodes = append(nodes, node)
	}
	backend.mu.Unlock()
	if diff := cmp.Diff([]string{"node-1"}, nodes); diff != "" {
		t.Errorf("selected node of each Provision call (-want +got):\n%s", diff)
	}
}

// A claim sent back to the scheduler MaxReschedules times already keeps the
// node the scheduler selected again, and its user is told.
func TestRescheduleLimit(t *testing.T) {
	claim := newClaim("c", "wffc", testProvisioner)
	claim.Annotations[AnnSelectedNode] = "node-1"
	claim.Annotations[AnnReschedules] = strconv.Itoa(MaxReschedules)
	objects := []runtime.Object{claim, newWaitingClass("wffc", testProvisioner), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}}
	f := newFixture(t, objects...)
	f.fill(objects...)
	backend := newFakeBackend()
	backend.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
		return ProvisioningReschedule, errBackend
	}
	recorder := &testRecorder{}
	c := f.newController(testConfig(testProvisioner), backend, recorder)
	if _, err := c.syncClaim(context.Background(), newTestTerm(t, c), keyOfClaim(claim)); !errors.Is(err, ErrRescheduleLimit) {
		t.Fatalf("sync past the limit: %v, want ErrRescheduleLimit", err)
	}
	kept := f.getClaim("c")
	if diff := cmp.Diff(map[string]string{AnnSelectedNode: "node-1", AnnReschedules: strconv.Itoa(MaxReschedules)},
		map[string]string{AnnSelectedNode: kept.Annotations[AnnSelectedNode], AnnReschedules: kept.Annotations[AnnReschedules]}); diff != "" {
		t.Errorf("annotations past the limit (-want +got):\n%s", diff)
	}
	if events := recorder.events(); !slices.Contains(events, EventRescheduleLimit) {
		t.Errorf("Events %v, want %s", events, EventRescheduleLimit)
	}
}
