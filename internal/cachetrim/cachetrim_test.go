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

package cachetrim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// fullMeta is metadata as the API serves it of an object made with kubectl
// apply and later changed by a controller.
func fullMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: "ns", UID: "uid-1", ResourceVersion: "42",
		Labels:     map[string]string{"team": "a"},
		Finalizers: []string{"provfleet.io/intent"},
		Annotations: map[string]string{
			lastApplied:                          `{"apiVersion":"v1","kind":"PersistentVolumeClaim"}`,
			"volume.kubernetes.io/selected-node": "node-1",
		},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
	}
}

// trimmedMeta is fullMeta as Transform leaves it.
func trimmedMeta(name string) metav1.ObjectMeta {
	meta := fullMeta(name)
	meta.ManagedFields = nil
	delete(meta.Annotations, lastApplied)
	return meta
}

func TestTransform(t *testing.T) {
	mode := corev1.PersistentVolumeFilesystem
	claimSpec := corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &mode,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}
	volumeSpec := corev1.PersistentVolumeSpec{
		PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/pv-1"}},
		ClaimRef:                      &corev1.ObjectReference{Namespace: "ns", Name: "claim", UID: "c-1"},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
	}
	nodeSpec := corev1.NodeSpec{ProviderID: "kind://node-1", Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}}
	tests := map[string]struct {
		in, out runtime.Object
	}{
		"claim keeps its spec, phase, capacity and resize": {
			in: &corev1.PersistentVolumeClaim{ObjectMeta: fullMeta("claim"), Spec: claimSpec, Status: corev1.PersistentVolumeClaimStatus{
				Phase: corev1.ClaimBound, AccessModes: claimSpec.AccessModes, Capacity: claimSpec.Resources.Requests,
				Conditions:                []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}},
				AllocatedResources:        corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
				AllocatedResourceStatuses: map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: corev1.PersistentVolumeClaimControllerResizeInProgress},
			}},
			out: &corev1.PersistentVolumeClaim{ObjectMeta: trimmedMeta("claim"), Spec: claimSpec, Status: corev1.PersistentVolumeClaimStatus{
				Phase: corev1.ClaimBound, Capacity: claimSpec.Resources.Requests,
				AllocatedResources:        corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
				AllocatedResourceStatuses: map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: corev1.PersistentVolumeClaimControllerResizeInProgress},
			}},
		},
		"volume keeps its spec and phase": {
			in: &corev1.PersistentVolume{ObjectMeta: fullMeta("pv-1"), Spec: volumeSpec, Status: corev1.PersistentVolumeStatus{
				Phase: corev1.VolumeReleased, Message: "released", Reason: "ClaimDeleted", LastPhaseTransitionTime: &metav1.Time{},
			}},
			out: &corev1.PersistentVolume{ObjectMeta: trimmedMeta("pv-1"), Spec: volumeSpec, Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased}},
		},
		"class keeps its parameters": {
			in: &storagev1.StorageClass{ObjectMeta: fullMeta("class"), Provisioner: "p", Parameters: map[string]string{"k": "v"},
				AllowedTopologies: []corev1.TopologySelectorTerm{{}}},
			out: &storagev1.StorageClass{ObjectMeta: trimmedMeta("class"), Provisioner: "p", Parameters: map[string]string{"k": "v"},
				AllowedTopologies: []corev1.TopologySelectorTerm{{}}},
		},
		"node keeps its spec and no status": {
			in: &corev1.Node{ObjectMeta: fullMeta("node-1"), Spec: nodeSpec, Status: corev1.NodeStatus{
				Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
				Images:    []corev1.ContainerImage{{Names: []string{"registry.example/app:1"}, SizeBytes: 1 << 20}},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			}},
			out: &corev1.Node{ObjectMeta: trimmedMeta("node-1"), Spec: nodeSpec},
		},
		"annotations that were only the last applied are none": {
			in:  &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-2", Annotations: map[string]string{lastApplied: "{}"}}},
			out: &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-2"}},
		},
		"other types are left alone": {
			in:  &corev1.ConfigMap{ObjectMeta: fullMeta("cm"), Data: map[string]string{"k": "v"}},
			out: &corev1.ConfigMap{ObjectMeta: fullMeta("cm"), Data: map[string]string{"k": "v"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			once, err := Transform(tc.in.DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.out, once); diff != "" {
				t.Errorf("trimmed object (-want +got):\n%s", diff)
			}
			twice, err := Transform(once)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.out, twice); diff != "" {
				t.Errorf("object trimmed twice (-want +got):\n%s", diff)
			}
		})
	}
}
