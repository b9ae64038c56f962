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
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
)

// recordVolume writes on volume what a VolumeRecorder backend decided about
// it, and returns the volume after the write, or volume.
func (c *Controller) recordVolume(ctx context.Context, volume *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	recorder, ok := c.provisioner.(VolumeRecorder)
	if !ok {
		return volume, nil
	}
	class, err := c.volumeClass(volume)
	if err != nil {
		return volume, err
	}
	var annotations map[string]string
	var recordErr error
	err = c.volumeCall(ctx, "record", func(ctx context.Context) error {
		annotations, recordErr = recorder.Record(ctx, volume, class)
		return nil
	})
	if err != nil {
		return volume, err
	}
	if recordErr != nil {
		klog.FromContext(ctx).V(2).Info("Nothing recorded on the volume", "reason", recordErr.Error())
		return volume, nil
	}
	if len(annotations) == 0 {
		return volume, nil
	}
	return c.patchAnnotations(ctx, volume, annotations)
}

// volumeClass returns the StorageClass volume names, nil when it names none
// or that does not exist.
func (c *Controller) volumeClass(volume *corev1.PersistentVolume) (*storagev1.StorageClass, error) {
	if volume.Spec.StorageClassName == "" {
		return nil, nil
	}
	obj, exists, err := c.informers.Classes.GetStore().GetByKey(volume.Spec.StorageClassName)
	if err != nil || !exists {
		return nil, err
	}
	class, ok := obj.(*storagev1.StorageClass)
	if !ok {
		return nil, fmt.Errorf("cannot use StorageClass %q of type %T", volume.Spec.StorageClassName, obj)
	}
	return class, nil
}

// patchAnnotations adds annotations to volume.
func (c *Controller) patchAnnotations(ctx context.Context, volume *corev1.PersistentVolume, annotations map[string]string) (*corev1.PersistentVolume, error) {
	updated, err := RecordOnVolume(ctx, c.client.CoreV1().PersistentVolumes(), volume, annotations)
	if err != nil {
		return volume, err
	}
	return updated, nil
}

// RecordOnVolume adds annotations to volume and returns the volume after
// the write. The patch names the UID and resource version they were decided
// on, so a volume changed meanwhile (an administrator's annotation) is
// refused with a conflict and decided again rather than overwritten.
func RecordOnVolume(ctx context.Context, volumes corev1client.PersistentVolumeInterface, volume *corev1.PersistentVolume, annotations map[string]string) (*corev1.PersistentVolume, error) {
	meta := map[string]any{"uid": volume.UID, "resourceVersion": volume.ResourceVersion, "annotations": annotations}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return nil, fmt.Errorf("cannot encode the annotations of %s: %w", volume.Name, err)
	}
	updated, err := volumes.Patch(ctx, volume.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot record %v on PersistentVolume %s: %w", annotations, volume.Name, err)
	}
	klog.FromContext(ctx).Info("Recorded on the volume", "annotations", annotations)
	return updated, nil
}
