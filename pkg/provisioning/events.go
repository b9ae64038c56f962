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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// keyOfClaim is the claim queue's key of claim: its UID tells a claim from
// a new one of the same name.
func keyOfClaim(claim *corev1.PersistentVolumeClaim) claimKey {
	return claimKey{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}
}

func (c *Controller) claimHandler(t *term) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueueClaim(t, obj) },
		UpdateFunc: func(oldObj, newObj any) {
			// Our own finalizer writes are no reason to look again.
			o, ok1 := oldObj.(*corev1.PersistentVolumeClaim)
			n, ok2 := newObj.(*corev1.PersistentVolumeClaim)
			if !ok1 || !ok2 || !claimFinalizersOnlyChanged(o, n) {
				c.enqueueClaim(t, newObj)
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			claim, ok := obj.(*corev1.PersistentVolumeClaim)
			if !ok {
				return
			}
			key := keyOfClaim(claim)
			c.claimRetries.Forget(key)
			c.room.forget(key)
			// A backend working in the background must get to finish or clean up.
			if _, ok := c.inProgress.Load(claim.UID); ok {
				t.claims.queue.Add(key)
			}
		},
	}
}

func (c *Controller) enqueueClaim(t *term, obj any) {
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok || !c.claimInteresting(claim) {
		return
	}
	key := keyOfClaim(claim)
	if c.claimRetries.Admit(key, claim.ResourceVersion) {
		t.claims.queue.Add(key)
	}
}

// claimInteresting is a cheap filter that keeps claims of other provisioners
// out of this controller's queue.
func (c *Controller) claimInteresting(claim *corev1.PersistentVolumeClaim) bool {
	if _, ok := c.inProgress.Load(claim.UID); ok {
		return true
	}
	if !c.claimInScope(claim) {
		return false
	}
	return hasFinalizer(claim, c.finalizer) || claim.Spec.VolumeName == "" && c.config().KnownName(StorageProvisioner(claim)) ||
		c.resizer != nil && WantsResize(claim) && c.config().KnownName(StorageProvisioner(claim))
}

// claimInScope reports whether claim is in this controller's part of its
// provisioner's claims.
func (c *Controller) claimInScope(claim *corev1.PersistentVolumeClaim) bool {
	return c.scope == nil || c.scope.Claim(claim)
}

// volumeInScope reports whether volume is in this controller's part of its
// provisioner's volumes.
func (c *Controller) volumeInScope(volume *corev1.PersistentVolume) bool {
	return c.scope == nil || c.scope.Volume(volume)
}

func (c *Controller) volumeHandler(t *term) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueueVolume(t, obj) },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.PersistentVolume)
			n, ok2 := newObj.(*corev1.PersistentVolume)
			// A change of finalizers alone is most often our own write; it
			// is a reason to look again only when it left the volume
			// finalizer other than the configuration wants, as when the
			// configuration changed before the informer showed the write.
			if !ok1 || !ok2 || !volumeFinalizersOnlyChanged(o, n) || hasFinalizer(n, VolumeFinalizer) != c.config().Finalizer {
				c.enqueueVolume(t, newObj)
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if volume, ok := obj.(*corev1.PersistentVolume); ok {
				c.volumeRetries.Forget(volume.Name)
				c.deleted.Delete(volume.Name)
				// A backend may count the PersistentVolumes it lists
				// against its room.
				if c.volumeInScope(volume) {
					c.roomFreed()
				}
			}
		},
	}
}

func (c *Controller) enqueueVolume(t *term, obj any) {
	volume, ok := obj.(*corev1.PersistentVolume)
	if !ok || !c.config().KnownName(volume.Annotations[AnnDynamicallyProvisioned]) || !c.volumeInScope(volume) {
		return
	}
	if c.volumeRetries.Admit(volume.Name, volume.ResourceVersion) {
		t.volumes.queue.Add(volume.Name)
	}
}

// nameKeys are the routing keys of the names this provisioner answers to.
func (c *Controller) nameKeys() []routeKey {
	cfg := c.config()
	keys := []routeKey{provisionerKey(cfg.ProvisionerName)}
	for _, name := range cfg.AdditionalProvisionerNames {
		keys = append(keys, provisionerKey(name))
	}
	return keys
}
