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
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// lastApplied is the annotation where kubectl apply keeps a copy of the whole
// object as last applied: often the largest field of an object made by hand.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

var _ cache.TransformFunc = Transform

// Transform trims a claim, PersistentVolume, StorageClass or Node in place and
// returns it; any other object is returned as it is. It is idempotent, as
// informers require.
//
// Of every one of the four it drops metadata.managedFields (read by nothing
// but server-side apply) and the last-applied annotation (read by kubectl
// only; a backend path pattern that names it renders it empty). The rest of
// the metadata stays: names, UIDs and resource versions key every read and
// write, labels and annotations carry the provisioner name, the selected
// node and the backends' markers, and path patterns may name any label or
// other annotation.
//
// Specs stay whole: a claim's spec is what is provisioned, a PersistentVolume's
// is its source, claim reference and reclaim policy, a class's parameters are
// read by the backends, and a Node's spec is small.
//
// Of statuses a phase stays: a PersistentVolume's, since a Released one
// is deleted; a claim's, whose phase says whether it is bound, for
// backends and logs. A claim also keeps its capacity and the size and
// status of a resize (allocatedResources, allocatedResourceStatuses), from
// which a bound claim's expansion is seen to be due; its conditions go, and
// a resize reads them from the API when it writes the status.
// A Node keeps no status at all: its selected-node handling reads the Node's
// name and labels only, and its status (images, conditions, addresses,
// capacity) is most of a Node object and changes with every heartbeat.
func Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.PersistentVolumeClaim:
		trimMeta(&o.ObjectMeta)
		o.Status = corev1.PersistentVolumeClaimStatus{
			Phase: o.Status.Phase, Capacity: o.Status.Capacity,
			AllocatedResources: o.Status.AllocatedResources, AllocatedResourceStatuses: o.Status.AllocatedResourceStatuses,
		}
	case *corev1.PersistentVolume:
		trimMeta(&o.ObjectMeta)
		o.Status = corev1.PersistentVolumeStatus{Phase: o.Status.Phase}
	case *storagev1.StorageClass:
		trimMeta(&o.ObjectMeta)
	case *corev1.Node:
		trimMeta(&o.ObjectMeta)
		o.Status = corev1.NodeStatus{}
	}
	return obj, nil
}

// trimMeta drops the metadata nothing in provfleet reads.
func trimMeta(meta *metav1.ObjectMeta) {
	meta.ManagedFields = nil
	delete(meta.Annotations, lastApplied)
	if len(meta.Annotations) == 0 {
		meta.Annotations = nil
	}
}
