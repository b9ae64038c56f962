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
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// reclaimAndRetry runs reclaim and runs it again after a backoff while it
// fails, since a backend that is unavailable now may not be later, or while
// it keeps volumes whose claims may still take them or let them go.
func (c *Controller) reclaimAndRetry(ctx context.Context, t *term) {
	if ctx.Err() != nil || c.config().Paused {
		return
	}
	kept, err := c.reclaim(ctx, t)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot reclaim unsaved backend volumes; will retry")
	}
	if err != nil || kept > 0 {
		t.reclaims.AddRateLimited(struct{}{})
		return
	}
	t.reclaims.Forget(struct{}{})
}

// reclaim goes through the backend's record of volumes that may have no
// PersistentVolume, those listed with an error too. One whose PersistentVolume exists is settled by the
// backend (savedVolumeOf). One that no claim wants any more, because the
// claim is gone or bound elsewhere, is deleted: a crash between Provision and
// the PersistentVolume's creation leaks nothing.
// It returns how many volumes it left on the record.
func (c *Controller) reclaim(ctx context.Context, t *term) (kept int, err error) {
	var unsaved []UnsavedVolume
	var errs []error
	err = c.volumeCall(ctx, "unsaved", func(ctx context.Context) error {
		var err error
		unsaved, err = c.reclaimer.Unsaved(ctx)
		return err
	})
	if err != nil {
		// The volumes listed with the error are settled all the same; the
		// error brings reclaim back.
		errs = append(errs, fmt.Errorf("cannot list the backend's unsaved volumes: %w", err))
	}
	for _, u := range unsaved {
		if ctx.Err() != nil {
			return kept, ctx.Err()
		}
		keep, err := c.reclaimVolume(ctx, t, u.Volume)
		if err != nil {
			errs = append(errs, err)
		}
		if keep {
			kept++
		}
	}
	return kept, errors.Join(errs...)
}

// reclaimVolume settles one unsaved backend volume, or reports that it keeps
// it for a claim that may still take it.
func (c *Controller) reclaimVolume(ctx context.Context, t *term, volume *corev1.PersistentVolume) (keep bool, err error) {
	logger := klog.FromContext(ctx).WithValues("volume", volume.Name)
	if _, busy := c.provisioning.Load(volume.Name); busy {
		return true, nil
	}
	if _, saving := t.pending.Load(volume.Name); saving {
		return true, nil
	}
	saved, err := c.savedVolume(ctx, volume.Name)
	if err != nil {
		return false, err
	}
	if saved != nil {
		return c.savedVolumeOf(ctx, volume, saved)
	}
	wanted, err := c.claimWants(ctx, volume)
	if err != nil || wanted {
		return wanted, err
	}
	err = c.deleteBackend(ctx, volume)
	if err != nil && !IsIgnoredError(err) {
		return false, fmt.Errorf("cannot delete the unsaved backend volume %q: %w", volume.Name, err)
	}
	logger.Info("Deleted a backend volume no claim wants")
	return false, nil
}

// savedVolumeOf hands the backend an unsaved volume with saved, the
// PersistentVolume of its name, to settle; it keeps the volume on record when
// saved is not this provisioner's: made by hand or by another provisioner
// sharing the backend, it may well use that very backend volume.
func (c *Controller) savedVolumeOf(ctx context.Context, volume, saved *corev1.PersistentVolume) (keep bool, err error) {
	if by := saved.Annotations[AnnDynamicallyProvisioned]; !c.config().KnownName(by) {
		klog.FromContext(ctx).Info("Keeping an unsaved backend volume: the PersistentVolume of its name is not this provisioner's",
			"volume", volume.Name, "provisionedBy", by)
		return true, nil
	}
	if err := c.volumeCall(ctx, "saved", func(ctx context.Context) error { return c.reclaimer.Saved(ctx, volume, saved) }); err != nil {
		return false, fmt.Errorf("cannot tell the backend that volume %q is saved: %w", volume.Name, err)
	}
	return false, nil
}

// claimWants reports whether the claim a backend volume was made for may
// still get it: the claim exists, is not being deleted, and is bound to
// nothing else. The API is asked when the informer does not show the claim,
// since a claim created a moment ago may not be there yet.
func (c *Controller) claimWants(ctx context.Context, volume *corev1.PersistentVolume) (bool, error) {
	ref := volume.Spec.ClaimRef
	if ref == nil || ref.Namespace == "" || ref.Name == "" {
		// Without its claim nobody can tell whether it is wanted; keep it.
		klog.FromContext(ctx).Info("Unsaved backend volume names no claim, keeping it", "volume", volume.Name)
		return true, nil
	}
	var claim *corev1.PersistentVolumeClaim
	obj, exists, err := c.informers.Claims.GetStore().GetByKey(ref.Namespace + "/" + ref.Name)
	if err == nil && exists {
		claim, _ = obj.(*corev1.PersistentVolumeClaim)
	}
	if claim == nil || claim.UID != ref.UID {
		claim, err = c.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("cannot get claim %s/%s: %w", ref.Namespace, ref.Name, err)
		}
	}
	return wants(claim, volume), nil
}

// wants reports whether claim may still get volume, made for it: it is the
// claim volume was made for, not being deleted, and bound to nothing else.
func wants(claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) bool {
	ref := volume.Spec.ClaimRef
	return ref != nil && claim.UID == ref.UID && claim.DeletionTimestamp == nil &&
		(claim.Spec.VolumeName == "" || claim.Spec.VolumeName == volume.Name)
}

// reclaimSoon queues a reclaim in the current term, if any.
func (c *Controller) reclaimSoon() {
	c.mu.Lock()
	t := c.term
	c.mu.Unlock()
	if t != nil && t.reclaims != nil {
		t.reclaims.Add(struct{}{})
	}
}
