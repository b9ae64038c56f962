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
	"errors"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// savedVolume returns the PersistentVolume name, or nil if there is none. It
// looks in the informer first and asks the API only when the informer has not
// seen the volume, since it may lag behind.
func (c *Controller) savedVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	if obj, exists, err := c.informers.Volumes.GetStore().GetByKey(name); err == nil && exists {
		if volume, ok := obj.(*corev1.PersistentVolume); ok {
			return volume, nil
		}
	}
	volume, err := c.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return volume, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	default:
		return nil, fmt.Errorf("cannot get PersistentVolume %q: %w", name, err)
	}
}

// saveVolume creates the PersistentVolume of a provisioned backend volume with
// the configured store.
func (c *Controller) saveVolume(ctx context.Context, t *term, claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, ProvisioningState, error) {
	cfg := c.config().VolumeSave
	if cfg.Mode == VolumeSaveRetryForever {
		t.pending.Store(volume.Name, pendingSave{claim: claim, volume: volume})
		t.saves.Add(volume.Name)
		return claim, ProvisioningFinished, nil
	}
	var saved *corev1.PersistentVolume
	var lastErr error
	tries := 0
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: cfg.Interval, Factor: 1, Steps: cfg.Retries},
		func(ctx context.Context) (bool, error) {
			if tries++; tries > 1 {
				if err := c.stillWanted(ctx, volume); err != nil {
					return false, err
				}
			}
			saved, lastErr = c.createVolume(ctx, volume)
			if errors.Is(lastErr, errVolumeTaken) {
				return false, lastErr
			}
			return lastErr == nil, nil
		})
	if ctx.Err() != nil {
		// Stopping: the claim's intent finalizer lets the next leader finish.
		return claim, ProvisioningFinished, fmt.Errorf("cannot save PersistentVolume %q: %w", volume.Name, ctx.Err())
	}
	if errors.Is(err, errNotWanted) {
		// The claim's next sync and the reclaim of the backend's record
		// settle the backend volume.
		c.reclaimSoon()
		return claim, ProvisioningFinished, err
	}
	if errors.Is(err, errVolumeTaken) {
		// The backend volume may well be the one the other PersistentVolume
		// uses: it is left alone, and so is the claim's intent finalizer.
		c.recorder.Event(claim, corev1.EventTypeWarning, EventProvisioningFailed, err.Error())
		return claim, ProvisioningFinished, err
	}
	if err != nil {
		err = fmt.Errorf("cannot save PersistentVolume %q after %d tries: %w", volume.Name, cfg.Retries, lastErr)
		c.recorder.Eventf(claim, corev1.EventTypeWarning, EventProvisioningFailed, "%v; deleting the backend volume", err)
		if derr := c.deleteBackend(ctx, volume); derr != nil && !IsIgnoredError(derr) {
			derr = fmt.Errorf("cannot delete backend volume %q: %w", volume.Name, derr)
			c.recorder.Event(claim, corev1.EventTypeWarning, EventCleanupFailed, derr.Error())
			err = errors.Join(err, derr)
		}
		return claim, ProvisioningFinished, err
	}
	return c.volumeSaved(ctx, claim, volume, saved)
}

// errVolumeTaken means that the PersistentVolume name of a claim is taken by a
// volume of another claim.
var errVolumeTaken = errors.New("the name is taken by a PersistentVolume of another claim")

// errNotWanted means that a claim whose PersistentVolume failed to save was
// deleted, or bound to another volume, before a retry.
var errNotWanted = errors.New("its claim no longer wants it")

// stillWanted fails with errNotWanted unless the claim volume was made for
// still wants it, as the API says: a create whose reply was lost may have
// made the PersistentVolume, which the claim's deletion then deleted, and
// creating it again would provision the claim a second time, after its
// end. The informer is not asked: it may not have seen the deletion yet.
func (c *Controller) stillWanted(ctx context.Context, volume *corev1.PersistentVolume) error {
	ref := volume.Spec.ClaimRef
	claim, err := c.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("cannot save PersistentVolume %q: %w (it is gone)", volume.Name, errNotWanted)
	case err != nil:
		// The create's own retry tells.
		return nil
	case !wants(claim, volume):
		return fmt.Errorf("cannot save PersistentVolume %q: %w", volume.Name, errNotWanted)
	}
	return nil
}

// createVolume creates the PersistentVolume of a provisioned backend volume
// and returns it as saved. One that exists already and is bound to the same
// claim was saved by an earlier attempt that the informer had not shown yet.
// If its source differs, the backend volume may be a second one for the
// claim or the same one described otherwise: only a Reclaimer can tell
// (volumeSaved), and Delete is never handed a volume whose name a
// PersistentVolume uses, so other backends keep it.
func (c *Controller) createVolume(ctx context.Context, volume *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	api := c.client.CoreV1().PersistentVolumes()
	created, err := api.Create(ctx, volume, metav1.CreateOptions{})
	if err == nil {
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		klog.FromContext(ctx).Info("Cannot save PersistentVolume", "volume", volume.Name, "err", err)
		return nil, err
	}
	saved, err := api.Get(ctx, volume.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot get the existing PersistentVolume %q: %w", volume.Name, err)
	}
	if saved.Spec.ClaimRef == nil || saved.Spec.ClaimRef.UID != volume.Spec.ClaimRef.UID {
		return nil, fmt.Errorf("cannot save PersistentVolume %q: %w", volume.Name, errVolumeTaken)
	}
	if c.reclaimer != nil {
		// Its Saved settles a second backend volume.
		return saved, nil
	}
	same, err := sameSource(saved.Spec.PersistentVolumeSource, volume.Spec.PersistentVolumeSource)
	if err != nil {
		return nil, err
	}
	if !same {
		klog.FromContext(ctx).Info("Keeping a backend volume whose source differs from its saved PersistentVolume's: the backend cannot tell whether it is a second one", "volume", volume.Name)
	}
	return saved, nil
}

// volumeSaved finishes a claim whose PersistentVolume, saved, exists for the
// backend volume that Provision returned as volume.
func (c *Controller) volumeSaved(ctx context.Context, claim *corev1.PersistentVolumeClaim, volume, saved *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, ProvisioningState, error) {
	klog.FromContext(ctx).Info("Provisioned", "volume", volume.Name)
	c.recorder.Eventf(claim, corev1.EventTypeNormal, EventProvisioningSucceeded, "Successfully provisioned volume %s", volume.Name)
	if c.reclaimer != nil {
		if _, err := c.savedVolumeOf(ctx, volume, saved); err != nil {
			// The next reclaim finds the PersistentVolume and tries again.
			klog.FromContext(ctx).Info("Cannot tell the backend that the volume is saved", "volume", volume.Name, "err", err)
		}
	}
	claim, err := c.removeClaimFinalizer(ctx, claim)
	return claim, ProvisioningFinished, err
}

// pendingSave is a PersistentVolume of the RetryForever store.
type pendingSave struct {
	claim  *corev1.PersistentVolumeClaim
	volume *corev1.PersistentVolume
}

// saveVolumeAgain tries to save one PersistentVolume of the RetryForever
// store, which keeps trying and never deletes the backend volume.
func (c *Controller) saveVolumeAgain(ctx context.Context, t *term, name string) {
	obj, ok := t.pending.Load(name)
	if !ok || ctx.Err() != nil {
		return
	}
	p := obj.(pendingSave)
	// After a failed try, the claim may have gone meanwhile.
	if t.saves.NumRequeues(name) > 0 {
		if err := c.stillWanted(ctx, p.volume); err != nil {
			klog.FromContext(ctx).Info("Stopped saving a PersistentVolume", "volume", name, "err", err)
			t.saves.Forget(name)
			t.pending.Delete(name)
			c.reclaimSoon()
			t.claims.queue.Add(keyOfClaim(p.claim))
			return
		}
	}
	saved, err := c.createVolume(ctx, p.volume)
	if err != nil {
		t.saves.AddRateLimited(name)
		return
	}
	t.saves.Forget(name)
	t.pending.Delete(name)
	if _, _, err := c.volumeSaved(ctx, p.claim, p.volume, saved); err != nil {
		// The claim is looked at again and finds its volume.
		klog.FromContext(ctx).Info("Cannot update claim after saving its volume", "claim", klog.KObj(p.claim), "err", err)
		t.claims.queue.Add(keyOfClaim(p.claim))
	}
}

// sameSource reports whether made, a volume source as a backend returns it,
// is the source saved, as the API server stored it with its defaults: every
// field that made sets has the same value in saved.
func sameSource(saved, made corev1.PersistentVolumeSource) (bool, error) {
	var s, m any
	for _, c := range []struct {
		from corev1.PersistentVolumeSource
		to   *any
	}{{saved, &s}, {made, &m}} {
		data, err := json.Marshal(c.from)
		if err == nil {
			err = json.Unmarshal(data, c.to)
		}
		if err != nil {
			return false, fmt.Errorf("cannot compare volume sources: %w", err)
		}
	}
	return jsonSubset(m, s), nil
}

// jsonSubset reports whether the decoded JSON part is whole but for fields of
// objects that whole has and part has not.
func jsonSubset(part, whole any) bool {
	p, ok := part.(map[string]any)
	if !ok {
		return reflect.DeepEqual(part, whole)
	}
	w, ok := whole.(map[string]any)
	if !ok {
		return false
	}
	for key, value := range p {
		if !jsonSubset(value, w[key]) {
			return false
		}
	}
	return true
}
