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

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

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
			retry = c.claimRetries.failing(keyOfClaim(claim))
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
