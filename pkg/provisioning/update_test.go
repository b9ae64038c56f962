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

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

func TestUpdateClaimRetriesConflict(t *testing.T) {
	claim := newClaim("c", "fast", testProvisioner)
	claim.Annotations[AnnSelectedNode] = "node-1"
	f := newFixture(t, claim)
	c := f.newController(testConfig(testProvisioner), newFakeBackend(), &testRecorder{})
	conflicts := 1
	f.client.PrependReactor("patch", "persistentvolumeclaims", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(corev1.Resource("persistentvolumeclaims"), "c", errors.New("stale"))
		}
		return false, nil, nil
	})
	_, err := c.updateClaim(context.Background(), claim, func(claim *corev1.PersistentVolumeClaim) bool {
		delete(claim.Annotations, AnnSelectedNode)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if conflicts != 0 {
		t.Fatal("the update met no conflict")
	}
	if node, ok := f.getClaim("c").Annotations[AnnSelectedNode]; ok {
		t.Errorf("selected node %q still set after a conflict", node)
	}
}

// A claim from a trimmed cache lacks what the cache dropped; writing a change
// of it keeps those fields as the API has them.
func TestUpdateClaimKeepsWhatTheCacheDropped(t *testing.T) {
	stored := newClaim("c", "fast", testProvisioner)
	stored.Annotations[AnnSelectedNode] = "node-1"
	stored.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"kind":"PersistentVolumeClaim"}`
	stored.Status.Phase = corev1.ClaimPending
	stored.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}}
	f := newFixture(t, stored)
	c := f.newController(testConfig(testProvisioner), newFakeBackend(), &testRecorder{})
	cached := stored.DeepCopy()
	delete(cached.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
	cached.Status = corev1.PersistentVolumeClaimStatus{}
	_, err := c.updateClaim(context.Background(), cached, func(claim *corev1.PersistentVolumeClaim) bool {
		delete(claim.Annotations, AnnSelectedNode)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	want := stored.DeepCopy()
	delete(want.Annotations, AnnSelectedNode)
	if diff := cmp.Diff(want, f.getClaim("c")); diff != "" {
		t.Errorf("claim after the update (-want +got):\n%s", diff)
	}
}

func TestChangePatch(t *testing.T) {
	claim := newClaim("c", "fast", testProvisioner)
	claim.ResourceVersion = "7"
	claim.Annotations[AnnSelectedNode] = "node-1"
	tests := map[string]struct {
		mutate func(*corev1.PersistentVolumeClaim)
		want   string
	}{
		"a removed annotation is null": {
			mutate: func(claim *corev1.PersistentVolumeClaim) { delete(claim.Annotations, AnnSelectedNode) },
			want:   `{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":null},"resourceVersion":"7"}}`,
		},
		"a label is set alone": {
			mutate: func(claim *corev1.PersistentVolumeClaim) { claim.Labels = map[string]string{"k": "v"} },
			want:   `{"metadata":{"labels":{"k":"v"},"resourceVersion":"7"}}`,
		},
		"no change is the resource version alone": {
			mutate: func(*corev1.PersistentVolumeClaim) {},
			want:   `{"metadata":{"resourceVersion":"7"}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			modified := claim.DeepCopy()
			tc.mutate(modified)
			patch, err := changePatch(claim, modified)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(patch)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}
