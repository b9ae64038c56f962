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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

const (
	annStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	annBetaStorageClass       = "volume.beta.kubernetes.io/storage-class"
	annSelectedNode           = "volume.kubernetes.io/selected-node"
	annDynamicallyProvisioned = "pv.kubernetes.io/provisioned-by"

	// VolumeFinalizer keeps a provisioned PersistentVolume until its backend
	// volume was deleted (Config.Finalizer).
	VolumeFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"
)

// Event reasons.
const (
	EventProvisioning          = "Provisioning"
	EventProvisioningFailed    = "ProvisioningFailed"
	EventProvisioningSucceeded = "ProvisioningSucceeded"
	EventCleanupFailed         = "ProvisioningCleanupFailed"
	EventVolumeFailedDelete    = "VolumeFailedDelete"
)

// IntentFinalizer returns the claim finalizer with which a provisioner whose
// backend is no Reclaimer records, before asking its backend for a volume,
// that a backend volume may exist for the claim. It is removed once the
// PersistentVolume exists or the backend volume was deleted, so a volume is
// never leaked even if the process dies in between.
func IntentFinalizer(provisionerName string) string {
	const prefix = "provfleet.io/"
	name := "provisioning-" + strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '-'
	}, provisionerName)
	if len(validation.IsQualifiedName(prefix+name)) > 0 {
		sum := sha256.Sum256([]byte(provisionerName))
		name = "provisioning-" + hex.EncodeToString(sum[:8])
	}
	return prefix + name
}

// volumeNameFor is the deterministic name of a claim's PersistentVolume.
func volumeNameFor(claim *v1.PersistentVolumeClaim) string {
	return "pvc-" + string(claim.UID)
}

func storageProvisioner(claim *v1.PersistentVolumeClaim) string {
	if name, ok := claim.Annotations[annStorageProvisioner]; ok {
		return name
	}
	return claim.Annotations[annBetaStorageProvisioner]
}

func claimClassName(claim *v1.PersistentVolumeClaim) string {
	if claim.Spec.StorageClassName != nil {
		return *claim.Spec.StorageClassName
	}
	return claim.Annotations[annBetaStorageClass]
}

// lookupClaim finds the claim of key in the informer, or else among the
// claims in progress; live tells which.
func (c *Controller) lookupClaim(key claimKey) (claim *v1.PersistentVolumeClaim, live bool) {
	obj, exists, err := c.informers.Claims.GetStore().GetByKey(key.Namespace + "/" + key.Name)
	if err == nil && exists {
		if claim, ok := obj.(*v1.PersistentVolumeClaim); ok && claim.UID == key.UID {
			return claim, true
		}
	}
	if obj, ok := c.inProgress.Load(key.UID); ok {
		return obj.(*v1.PersistentVolumeClaim), false
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
	gone := abandoned(claim, live)
	switch {
	case gone && inProgress:
		return c.provisionClaim(ctx, t, claim, live)
	case gone:
		if live && hasFinalizer(claim, c.finalizer) {
			return claim.ResourceVersion, c.abandonClaim(ctx, claim, nil, true)
		}
		return claim.ResourceVersion, nil
	case claim.Spec.VolumeName != "":
		claim, err := c.setClaimFinalizer(ctx, claim, false)
		return claim.ResourceVersion, err
	}
	should, err := c.shouldProvision(ctx, claim)
	if err != nil || !should {
		return claim.ResourceVersion, err
	}
	return c.provisionClaim(ctx, t, claim, true)
}

// abandoned reports whether a claim no longer wants the volume made for it:
// it is gone, being deleted, or bound to another PersistentVolume.
func abandoned(claim *v1.PersistentVolumeClaim, live bool) bool {
	return !live || claim.DeletionTimestamp != nil ||
		(claim.Spec.VolumeName != "" && claim.Spec.VolumeName != volumeNameFor(claim))
}

// shouldProvision reports whether a volume is wanted for claim from this
// provisioner.
func (c *Controller) shouldProvision(ctx context.Context, claim *v1.PersistentVolumeClaim) (bool, error) {
	if claim.Spec.VolumeName != "" || !c.knownName(storageProvisioner(claim)) {
		return false, nil
	}
	// The scheduler chooses where a WaitForFirstConsumer volume goes, and
	// chooses again once a backend asked to reschedule: until then there is
	// nothing to provision. A class not seen yet fails the provisioning.
	if class, err := c.classOf(claim); err == nil && claim.Annotations[annSelectedNode] == "" &&
		class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
		return false, nil
	}
	qualifier, ok := c.provisioner.(Qualifier)
	if !ok {
		return true, nil
	}
	var should bool
	err := c.guard(ctx, "qualify", func(ctx context.Context) error {
		should = qualifier.ShouldProvision(ctx, claim)
		return nil
	})
	return should, err
}

// provisionClaim runs one provision operation, records its metrics and keeps
// the claims-in-progress set, and returns the claim's last resource version.
func (c *Controller) provisionClaim(ctx context.Context, t *term, claim *v1.PersistentVolumeClaim, live bool) (string, error) {
	start := time.Now()
	latest, state, err := c.provisionOperation(ctx, t, claim, live)
	var source string
	if claim.Spec.DataSource != nil {
		source = claim.Spec.DataSource.Kind
	}
	c.metrics.observeProvision(c.name, claimClassName(claim), source, start, err)
	switch {
	case err == nil || state == ProvisioningFinished:
		c.inProgress.Delete(claim.UID)
	case state == ProvisioningInBackground:
		c.inProgress.Store(claim.UID, latest)
	}
	return latest.ResourceVersion, err
}

func (c *Controller) provisionOperation(ctx context.Context, t *term, claim *v1.PersistentVolumeClaim, live bool) (*v1.PersistentVolumeClaim, ProvisioningState, error) {
	logger := klog.FromContext(ctx)
	gone := abandoned(claim, live)
	pvName := volumeNameFor(claim)
	source := dataSourceOf(claim)
	if !gone {
		// Only the informer is asked: a PersistentVolume it has not seen yet
		// is found when its creation meets AlreadyExists (createVolume).
		if _, exists, err := c.informers.Volumes.GetStore().GetByKey(pvName); err == nil && exists {
			logger.V(4).Info("PersistentVolume exists already", "volume", pvName)
			claim, err := c.setClaimFinalizer(ctx, claim, false)
			return claim, ProvisioningFinished, err
		}
		if _, saving := t.pending.Load(pvName); saving {
			return claim, ProvisioningFinished, nil
		}
		if err := c.checkBlock(ctx, claim); err != nil {
			c.recorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, err.Error())
			logger.Info("Cannot provision", "reason", err)
			return claim, ProvisioningFinished, nil
		}
		populated, err := c.checkDataSource(ctx, source)
		if err != nil {
			c.recorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, err.Error())
			logger.Info("Cannot provision", "reason", err)
			return claim, ProvisioningFinished, nil
		}
		if populated {
			c.recorder.Eventf(claim, v1.EventTypeNormal, EventProvisioning, "Leaving the volume to the populator of %s", describeSource(source))
			logger.V(2).Info("Leaving the claim to a volume populator", "dataSource", describeSource(source))
			return claim, ProvisioningFinished, nil
		}
	}
	class, err := c.classOf(claim)
	if err != nil {
		return claim, ProvisioningFinished, err
	}
	if !c.knownName(class.Provisioner) {
		logger.Info("StorageClass names another provisioner", "class", class.Name, "classProvisioner", class.Provisioner)
		return claim, ProvisioningFinished, nil
	}
	options := ProvisionOptions{StorageClass: class, PVName: pvName, PVC: claim, DataSource: source}
	if nodeName := claim.Annotations[annSelectedNode]; nodeName != "" {
		obj, exists, err := c.informers.Nodes.GetStore().GetByKey(nodeName)
		if err != nil || !exists {
			err = fmt.Errorf("cannot find selected node %q: %w", nodeName, errors.Join(err, errNotFound))
			c.recorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, err.Error())
			return claim, ProvisioningNoChange, err
		}
		options.SelectedNode = obj.(*v1.Node)
	}
	if !gone {
		// Without a backend record, the intent is on the claim before any
		// backend volume can exist. A retry announces nothing new.
		var retry bool
		if c.reclaimer != nil {
			retry = c.claimRetries.Failing(keyOfClaim(claim))
		} else {
			retry = hasFinalizer(claim, c.finalizer)
			if claim, err = c.setClaimFinalizer(ctx, claim, true); err != nil {
				return claim, ProvisioningNoChange, err
			}
			options.PVC = claim
		}
		if !retry {
			c.recorder.Eventf(claim, v1.EventTypeNormal, EventProvisioning, "External provisioner %s is provisioning a volume for claim %s/%s", c.name, claim.Namespace, claim.Name)
		}
	}

	// Until the PersistentVolume is saved, reclaim must not take the backend
	// volume for an orphan.
	c.provisioning.Store(pvName, struct{}{})
	defer c.provisioning.Delete(pvName)
	var volume *v1.PersistentVolume
	state := ProvisioningFinished
	err = c.guard(ctx, "provision", func(ctx context.Context) error {
		var err error
		volume, state, err = c.provisioner.Provision(ctx, options)
		return err
	})
	if err == nil && volume == nil {
		err = errors.New("backend returned no PersistentVolume")
	}
	if gone {
		return c.finishGone(ctx, claim, live, volume, state, err)
	}
	if err != nil || state == ProvisioningReschedule {
		return c.provisionFailed(ctx, claim, state, err)
	}
	logger.Info("Backend provisioned a volume", "volume", pvName)
	volume.Name = pvName
	volume.Spec.ClaimRef = claimRef(claim)
	volume.Spec.StorageClassName = class.Name
	metav1.SetMetaDataAnnotation(&volume.ObjectMeta, annDynamicallyProvisioned, c.name)
	if c.config().Finalizer && !hasFinalizer(volume, VolumeFinalizer) {
		volume.Finalizers = append(volume.Finalizers, VolumeFinalizer)
	}
	return c.saveVolume(ctx, t, claim, volume)
}

var errNotFound = errors.New("not found")

// provisionFailed handles a failed or rescheduled Provision call.
func (c *Controller) provisionFailed(ctx context.Context, claim *v1.PersistentVolumeClaim, state ProvisioningState, err error) (*v1.PersistentVolumeClaim, ProvisioningState, error) {
	if IsIgnoredError(err) {
		klog.FromContext(ctx).V(2).Info("Backend ignored the claim", "reason", err)
		claim, err := c.setClaimFinalizer(ctx, claim, false)
		return claim, ProvisioningFinished, err
	}
	if state == ProvisioningReschedule {
		if err == nil {
			err = errors.New("backend cannot use the selected node")
		}
		c.recorder.Eventf(claim, v1.EventTypeWarning, EventProvisioningFailed, "Rescheduling: %v", err)
		updated, uerr := c.updateClaim(ctx, claim, func(claim *v1.PersistentVolumeClaim) bool {
			if _, ok := claim.Annotations[annSelectedNode]; !ok {
				return false
			}
			delete(claim.Annotations, annSelectedNode)
			return true
		})
		return updated, ProvisioningFinished, errors.Join(err, uerr)
	}
	err = fmt.Errorf("cannot provision a volume with StorageClass %q: %w", claimClassName(claim), err)
	c.recorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, err.Error())
	return claim, state, err
}

// finishGone continues a background provisioning of a claim that is gone,
// being deleted or bound elsewhere: once the backend is done, whatever it made
// is deleted.
func (c *Controller) finishGone(ctx context.Context, claim *v1.PersistentVolumeClaim, live bool, volume *v1.PersistentVolume, state ProvisioningState, err error) (*v1.PersistentVolumeClaim, ProvisioningState, error) {
	if err != nil && (state == ProvisioningInBackground || state == ProvisioningNoChange) {
		return claim, state, err
	}
	if volume != nil {
		volume.Name = volumeNameFor(claim)
	}
	return claim, ProvisioningFinished, c.abandonClaim(ctx, claim, volume, live)
}

// abandonClaim deletes the backend volume a claim that no longer wants it may
// have, unless a PersistentVolume took it over, and then removes the claim's
// intent finalizer.
func (c *Controller) abandonClaim(ctx context.Context, claim *v1.PersistentVolumeClaim, volume *v1.PersistentVolume, live bool) error {
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
		err := c.guard(ctx, "delete", func(ctx context.Context) error { return c.provisioner.Delete(ctx, volume) })
		if err != nil && !IsIgnoredError(err) {
			err = fmt.Errorf("cannot delete the backend volume %q of an abandoned claim: %w", volume.Name, err)
			c.recorder.Event(claim, v1.EventTypeWarning, EventVolumeFailedDelete, err.Error())
			return err
		}
		klog.FromContext(ctx).Info("Deleted the backend volume of an abandoned claim", "volume", volume.Name)
	}
	if !live {
		return nil
	}
	_, err = c.setClaimFinalizer(ctx, claim, false)
	return err
}

// recoveredVolume rebuilds, from the claim alone, the PersistentVolume a
// backend may have provisioned for it, to hand to Provisioner.Delete.
func (c *Controller) recoveredVolume(claim *v1.PersistentVolumeClaim) *v1.PersistentVolume {
	volume := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        volumeNameFor(claim),
			Annotations: map[string]string{annDynamicallyProvisioned: c.name},
		},
		Spec: v1.PersistentVolumeSpec{
			ClaimRef:                      claimRef(claim),
			StorageClassName:              claimClassName(claim),
			AccessModes:                   claim.Spec.AccessModes,
			VolumeMode:                    claim.Spec.VolumeMode,
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
		},
	}
	if size, ok := claim.Spec.Resources.Requests[v1.ResourceStorage]; ok {
		volume.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: size}
	}
	if class, err := c.classOf(claim); err == nil {
		volume.Spec.MountOptions = class.MountOptions
		if class.ReclaimPolicy != nil {
			volume.Spec.PersistentVolumeReclaimPolicy = *class.ReclaimPolicy
		}
	}
	return volume
}

func claimRef(claim *v1.PersistentVolumeClaim) *v1.ObjectReference {
	return &v1.ObjectReference{
		Kind:            "PersistentVolumeClaim",
		APIVersion:      "v1",
		Namespace:       claim.Namespace,
		Name:            claim.Name,
		UID:             claim.UID,
		ResourceVersion: claim.ResourceVersion,
	}
}

func (c *Controller) checkBlock(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeMode == nil || *claim.Spec.VolumeMode != v1.PersistentVolumeBlock {
		return nil
	}
	supports := false
	if block, ok := c.provisioner.(BlockProvisioner); ok {
		if err := c.guard(ctx, "supportsBlock", func(ctx context.Context) error {
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

// dataSourceOf returns what a claim's volume is to be filled from, with its
// namespace set, or nil. The apiserver copies spec.dataSource into
// spec.dataSourceRef, which alone can name another namespace.
func dataSourceOf(claim *v1.PersistentVolumeClaim) *v1.TypedObjectReference {
	var source *v1.TypedObjectReference
	switch {
	case claim.Spec.DataSourceRef != nil:
		source = claim.Spec.DataSourceRef.DeepCopy()
	case claim.Spec.DataSource != nil:
		ref := claim.Spec.DataSource.DeepCopy()
		source = &v1.TypedObjectReference{APIGroup: ref.APIGroup, Kind: ref.Kind, Name: ref.Name}
	default:
		return nil
	}
	if source.Namespace == nil || *source.Namespace == "" {
		namespace := claim.Namespace
		source.Namespace = &namespace
	}
	return source
}

func sourceKind(source *v1.TypedObjectReference) schema.GroupKind {
	kind := schema.GroupKind{Kind: source.Kind}
	if source.APIGroup != nil {
		kind.Group = *source.APIGroup
	}
	return kind
}

func describeSource(source *v1.TypedObjectReference) string {
	return fmt.Sprintf("%s %s/%s", sourceKind(source), *source.Namespace, source.Name)
}

// checkDataSource refuses a data source the backend cannot fill a volume
// from. A kind that is neither a claim nor a VolumeSnapshot is a volume
// populator's, which provisions through a claim of its own: populated says
// so, and the claim is left to it, as external-provisioner does.
func (c *Controller) checkDataSource(ctx context.Context, source *v1.TypedObjectReference) (populated bool, err error) {
	if source == nil {
		return false, nil
	}
	kind := sourceKind(source)
	supports := false
	if p, ok := c.provisioner.(DataSourceProvisioner); ok {
		if err := c.guard(ctx, "supportsDataSource", func(ctx context.Context) error {
			supports = p.SupportsDataSource(ctx, kind)
			return nil
		}); err != nil {
			return false, err
		}
	}
	switch {
	case supports:
		return false, nil
	case kind.Kind == "PersistentVolumeClaim" || kind.Kind == "VolumeSnapshot":
		return false, fmt.Errorf("%s cannot fill a volume from data source %s", c.name, describeSource(source))
	default:
		return true, nil
	}
}

func (c *Controller) classOf(claim *v1.PersistentVolumeClaim) (*storagev1.StorageClass, error) {
	name := claimClassName(claim)
	obj, exists, err := c.informers.Classes.GetStore().GetByKey(name)
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

// savedVolume returns the PersistentVolume name, or nil if there is none. It
// looks in the informer first and asks the API only when the informer has not
// seen the volume, since it may lag behind.
func (c *Controller) savedVolume(ctx context.Context, name string) (*v1.PersistentVolume, error) {
	if obj, exists, err := c.informers.Volumes.GetStore().GetByKey(name); err == nil && exists {
		if volume, ok := obj.(*v1.PersistentVolume); ok {
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
func (c *Controller) saveVolume(ctx context.Context, t *term, claim *v1.PersistentVolumeClaim, volume *v1.PersistentVolume) (*v1.PersistentVolumeClaim, ProvisioningState, error) {
	cfg := c.config().VolumeSave
	if cfg.Mode == VolumeSaveRetryForever {
		t.pending.Store(volume.Name, pendingSave{claim: claim, volume: volume})
		t.saves.Add(volume.Name)
		return claim, ProvisioningFinished, nil
	}
	var saved *v1.PersistentVolume
	var lastErr error
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: cfg.Interval, Factor: 1, Steps: cfg.Retries},
		func(ctx context.Context) (bool, error) {
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
	if errors.Is(err, errVolumeTaken) {
		// The backend volume may well be the one the other PersistentVolume
		// uses: it is left alone, and so is the claim's intent finalizer.
		c.recorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, err.Error())
		return claim, ProvisioningFinished, err
	}
	if err != nil {
		err = fmt.Errorf("cannot save PersistentVolume %q after %d tries: %w", volume.Name, cfg.Retries, lastErr)
		c.recorder.Eventf(claim, v1.EventTypeWarning, EventProvisioningFailed, "%v; deleting the backend volume", err)
		if derr := c.guard(ctx, "delete", func(ctx context.Context) error { return c.provisioner.Delete(ctx, volume) }); derr != nil && !IsIgnoredError(derr) {
			derr = fmt.Errorf("cannot delete backend volume %q: %w", volume.Name, derr)
			c.recorder.Event(claim, v1.EventTypeWarning, EventCleanupFailed, derr.Error())
			err = errors.Join(err, derr)
		}
		return claim, ProvisioningFinished, err
	}
	return c.volumeSaved(ctx, claim, volume, saved)
}

// errVolumeTaken means that the PersistentVolume name of a claim is taken by a
// volume of another claim.
var errVolumeTaken = errors.New("the name is taken by a PersistentVolume of another claim")

// createVolume creates the PersistentVolume of a provisioned backend volume
// and returns it as saved. One that exists already and is bound to the same
// claim was saved by an earlier attempt that the informer had not shown yet.
// If its source differs, the backend volume may be a second one for the
// claim or the same one described otherwise: only a Reclaimer can tell
// (volumeSaved), and Delete is never handed a volume whose name a
// PersistentVolume uses, so other backends keep it.
func (c *Controller) createVolume(ctx context.Context, volume *v1.PersistentVolume) (*v1.PersistentVolume, error) {
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
func (c *Controller) volumeSaved(ctx context.Context, claim *v1.PersistentVolumeClaim, volume, saved *v1.PersistentVolume) (*v1.PersistentVolumeClaim, ProvisioningState, error) {
	klog.FromContext(ctx).Info("Provisioned", "volume", volume.Name)
	c.recorder.Eventf(claim, v1.EventTypeNormal, EventProvisioningSucceeded, "Successfully provisioned volume %s", volume.Name)
	if c.reclaimer != nil {
		if _, err := c.savedVolumeOf(ctx, volume, saved); err != nil {
			// The next reclaim finds the PersistentVolume and tries again.
			klog.FromContext(ctx).Info("Cannot tell the backend that the volume is saved", "volume", volume.Name, "err", err)
		}
	}
	claim, err := c.setClaimFinalizer(ctx, claim, false)
	return claim, ProvisioningFinished, err
}

// pendingSave is a PersistentVolume of the RetryForever store.
type pendingSave struct {
	claim  *v1.PersistentVolumeClaim
	volume *v1.PersistentVolume
}

// saveVolumeAgain tries to save one PersistentVolume of the RetryForever
// store, which keeps trying and never deletes the backend volume.
func (c *Controller) saveVolumeAgain(ctx context.Context, t *term, name string) {
	obj, ok := t.pending.Load(name)
	if !ok || ctx.Err() != nil {
		return
	}
	p := obj.(pendingSave)
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
func sameSource(saved, made v1.PersistentVolumeSource) (bool, error) {
	var s, m any
	for _, c := range []struct {
		from v1.PersistentVolumeSource
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

// setClaimFinalizer adds or removes this provisioner's intent finalizer. A
// claim that is gone needs no removal.
func (c *Controller) setClaimFinalizer(ctx context.Context, claim *v1.PersistentVolumeClaim, present bool) (*v1.PersistentVolumeClaim, error) {
	updated, err := patchFinalizer(ctx, c.client.CoreV1().PersistentVolumeClaims(claim.Namespace), claim, c.finalizer, present)
	if !present && apierrors.IsNotFound(err) {
		return updated, nil
	}
	return updated, err
}

type patcher[T any] interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// patchFinalizer adds or removes finalizer unless obj has it so already, and
// returns the object after the write, or obj. The strategic merge patch
// touches nothing but the finalizer, so other writers of the object (the PV
// binder on claims) cannot make it conflict; its uid keeps it from changing a
// later object of the same name.
func patchFinalizer[T metav1.Object](ctx context.Context, api patcher[T], obj T, finalizer string, present bool) (T, error) {
	if hasFinalizer(obj, finalizer) == present {
		return obj, nil
	}
	meta := map[string]any{"uid": obj.GetUID()}
	if present {
		meta["finalizers"] = []string{finalizer}
	} else {
		meta["$deleteFromPrimitiveList/finalizers"] = []string{finalizer}
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return obj, fmt.Errorf("cannot encode the finalizer patch of %s: %w", obj.GetName(), err)
	}
	updated, err := api.Patch(ctx, obj.GetName(), types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return obj, fmt.Errorf("cannot patch the finalizers of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return updated, nil
}

// updateClaim writes the change mutate makes to the claim.
func (c *Controller) updateClaim(ctx context.Context, claim *v1.PersistentVolumeClaim, mutate func(*v1.PersistentVolumeClaim) bool) (*v1.PersistentVolumeClaim, error) {
	return updateObject(ctx, c.client.CoreV1().PersistentVolumeClaims(claim.Namespace), claim, mutate)
}

type getUpdater[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// updateObject applies mutate to a copy of obj, and to a fresh copy after a
// conflict, and writes it unless mutate reports no change. It returns the
// latest object it knows.
func updateObject[T interface {
	metav1.Object
	DeepCopy() T
}](ctx context.Context, api getUpdater[T], obj T, mutate func(T) bool) (T, error) {
	current := obj
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		updated := current.DeepCopy()
		if !mutate(updated) {
			return nil
		}
		result, err := api.Update(ctx, updated, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if fresh, gerr := api.Get(ctx, obj.GetName(), metav1.GetOptions{}); gerr == nil {
				current = fresh
			}
		}
		if err != nil {
			return err
		}
		current = result
		return nil
	})
	if err != nil {
		return current, fmt.Errorf("cannot update %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return current, nil
}
