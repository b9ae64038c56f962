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
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// provisionFunc is one provision operation on a claim, which work follows
// across the calls of a provisioning in the background. It returns the
// claim as last written and how far the backend got.
type provisionFunc func(ctx context.Context, claim *corev1.PersistentVolumeClaim, work *background) (*corev1.PersistentVolumeClaim, ProvisioningState, error)

// background is a provisioning that may go on in the background, kept in
// the claims-in-progress set between its calls.
type background struct {
	// claim is the claim as last written, for the calls after it is gone.
	claim *corev1.PersistentVolumeClaim
	// since is when the provisioning began: its duration counts from then.
	since time.Time
	// clone is the source checked when the provisioning began.
	clone *CloneSource
	// attempt tells that the backend was asked for a volume the claim
	// wants, which the metrics count: an operation that found nothing to
	// provision, or finished for an abandoned claim, is no attempt.
	attempt bool
}

// provisionClaim runs one provision operation, records its metrics and keeps
// the claims-in-progress set, and returns the claim's last resource version.
// A call that leaves the provisioning in the background is not counted: the
// provisioning is counted once, when it ends.
func (c *Controller) provisionClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, provision provisionFunc) (string, error) {
	work := &background{since: time.Now()}
	if obj, ok := c.inProgress.Load(claim.UID); ok {
		continued := *obj.(*background)
		work = &continued
	}
	latest, state, err := provision(ctx, claim, work)
	switch {
	case err == nil || state == ProvisioningFinished:
		c.inProgress.Delete(claim.UID)
	case state == ProvisioningInBackground:
		work.claim = latest
		c.inProgress.Store(claim.UID, work)
		return latest.ResourceVersion, err
	}
	if _, still := c.inProgress.Load(claim.UID); !still && work.clone != nil {
		c.copyEnded(work.clone.Volume.Name)
	}
	if work.attempt || err != nil {
		var source string
		if ref := dataSourceOf(claim); ref != nil {
			source = ref.Kind
		}
		c.metrics.observeProvision(c.name, claimClassName(claim), source, work.since, err)
	}
	return latest.ResourceVersion, err
}

// provisionOperation provisions a volume for a claim that wants one and
// saves its PersistentVolume.
func (c *Controller) provisionOperation(ctx context.Context, t *term, claim *corev1.PersistentVolumeClaim, work *background) (*corev1.PersistentVolumeClaim, ProvisioningState, error) {
	claim, done, err := c.skipProvisioning(ctx, t, claim)
	if done {
		return claim, ProvisioningFinished, err
	}
	options, state, err := c.provisionOptions(ctx, claim)
	if options == nil {
		return claim, state, err
	}
	if err := c.admitClone(ctx, options, work); err != nil {
		return claim, ProvisioningNoChange, err
	}
	if claim, err = c.recordIntent(ctx, claim); err != nil {
		return claim, ProvisioningNoChange, err
	}
	options.PVC = claim
	defer c.markProvisioning(options.PVName)()
	work.attempt = true
	volume, state, err := c.provisionVolume(ctx, *options)
	if err != nil || state == ProvisioningReschedule {
		return c.provisionFailed(ctx, claim, state, err)
	}
	klog.FromContext(ctx).Info("Backend provisioned a volume", "volume", options.PVName)
	c.fillVolume(volume, claim, options.StorageClass)
	return c.saveVolume(ctx, t, claim, volume)
}

// admitClone sets the source of a clone in options, checked when its
// provisioning begins; a refusal is a Warning Event on the claim, and the
// claim is tried again with the backoff of other failures, since its source
// may yet exist or be bound. A provisioning that goes on in the background
// keeps the source it began with, so that a source deleted since cannot
// leave it unfinished, and the backend volume of that source is kept until
// it ends (copies).
func (c *Controller) admitClone(ctx context.Context, options *ProvisionOptions, work *background) error {
	if work.clone == nil {
		clone, err := c.cloneSourceOf(options)
		if err != nil {
			c.recorder.Event(options.PVC, corev1.EventTypeWarning, EventProvisioningFailed, err.Error())
			klog.FromContext(ctx).Info("Cannot provision", "reason", err)
			return err
		}
		if clone != nil {
			c.copies.begin(clone.Volume.Name)
		}
		work.clone = clone
	}
	options.CloneSource = work.clone
	return nil
}

// skipProvisioning reports whether there is nothing to provision for a claim
// that wants a volume (done): its PersistentVolume exists or is being saved,
// the backend cannot make it, or a volume populator will. It returns the
// claim as last written.
func (c *Controller) skipProvisioning(ctx context.Context, t *term, claim *corev1.PersistentVolumeClaim) (_ *corev1.PersistentVolumeClaim, done bool, _ error) {
	logger := klog.FromContext(ctx)
	pvName := volumeNameFor(claim)
	// Only the informer is asked: a PersistentVolume it has not seen yet
	// is found when its creation meets AlreadyExists (createVolume).
	if _, exists, err := c.informers.Volumes.GetStore().GetByKey(pvName); err == nil && exists {
		logger.V(4).Info("PersistentVolume exists already", "volume", pvName)
		claim, err := c.removeClaimFinalizer(ctx, claim)
		return claim, true, err
	}
	if _, saving := t.pending.Load(pvName); saving {
		return claim, true, nil
	}
	if err := errors.Join(checkSelector(claim), c.checkBlock(ctx, claim)); err != nil {
		c.recorder.Event(claim, corev1.EventTypeWarning, EventProvisioningFailed, err.Error())
		logger.Info("Cannot provision", "reason", err)
		return claim, true, nil
	}
	source := dataSourceOf(claim)
	populated, err := c.checkDataSource(ctx, source)
	if err != nil {
		c.recorder.Event(claim, corev1.EventTypeWarning, EventProvisioningFailed, err.Error())
		logger.Info("Cannot provision", "reason", err)
		return claim, true, nil
	}
	if populated {
		c.recorder.Eventf(claim, corev1.EventTypeNormal, EventProvisioning, "Leaving the volume to the populator of %s", describeSource(source))
		logger.V(2).Info("Leaving the claim to a volume populator", "dataSource", describeSource(source))
		return claim, true, nil
	}
	return claim, false, nil
}

// provisionOptions gathers what Provision is told about a claim. Without
// options, the claim is not this provisioner's or cannot be provisioned yet,
// as state and err say.
func (c *Controller) provisionOptions(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*ProvisionOptions, ProvisioningState, error) {
	class, err := c.classOf(claim)
	if err != nil {
		return nil, ProvisioningFinished, err
	}
	if !c.config().KnownName(class.Provisioner) {
		klog.FromContext(ctx).Info("StorageClass names another provisioner", "class", class.Name, "classProvisioner", class.Provisioner)
		return nil, ProvisioningFinished, nil
	}
	options := &ProvisionOptions{
		StorageClass: class, PVName: volumeNameFor(claim), PVC: claim, DataSource: dataSourceOf(claim),
		Eventf: func(eventType, reason, messageFmt string, args ...any) {
			c.recorder.Eventf(claim, eventType, reason, messageFmt, args...)
		},
		Annotate: func(ctx context.Context, volume *corev1.PersistentVolume, annotations map[string]string) error {
			_, err := c.patchAnnotations(ctx, volume, annotations)
			return err
		},
		Wake: func() { c.wake(keyOfClaim(claim)) },
	}
	if nodeName := claim.Annotations[AnnSelectedNode]; nodeName != "" {
		obj, exists, err := c.informers.Nodes.GetStore().GetByKey(nodeName)
		if err != nil || !exists {
			err = fmt.Errorf("cannot find selected node %q: %w", nodeName, errors.Join(err, errNotFound))
			c.recorder.Event(claim, corev1.EventTypeWarning, EventProvisioningFailed, err.Error())
			return nil, ProvisioningNoChange, err
		}
		options.SelectedNode = obj.(*corev1.Node)
	}
	return options, ProvisioningFinished, nil
}

// recordIntent records, before the backend is asked, that a backend volume
// may come for the claim: without a backend record, the intent finalizer is
// on the claim before any backend volume can exist. The first try, not a
// retry, announces the provisioning with an Event.
func (c *Controller) recordIntent(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	var retry bool
	if c.reclaimer != nil {
		retry = c.claimRetries.Failing(keyOfClaim(claim))
	} else {
		retry = hasFinalizer(claim, c.finalizer)
		var err error
		if claim, err = c.addClaimFinalizer(ctx, claim); err != nil {
			return claim, err
		}
	}
	if !retry {
		c.recorder.Eventf(claim, corev1.EventTypeNormal, EventProvisioning, "External provisioner %s is provisioning a volume for claim %s/%s", c.name, claim.Namespace, claim.Name)
	}
	return claim, nil
}

// markProvisioning keeps reclaim from taking the backend volume of name for
// an orphan until the PersistentVolume is saved: until the returned function
// is called.
func (c *Controller) markProvisioning(name string) (unmark func()) {
	c.provisioning.Store(name, struct{}{})
	return func() { c.provisioning.Delete(name) }
}

// provisionVolume asks the backend for a volume.
func (c *Controller) provisionVolume(ctx context.Context, options ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error) {
	var volume *corev1.PersistentVolume
	state := ProvisioningFinished
	err := c.claimCall(ctx, "provision", func(ctx context.Context) error {
		var err error
		volume, state, err = c.provisioner.Provision(ctx, options)
		return err
	})
	// A refusal for want of room is an answer: the backend is reachable.
	if err != nil && !IsIgnoredError(err) && !errors.Is(err, ErrNoRoom) {
		c.probeSoon()
	}
	if err == nil && volume == nil {
		err = errors.New("backend returned no PersistentVolume")
	}
	return volume, state, err
}

// fillVolume sets what the controller, not the backend, decides about the
// PersistentVolume of a provisioned volume: its name, claim, class,
// provisioner annotation and finalizer.
func (c *Controller) fillVolume(volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) {
	volume.Name = volumeNameFor(claim)
	volume.Spec.ClaimRef = claimRef(claim)
	volume.Spec.StorageClassName = class.Name
	metav1.SetMetaDataAnnotation(&volume.ObjectMeta, AnnDynamicallyProvisioned, c.name)
	if c.config().Finalizer && !hasFinalizer(volume, VolumeFinalizer) {
		volume.Finalizers = append(volume.Finalizers, VolumeFinalizer)
	}
}

var errNotFound = errors.New("not found")

// provisionFailed handles a failed or rescheduled Provision call.
func (c *Controller) provisionFailed(ctx context.Context, claim *corev1.PersistentVolumeClaim, state ProvisioningState, err error) (*corev1.PersistentVolumeClaim, ProvisioningState, error) {
	if IsIgnoredError(err) {
		klog.FromContext(ctx).V(2).Info("Backend ignored the claim", "reason", err)
		claim, err := c.removeClaimFinalizer(ctx, claim)
		return claim, ProvisioningFinished, err
	}
	if state == ProvisioningReschedule {
		if err == nil {
			err = errors.New("backend cannot use the selected node")
		}
		updated, rerr := Reschedule(ctx, c.client, claim)
		switch {
		case errors.Is(rerr, ErrSelectionChanged):
			// The scheduler chose again: the claim's next sync tries there.
		case errors.Is(rerr, ErrRescheduleLimit):
			c.recorder.Eventf(claim, corev1.EventTypeWarning, EventRescheduleLimit,
				"%v; the claim was sent back to the scheduler %d times already, the most it is: it waits until its selected node is removed by hand", err, MaxReschedules)
		default:
			c.recorder.Eventf(claim, corev1.EventTypeWarning, EventProvisioningFailed, "Rescheduling: %v", err)
		}
		return updated, ProvisioningFinished, errors.Join(err, rerr)
	}
	if state == ProvisioningInBackground {
		// Work under way, such as a copy, is no failure to warn of.
		c.recorder.Eventf(claim, corev1.EventTypeNormal, EventProvisioning, "The volume is still being made: %v", err)
		return claim, state, err
	}
	err = fmt.Errorf("cannot provision a volume with StorageClass %q: %w", claimClassName(claim), err)
	c.recorder.Event(claim, corev1.EventTypeWarning, EventProvisioningFailed, err.Error())
	return claim, state, err
}

// finishForAbandonedClaim continues a background provisioning of a claim that
// the informer shows being deleted or bound elsewhere: whatever the backend
// made is deleted, then the intent finalizer removed.
func (c *Controller) finishForAbandonedClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, work *background) (*corev1.PersistentVolumeClaim, ProvisioningState, error) {
	return c.finishAbandoned(ctx, claim, work, c.abandonClaim)
}

// finishForGoneClaim continues a background provisioning of a claim that is
// gone: whatever the backend made is deleted; a claim that is gone has no
// finalizer to remove.
func (c *Controller) finishForGoneClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, work *background) (*corev1.PersistentVolumeClaim, ProvisioningState, error) {
	return c.finishAbandoned(ctx, claim, work, c.deleteAbandonedVolume)
}

// finishAbandoned continues a background provisioning of a claim that no
// longer wants its volume, telling the backend so (Abandoned) that it can
// stop rather than finish: once the backend is done, abandon deletes
// whatever it made.
func (c *Controller) finishAbandoned(ctx context.Context, claim *corev1.PersistentVolumeClaim, work *background,
	abandon func(context.Context, *corev1.PersistentVolumeClaim, *corev1.PersistentVolume) error) (*corev1.PersistentVolumeClaim, ProvisioningState, error) {
	options, state, err := c.provisionOptions(ctx, claim)
	if options == nil {
		return claim, state, err
	}
	options.Abandoned = true
	options.CloneSource = work.clone
	work.attempt = false
	unmark := c.markProvisioning(options.PVName)
	volume, state, err := c.provisionVolume(ctx, *options)
	// Once the backend answered, what it made is not to be saved: a reclaim
	// that abandon asks for must not find it still marked and keep it.
	unmark()
	if err != nil && (state == ProvisioningInBackground || state == ProvisioningNoChange) {
		return claim, state, err
	}
	if volume != nil {
		volume.Name = options.PVName
	}
	return claim, ProvisioningFinished, abandon(ctx, claim, volume)
}

// checkSelector refuses a claim with a selector, as external-provisioner
// and local-path-provisioner do: a selector picks among volumes made
// beforehand, and a volume provisioned for the claim would not honour it.
func checkSelector(claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.Selector == nil {
		return nil
	}
	return errors.New("the claim has a spec.selector, which picks among volumes made beforehand: a volume provisioned for it would not match it; " +
		"remove the selector, or make a volume that matches it by hand")
}

func (c *Controller) checkBlock(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeMode == nil || *claim.Spec.VolumeMode != corev1.PersistentVolumeBlock {
		return nil
	}
	supports := false
	if block, ok := c.provisioner.(BlockProvisioner); ok {
		if err := c.claimCall(ctx, "supportsBlock", func(ctx context.Context) error {
			supports = block.SupportsBlock(ctx)
			return nil
		}); err != nil {
			return err
		}
	}
	if !supports {
		return fmt.Errorf("%s does not support block volume provisioning", c.name)
	}
	return nil
}

func (c *Controller) classOf(claim *corev1.PersistentVolumeClaim) (*storagev1.StorageClass, error) {
	return classIn(c.informers.Classes.GetStore(), claimClassName(claim))
}

// classIn returns the StorageClass name from store, a class informer's.
func classIn(store cache.Store, name string) (*storagev1.StorageClass, error) {
	obj, exists, err := store.GetByKey(name)
	if err != nil {
		return nil, fmt.Errorf("cannot get StorageClass %q: %w", name, err)
	}
	if !exists {
		return nil, fmt.Errorf("cannot get StorageClass %q: %w", name, errNotFound)
	}
	class, ok := obj.(*storagev1.StorageClass)
	if !ok {
		return nil, fmt.Errorf("cannot use StorageClass %q of type %T", name, obj)
	}
	return class, nil
}

// wake queues the claim of key at once, rather than after its backoff: its
// backend's work in the background ended. Without a term there is nothing
// to queue: the next term lists every claim.
func (c *Controller) wake(key claimKey) {
	c.mu.Lock()
	t := c.term
	c.mu.Unlock()
	if t != nil {
		t.claims.queue.Add(key)
	}
}
