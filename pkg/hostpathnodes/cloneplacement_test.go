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

package hostpathnodes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/pkg/backend"
)

// TestCloneSourceNode: a clone goes to the node of its source's volume;
// one whose source is unbound, unknown or on no node has none; a claim of
// another data source, or of a source in another namespace, is no clone.
func TestCloneSourceNode(t *testing.T) {
	claims := map[string]*corev1.PersistentVolumeClaim{
		"team/bound":   {Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-bound"}},
		"team/nowhere": {Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-nowhere"}},
		"team/lost":    {Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-lost"}},
		"team/pending": {},
	}
	volumes := map[string]*corev1.PersistentVolume{
		"pv-bound":   {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{backend.AnnNode: "node-b"}}},
		"pv-nowhere": {},
	}
	clone := func(ref *corev1.TypedObjectReference) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "copy"}, Spec: corev1.PersistentVolumeClaimSpec{DataSourceRef: ref}}
	}
	claimRef := func(name string) *corev1.TypedObjectReference {
		return &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: name}
	}
	tests := map[string]struct {
		claim      *corev1.PersistentVolumeClaim
		wantNode   string
		wantClones bool
		wantErr    bool
	}{
		"no data source": {claim: clone(nil)},
		"a snapshot": {claim: clone(&corev1.TypedObjectReference{
			APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap",
		})},
		"a claim bound on a node":          {claim: clone(claimRef("bound")), wantNode: "node-b", wantClones: true},
		"by spec.dataSource":               {claim: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team"}, Spec: corev1.PersistentVolumeClaimSpec{DataSource: &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "bound"}}}, wantNode: "node-b", wantClones: true},
		"a claim not bound":                {claim: clone(claimRef("pending")), wantClones: true, wantErr: true},
		"a claim not known":                {claim: clone(claimRef("missing")), wantClones: true, wantErr: true},
		"a claim whose volume is gone":     {claim: clone(claimRef("lost")), wantClones: true, wantErr: true},
		"a claim whose volume has no node": {claim: clone(claimRef("nowhere")), wantClones: true, wantErr: true},
		// Left to the controller, which refuses it with an Event.
		"a claim of another namespace": {claim: clone(&corev1.TypedObjectReference{
			Kind: "PersistentVolumeClaim", Name: "bound", Namespace: ptr.To("other"),
		})},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			node, clones, err := cloneSourceNode(tt.claim,
				func(namespace, name string) *corev1.PersistentVolumeClaim { return claims[namespace+"/"+name] },
				func(name string) *corev1.PersistentVolume { return volumes[name] })
			got := []any{node, clones, err != nil}
			if diff := cmp.Diff([]any{tt.wantNode, tt.wantClones, tt.wantErr}, got); diff != "" {
				t.Errorf("node, clones, error (-want +got):\n%s (error: %v)", diff, err)
			}
		})
	}
}
