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
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// syncVolume deletes the backend volume of a released PersistentVolume of this
// provisioner, and keeps its finalizer; it returns the volume's resource
// version after its own writes.
func (c *Controller) syncVolume(ctx context.Context, name string) (string, error) {
	obj, exists, err := c.informers.Volumes.GetStore().GetByKey(name)
	if err != nil || !exists {
		return "", err
	}
	volume, ok := obj.(*v1.PersistentVolume)
	if !ok || !c.knownName(volume.Annotations[annDynamicallyProvisioned]) {
		return "", nil
	}
	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "volume", klog.KObj(volume)))
	should, err := c.shouldDelete(ctx, volume)
	if err != nil {
		return volume.ResourceVersion, err
	}
	volume, err = c.reconcileVolumeFinalizer(ctx, volume, should)
	if err != nil || !should {
		return volume.ResourceVersion, err
	}
	start := time.Now()
	err = c.deleteVolume(ctx, volume)
	c.metrics.observeDelete(c.name, volume.Spec.StorageClassName, start, err)
	return volume.ResourceVersion, err
}

// reconcileVolumeFinalizer puts the PersistentVolume finalizer on this
// provisioner's volumes that it will delete, and takes it off those it will
// not, so that they can go away. With the finalizer turned off it takes it off
// every volume, as the upstream library does on rollback, so none hangs in
// Terminating once this provisioner is gone; but for a volume whose backend
// volume is to be deleted now (due): deleteVolume takes it off after that, so
// the backend volume is not leaked.
func (c *Controller) reconcileVolumeFinalizer(ctx context.Context, volume *v1.PersistentVolume, due bool) (*v1.PersistentVolume, error) {
	deletable := volume.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete
	enabled := c.config().Finalizer
	var want bool
	switch has := hasFinalizer(volume, VolumeFinalizer); {
	case has && (!deletable || !enabled && !due):
		want = false
	case !has && deletable && volume.DeletionTimestamp == nil && enabled:
		want = true
	default:
		return volume, nil
	}
	return patchFinalizer(ctx, c.client.CoreV1().PersistentVolumes(), volume, VolumeFinalizer, want)
}

// shouldDelete reports whether the backend volume of a PersistentVolume is to
// be deleted by this provisioner.
func (c *Controller) shouldDelete(ctx context.Context, volume *v1.PersistentVolume) (bool, error) {
	// A PersistentVolume on its way out without our finalizer is not ours to
	// handle any more.
	if volume.DeletionTimestamp != nil && !hasFinalizer(volume, VolumeFinalizer) {
		return false, nil
	}
	if volume.Status.Phase != v1.VolumeReleased ||
		volume.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete ||
		!c.knownName(volume.Annotations[annDynamicallyProvisioned]) {
		return false, nil
	}
	guard, ok := c.provisioner.(DeletionGuard)
	if !ok {
		return true, nil
	}
	var should bool
	err := c.guard(ctx, "shouldDelete", func(ctx context.Context) error {
		should = guard.ShouldDelete(ctx, volume)
		return nil
	})
	return should, err
}

// deleteVolume deletes the backend volume, then the PersistentVolume, then
// its finalizer.
func (c *Controller) deleteVolume(ctx context.Context, volume *v1.PersistentVolume) error {
	logger := klog.FromContext(ctx)
	api := c.client.CoreV1().PersistentVolumes()
	// The informer may lag: decide on the volume as it is now.
	fresh, err := api.Get(ctx, volume.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot get PersistentVolume %q: %w", volume.Name, err)
	}
	if should, err := c.shouldDelete(ctx, fresh); err != nil || !should {
		return err
	}
	err = c.guard(ctx, "delete", func(ctx context.Context) error { return c.provisioner.Delete(ctx, fresh) })
	if IsIgnoredError(err) {
		logger.V(2).Info("Backend ignored the volume", "reason", err)
		return nil
	}
	if err != nil {
		err = fmt.Errorf("cannot delete the backend volume: %w", err)
		c.recorder.Event(fresh, v1.EventTypeWarning, EventVolumeFailedDelete, err.Error())
		return err
	}
	logger.Info("Deleted the backend volume")
	if fresh.DeletionTimestamp == nil {
		err := api.Delete(ctx, fresh.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &fresh.UID}})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cannot delete PersistentVolume %q: %w", fresh.Name, err)
		}
	}
	if _, err := patchFinalizer(ctx, api, fresh, VolumeFinalizer, false); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	logger.Info("Deleted PersistentVolume")
	return nil
}
