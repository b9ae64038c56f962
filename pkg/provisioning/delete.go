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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// volumeWorker is what a worker of a term's volume queue does with a
// PersistentVolume.
type volumeWorker struct {
	c *Controller
	t *term
}

// work syncs the PersistentVolume name and, when that fails, queues it
// again after its backoff or gives up on it.
func (w volumeWorker) work(ctx context.Context, name string) {
	c, t := w.c, w.t
	if c.config().Paused || t.volumes.skips(ctx, name) {
		return
	}
	version, err := c.syncVolume(ctx, name)
	t.volumes.settle(ctx, name, version, err, c.config().Retry.DeleteFailureThreshold, c.volumeWaits)
}

// syncVolume deletes the backend volume of a released PersistentVolume of this
// provisioner, and keeps its finalizer; it returns the volume's resource
// version after its own writes.
func (c *Controller) syncVolume(ctx context.Context, name string) (string, error) {
	obj, exists, err := c.informers.Volumes.GetStore().GetByKey(name)
	if err != nil || !exists {
		c.deleted.Delete(name)
		return "", err
	}
	volume, ok := obj.(*corev1.PersistentVolume)
	if !ok || !c.config().KnownName(volume.Annotations[AnnDynamicallyProvisioned]) || !c.volumeInScope(volume) {
		return "", nil
	}
	if uid, ok := c.deleted.Load(name); ok && uid == volume.UID {
		// Deleted already; the informer has not caught up.
		return volume.ResourceVersion, nil
	}
	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "volume", klog.KObj(volume)))
	if volume, err = c.recordVolume(ctx, volume); err != nil {
		return volume.ResourceVersion, err
	}
	should, err := c.shouldDelete(ctx, volume)
	if err != nil {
		return volume.ResourceVersion, err
	}
	if !should {
		volume, err = c.reconcileVolumeFinalizer(ctx, volume)
		return volume.ResourceVersion, err
	}
	if volume, err = c.ensureVolumeFinalizer(ctx, volume); err != nil {
		return volume.ResourceVersion, err
	}
	if c.copies.from(volume.Name) {
		return volume.ResourceVersion, fmt.Errorf("cannot delete the backend volume yet: %w", errCopying)
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
// Terminating once this provisioner is gone.
func (c *Controller) reconcileVolumeFinalizer(ctx context.Context, volume *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	if !hasFinalizer(volume, VolumeFinalizer) {
		return c.ensureVolumeFinalizer(ctx, volume)
	}
	if volume.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || !c.config().Finalizer {
		return removeFinalizer(ctx, c.client.CoreV1().PersistentVolumes(), volume, VolumeFinalizer)
	}
	return volume, nil
}

// ensureVolumeFinalizer puts the PersistentVolume finalizer on a volume this
// provisioner will delete, unless it is turned off or the volume is on its
// way out already. It never takes it off: for a volume whose backend volume is
// to be deleted now, deleteVolume takes it off after that, so the backend
// volume is not leaked even with the finalizer just turned off.
func (c *Controller) ensureVolumeFinalizer(ctx context.Context, volume *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	if hasFinalizer(volume, VolumeFinalizer) || volume.DeletionTimestamp != nil ||
		volume.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || !c.config().Finalizer {
		return volume, nil
	}
	return addFinalizer(ctx, c.client.CoreV1().PersistentVolumes(), volume, VolumeFinalizer)
}

// shouldDelete reports whether the backend volume of a PersistentVolume is to
// be deleted by this provisioner.
func (c *Controller) shouldDelete(ctx context.Context, volume *corev1.PersistentVolume) (bool, error) {
	// A PersistentVolume on its way out without our finalizer is not ours to
	// handle any more.
	if volume.DeletionTimestamp != nil && !hasFinalizer(volume, VolumeFinalizer) {
		return false, nil
	}
	if volume.Status.Phase != corev1.VolumeReleased ||
		volume.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		!c.config().KnownName(volume.Annotations[AnnDynamicallyProvisioned]) {
		return false, nil
	}
	guard, ok := c.provisioner.(DeletionGuard)
	if !ok {
		return true, nil
	}
	var should bool
	err := c.volumeCall(ctx, "shouldDelete", func(ctx context.Context) error {
		should = guard.ShouldDelete(ctx, volume)
		return nil
	})
	return should, err
}

// deleteVolume deletes the backend volume and the PersistentVolume.
func (c *Controller) deleteVolume(ctx context.Context, volume *corev1.PersistentVolume) error {
	if hasFinalizer(volume, VolumeFinalizer) {
		return c.deleteFinalizedVolume(ctx, volume)
	}
	// Nothing keeps the PersistentVolume once it is deleted, so the backend
	// volume goes first, decided on the volume as it is now: the informer may
	// lag.
	fresh, err := c.getVolume(ctx, volume.Name)
	if fresh == nil || err != nil {
		return err
	}
	if should, err := c.shouldDelete(ctx, fresh); err != nil || !should {
		return err
	}
	if hasFinalizer(fresh, VolumeFinalizer) {
		return c.deleteFinalizedVolume(ctx, fresh)
	}
	return c.deleteFreshVolume(ctx, fresh)
}

// deleteFreshVolume deletes the backend volume of a PersistentVolume without
// the volume finalizer, as just read from the API, then the PersistentVolume.
func (c *Controller) deleteFreshVolume(ctx context.Context, fresh *corev1.PersistentVolume) error {
	if done, err := c.deleteBackendVolume(ctx, fresh); !done || err != nil {
		return err
	}
	if fresh.DeletionTimestamp == nil {
		err := c.client.CoreV1().PersistentVolumes().Delete(ctx, fresh.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &fresh.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cannot delete PersistentVolume %q: %w", fresh.Name, err)
		}
	}
	c.deleted.Store(fresh.Name, fresh.UID)
	klog.FromContext(ctx).Info("Deleted PersistentVolume")
	return nil
}

// deleteFinalizedVolume deletes a PersistentVolume that carries the volume
// finalizer, then its backend volume, then the finalizer. The finalizer keeps
// the PersistentVolume, Terminating, until the backend volume is gone, so it
// can go first; its deletion is conditional on the version the decision was
// made on, so a volume costs two writes and no read, and only an informer
// that lagged behind costs a read, to decide again.
func (c *Controller) deleteFinalizedVolume(ctx context.Context, volume *corev1.PersistentVolume) error {
	api := c.client.CoreV1().PersistentVolumes()
	for refreshed := false; volume.DeletionTimestamp == nil; refreshed = true {
		err := api.Delete(ctx, volume.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
			UID: &volume.UID, ResourceVersion: &volume.ResourceVersion,
		}})
		if err == nil {
			break
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || refreshed {
			return fmt.Errorf("cannot delete PersistentVolume %q: %w", volume.Name, err)
		}
		fresh, err := c.getVolume(ctx, volume.Name)
		if fresh == nil || err != nil {
			return err
		}
		if should, err := c.shouldDelete(ctx, fresh); err != nil || !should {
			return err
		}
		if !hasFinalizer(fresh, VolumeFinalizer) {
			return c.deleteFreshVolume(ctx, fresh)
		}
		volume = fresh
	}
	if done, err := c.deleteBackendVolume(ctx, volume); !done || err != nil {
		return err
	}
	if _, err := removeFinalizer(ctx, api, volume, VolumeFinalizer); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.deleted.Store(volume.Name, volume.UID)
	klog.FromContext(ctx).Info("Deleted PersistentVolume")
	return nil
}

// getVolume reads a PersistentVolume from the API; nil when it is gone.
func (c *Controller) getVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	volume, err := c.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot get PersistentVolume %q: %w", name, err)
	}
	return volume, nil
}

// deleteBackendVolume asks the backend to delete the volume of a
// PersistentVolume; done is false when the backend ignored it.
func (c *Controller) deleteBackendVolume(ctx context.Context, volume *corev1.PersistentVolume) (done bool, err error) {
	err = c.deleteBackend(ctx, volume)
	if IsIgnoredError(err) {
		klog.FromContext(ctx).V(2).Info("Backend ignored the volume", "reason", err)
		return false, nil
	}
	if err != nil {
		c.probeSoon()
		err = fmt.Errorf("cannot delete the backend volume: %w", err)
		c.recorder.Event(volume, corev1.EventTypeWarning, EventVolumeFailedDelete, err.Error())
		return false, err
	}
	klog.FromContext(ctx).Info("Deleted the backend volume")
	return true, nil
}
