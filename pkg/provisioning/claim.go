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
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// claimWorker is what a worker of a term's claim queue does with a claim.
type claimWorker struct {
	c *Controller
	t *term
}

// work syncs the claim of key and, when that fails, queues it again after
// its backoff or gives up on it. A claim that synced no longer waits for
// room; one refused for want of room while room freed up is tried again at
// once, as it did not count as waiting yet.
func (w claimWorker) work(ctx context.Context, key claimKey) {
	c, t := w.c, w.t
	if c.config().Paused || t.claims.skips(ctx, key) {
		return
	}
	freed := c.room.generation()
	version, err := c.syncClaim(ctx, t, key)
	switch {
	case err == nil:
		c.room.forget(key)
	case errors.Is(err, ErrNoRoom) && c.room.generation() != freed:
		t.claims.queue.Add(key)
	}
	t.claims.settle(ctx, key, version, err, c.config().Retry.ProvisionFailureThreshold, c.claimWaits)
}

// lookupClaim finds the claim of key in the informer, or else among the
// claims in progress; live tells which.
func (c *Controller) lookupClaim(key claimKey) (claim *corev1.PersistentVolumeClaim, live bool) {
	obj, exists, err := c.informers.Claims.GetStore().GetByKey(key.Namespace + "/" + key.Name)
	if err == nil && exists {
		if claim, ok := obj.(*corev1.PersistentVolumeClaim); ok && claim.UID == key.UID {
			return claim, true
		}
	}
	if obj, ok := c.inProgress.Load(key.UID); ok {
		return obj.(*background).claim, false
	}
	return nil, false
}

// syncClaim brings one claim forward and returns the claim's resource
// version after its own writes.
func (c *Controller) syncClaim(ctx context.Context, t *term, key claimKey) (string, error) {
	claim, live := c.lookupClaim(key)
	if claim == nil {
		return "", nil
	}
	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "claim", klog.KObj(claim)))
	_, inProgress := c.inProgress.Load(claim.UID)
	if live && !inProgress && !c.claimInScope(claim) {
		return claim.ResourceVersion, nil
	}
	switch {
	case !live && inProgress:
		return c.provisionClaim(ctx, claim, c.finishForGoneClaim)
	case abandoned(claim) && inProgress:
		return c.provisionClaim(ctx, claim, c.finishForAbandonedClaim)
	case !live:
		return claim.ResourceVersion, nil
	case abandoned(claim):
		if hasFinalizer(claim, c.finalizer) {
			return claim.ResourceVersion, c.abandonClaim(ctx, claim, nil)
		}
		// Bound to a PersistentVolume of another name, which may still be
		// this provisioner's: one migrated from another provisioner.
		return claim.ResourceVersion, c.resize(ctx, claim)
	case claim.Spec.VolumeName != "":
		claim, err := c.removeClaimFinalizer(ctx, claim)
		if err != nil {
			return claim.ResourceVersion, err
		}
		return claim.ResourceVersion, c.resize(ctx, claim)
	}
	should, err := c.shouldProvision(ctx, claim)
	if err != nil || !should {
		return claim.ResourceVersion, err
	}
	return c.provisionClaim(ctx, claim, func(ctx context.Context, claim *corev1.PersistentVolumeClaim, work *background) (*corev1.PersistentVolumeClaim, ProvisioningState, error) {
		return c.provisionOperation(ctx, t, claim, work)
	})
}

// resize grows the volume of a bound claim that asks for more, unless a
// Scope leaves that to the provisioner's leader.
func (c *Controller) resize(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if c.resizer == nil {
		return nil
	}
	return c.resizer.Sync(ctx, claim)
}

// abandoned reports whether a claim the informer shows no longer wants the
// volume made for it: it is being deleted, or bound to another
// PersistentVolume. A claim that is gone abandoned its volume too.
func abandoned(claim *corev1.PersistentVolumeClaim) bool {
	return claim.DeletionTimestamp != nil ||
		(claim.Spec.VolumeName != "" && claim.Spec.VolumeName != volumeNameFor(claim))
}

// shouldProvision reports whether a volume is wanted for claim from this
// provisioner.
func (c *Controller) shouldProvision(ctx context.Context, claim *corev1.PersistentVolumeClaim) (bool, error) {
	if claim.Spec.VolumeName != "" || !c.config().KnownName(StorageProvisioner(claim)) {
		return false, nil
	}
	// The scheduler chooses where a WaitForFirstConsumer volume goes, and
	// chooses again once a backend asked to reschedule: until then there is
	// nothing to provision. A class not seen yet fails the provisioning.
	if class, err := c.classOf(claim); err == nil && claim.Annotations[AnnSelectedNode] == "" &&
		class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
		return false, nil
	}
	qualifier, ok := c.provisioner.(Qualifier)
	if !ok {
		return true, nil
	}
	var should bool
	err := c.claimCall(ctx, "qualify", func(ctx context.Context) error {
		should = qualifier.ShouldProvision(ctx, claim)
		return nil
	})
	return should, err
}

// abandonClaim deletes the backend volume of a claim that the informer still
// shows but that no longer wants it (deleteAbandonedVolume), and then removes
// the claim's intent finalizer.
func (c *Controller) abandonClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) error {
	if err := c.deleteAbandonedVolume(ctx, claim, volume); err != nil {
		return err
	}
	_, err := c.removeClaimFinalizer(ctx, claim)
	return err
}

// deleteAbandonedVolume deletes the backend volume a claim that no longer
// wants it may have, unless a PersistentVolume took it over. Without the
// volume Provision returned, a Reclaimer's record or else the claim tells
// what to delete.
func (c *Controller) deleteAbandonedVolume(ctx context.Context, claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) error {
	saved, err := c.savedVolume(ctx, volumeNameFor(claim))
	if err != nil {
		return err
	}
	switch {
	case saved != nil:
	case volume == nil && c.reclaimer != nil:
		// The backend's record knows what it made, if anything.
		c.reclaimSoon()
	default:
		if volume == nil {
			volume = c.recoveredVolume(claim)
		}
		err := c.deleteBackend(ctx, volume)
		if err != nil && !IsIgnoredError(err) {
			err = fmt.Errorf("cannot delete the backend volume %q of an abandoned claim: %w", volume.Name, err)
			c.recorder.Event(claim, corev1.EventTypeWarning, EventVolumeFailedDelete, err.Error())
			return err
		}
		klog.FromContext(ctx).Info("Deleted the backend volume of an abandoned claim", "volume", volume.Name)
	}
	return nil
}

// recoveredVolume rebuilds, from the claim alone, the PersistentVolume a
// backend may have provisioned for it, to hand to Provisioner.Delete.
func (c *Controller) recoveredVolume(claim *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	volume := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        volumeNameFor(claim),
			Annotations: map[string]string{AnnDynamicallyProvisioned: c.name},
		},
		Spec: corev1.PersistentVolumeSpec{
			ClaimRef:                      claimRef(claim),
			StorageClassName:              claimClassName(claim),
			AccessModes:                   claim.Spec.AccessModes,
			VolumeMode:                    claim.Spec.VolumeMode,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
		},
	}
	if size, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		volume.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	}
	if class, err := c.classOf(claim); err == nil {
		volume.Spec.MountOptions = class.MountOptions
		if class.ReclaimPolicy != nil {
			volume.Spec.PersistentVolumeReclaimPolicy = *class.ReclaimPolicy
		}
	}
	return volume
}
