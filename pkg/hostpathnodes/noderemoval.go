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

package hostpathnodes

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// AnnNodeGoneSince is, on a PersistentVolume, when the leader first saw its
// node without a Node object (RFC 3339). Kept on the volume, the grace
// period survives a change of leader; it is dropped when the node is back.
const AnnNodeGoneSince = "hostpath.provfleet.io/node-gone-since"

// Reasons of the Events on the volumes of removed nodes and their claims.
const (
	EventNodeRemoved             = "NodeRemoved"
	EventNodeRemovedVolumeDelete = "NodeRemovedVolumeDeleted"
)

// defaultNodeRemovalGrace is nodeRemoval.gracePeriod's default.
const defaultNodeRemovalGrace = 15 * time.Minute

// handleRemovedNodes reports the volumes whose node has no Node object and,
// with the Delete policy, deletes those whose node stayed gone for the grace
// period. It returns how soon the next grace period ends; zero for none.
func (c *Coordinator) handleRemovedNodes(ctx context.Context, v *fleetView) time.Duration {
	policy, grace := c.removalPolicy()
	gone := 0
	var next time.Duration
	due := map[string][]*corev1.PersistentVolume{}
	for _, volume := range v.volumes {
		node := backend.VolumeNode(volume)
		if node == "" {
			continue
		}
		if v.nodes[node] != nil {
			c.nodeBack(ctx, volume)
			continue
		}
		gone++
		since, err := c.goneSince(ctx, volume, v.now, policy, grace)
		if err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Cannot record the removal of a volume's node", "volume", klog.KObj(volume))
			next = shorter(next, v.retry)
			continue
		}
		if policy != v1alpha1.NodeRemovalDelete {
			continue
		}
		if left := since.Add(grace).Sub(v.now); left > 0 {
			next = shorter(next, left)
			continue
		}
		if !deleted(volume) {
			due[node] = append(due[node], volume)
		}
	}
	c.metrics.setRemovedNodeVolumes(c.name, gone)
	for node, volumes := range due {
		err := c.deleteRemovedVolumes(ctx, node, volumes)
		switch {
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			// Changed or gone meanwhile: its event brings the next sync.
			klog.FromContext(ctx).V(2).Info("Volume changed before its deletion", "node", node, "err", err)
		case err != nil:
			utilruntime.HandleErrorWithContext(ctx, err, "Cannot delete the volumes of a removed node", "node", node)
			next = shorter(next, v.retry)
		}
	}
	return next
}

// deleted reports whether the leader deleted volume already: it waits for
// its claim to go.
func deleted(volume *corev1.PersistentVolume) bool {
	return volume.DeletionTimestamp != nil && !slices.Contains(volume.Finalizers, provisioning.VolumeFinalizer)
}

// shorter is the shorter of two waits, zero meaning none.
func shorter(a, b time.Duration) time.Duration {
	if a == 0 || b > 0 && b < a {
		return b
	}
	return a
}

func (c *Coordinator) removalPolicy() (v1alpha1.NodeRemovalPolicy, time.Duration) {
	policy, grace := v1alpha1.NodeRemovalReport, defaultNodeRemovalGrace
	if r := c.spec.NodeRemoval; r != nil {
		if r.Policy != "" {
			policy = r.Policy
		}
		if r.GracePeriod != nil {
			grace = r.GracePeriod.Duration
		}
	}
	return policy, grace
}

// goneSince returns when volume's node was first seen gone; the first time,
// it records now on the volume and tells the volume and its claim.
func (c *Coordinator) goneSince(ctx context.Context, volume *corev1.PersistentVolume, now time.Time,
	policy v1alpha1.NodeRemovalPolicy, grace time.Duration) (time.Time, error) {
	if recorded, ok := volume.Annotations[AnnNodeGoneSince]; ok {
		if since, err := time.Parse(time.RFC3339, recorded); err == nil {
			return since, nil
		}
	}
	stamp := now.UTC().Format(time.RFC3339)
	if err := c.annotateVolume(ctx, volume, &stamp); err != nil {
		return time.Time{}, err
	}
	since, _ := time.Parse(time.RFC3339, stamp)
	message := fmt.Sprintf("Node %s has no Node object: this volume cannot be reached; it is kept (nodeRemoval policy %s)", backend.VolumeNode(volume), policy)
	if policy == v1alpha1.NodeRemovalDelete {
		message = fmt.Sprintf("Node %s has no Node object: this volume cannot be reached; it is deleted at %s unless the node comes back by then (nodeRemoval policy Delete)",
			backend.VolumeNode(volume), since.Add(grace).Format(time.RFC3339))
	}
	klog.FromContext(ctx).Info("Node of a volume removed", "volume", klog.KObj(volume), "node", backend.VolumeNode(volume))
	c.tell(volume, corev1.EventTypeWarning, EventNodeRemoved, message)
	return since, nil
}

// nodeBack forgets the removal of volume's node, which came back.
func (c *Coordinator) nodeBack(ctx context.Context, volume *corev1.PersistentVolume) {
	if _, ok := volume.Annotations[AnnNodeGoneSince]; !ok {
		return
	}
	if err := c.annotateVolume(ctx, volume, nil); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot forget the removal of a volume's node", "volume", klog.KObj(volume))
		return
	}
	klog.FromContext(ctx).Info("Node of a volume back", "volume", klog.KObj(volume), "node", backend.VolumeNode(volume))
}

// annotateVolume sets AnnNodeGoneSince on volume to since, or drops it when
// since is nil, unless the volume changed since this leader saw it.
func (c *Coordinator) annotateVolume(ctx context.Context, volume *corev1.PersistentVolume, since *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": volume.ResourceVersion,
		"annotations":     map[string]*string{AnnNodeGoneSince: since},
	}})
	if err != nil {
		return fmt.Errorf("cannot encode the annotation of volume %s: %w", volume.Name, err)
	}
	if _, err := c.client.CoreV1().PersistentVolumes().Patch(ctx, volume.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cannot annotate volume %s: %w", volume.Name, err)
	}
	return nil
}

// deleteRemovedVolumes deletes the volumes of the removed node. They go to
// the node's removal list first (RemovedListName), each by name and UID with
// the onDelete policy its directory gets, so that the agent of a node that
// comes back under the same name applies it; then the volume finalizer,
// which waits for a backend that cannot be reached, is removed and the
// volume deleted. A bound volume goes once its claim is deleted (the volume
// protection keeps it until then); its claim is lost, to be deleted and made
// again.
func (c *Coordinator) deleteRemovedVolumes(ctx context.Context, node string, volumes []*corev1.PersistentVolume) error {
	configured := backend.OnDeletePolicy(c.spec.OnDelete)
	removed := make([]removedVolume, 0, len(volumes))
	for _, volume := range volumes {
		removed = append(removed, removedVolume{Name: volume.Name, UID: volume.UID, OnDelete: backend.RemovedOnDelete(volume, configured)})
	}
	if err := c.addRemovedVolumes(ctx, node, removed); err != nil {
		return err
	}
	for _, volume := range volumes {
		if err := c.deleteRemovedVolume(ctx, volume); err != nil {
			return err
		}
	}
	return nil
}

// deleteRemovedVolume removes the volume finalizer of volume and deletes
// it, both unless the volume changed since this leader saw it: a volume is
// deleted, and its deletion told, once.
func (c *Coordinator) deleteRemovedVolume(ctx context.Context, volume *corev1.PersistentVolume) error {
	version := volume.ResourceVersion
	if i := slices.Index(volume.Finalizers, provisioning.VolumeFinalizer); i >= 0 {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": volume.ResourceVersion,
			"finalizers":      slices.Delete(slices.Clone(volume.Finalizers), i, i+1),
		}})
		if err != nil {
			return fmt.Errorf("cannot encode the finalizers of volume %s: %w", volume.Name, err)
		}
		patched, err := c.client.CoreV1().PersistentVolumes().Patch(ctx, volume.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("cannot remove the finalizer of volume %s: %w", volume.Name, err)
		}
		version = patched.ResourceVersion
	}
	err := c.client.CoreV1().PersistentVolumes().Delete(ctx, volume.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &volume.UID, ResourceVersion: &version}})
	if err != nil {
		return fmt.Errorf("cannot delete volume %s: %w", volume.Name, err)
	}
	klog.FromContext(ctx).Info("Deleted the volume of a removed node", "volume", klog.KObj(volume), "node", backend.VolumeNode(volume))
	c.tell(volume, corev1.EventTypeWarning, EventNodeRemovedVolumeDelete, fmt.Sprintf(
		"Node %s stayed removed for the grace period: volume %s is deleted (nodeRemoval policy Delete). Its data cannot be reached: its claim is lost; delete the claim, which lets the volume go, and make it again to get a volume on a live node",
		backend.VolumeNode(volume), volume.Name))
	return nil
}

// tell records an Event on volume and on its claim.
func (c *Coordinator) tell(volume *corev1.PersistentVolume, eventType, reason, message string) {
	c.recorder.Event(volume, eventType, reason, message)
	if ref := volume.Spec.ClaimRef; ref != nil && ref.Name != "" {
		claim := ref.DeepCopy()
		claim.Kind, claim.APIVersion = "PersistentVolumeClaim", "v1"
		c.recorder.Event(claim, eventType, reason, message)
	}
}

// addRemovedVolumes adds volumes to what node's removal list says was
// removed of this ProvisionerConfig, creating the list when there is none,
// and never dropping a volume.
func (c *Coordinator) addRemovedVolumes(ctx context.Context, node string, volumes []removedVolume) error {
	lists := c.client.CoreV1().ConfigMaps(c.leaseNS)
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	err := retry.OnError(retry.DefaultRetry, retriable, func() error {
		cm, err := lists.Get(ctx, RemovedListName(node), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = newRemovedList(c.leaseNS, node)
		} else if err != nil {
			return err
		}
		list, err := readRemovedList(cm)
		if err != nil {
			return err
		}
		list.add(c.configName, volumes)
		data, err := list.encode()
		switch {
		case err != nil || maps.Equal(data, cm.Data):
			return err
		case cm.ResourceVersion == "":
			cm.Data = data
			_, err = lists.Create(ctx, cm, metav1.CreateOptions{})
			return err
		}
		cm.Data = data
		_, err = lists.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("cannot record the removed volumes of node %s: %w", node, err)
	}
	return nil
}
