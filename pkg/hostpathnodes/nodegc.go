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

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// syncNode brings the removal list and the Lease of node up to date: the
// volumes of an older version's Lease annotation move to the list, those the
// agent released leave it, an empty list is deleted, and so is the Lease of
// a node whose Node object is gone once it expired and nothing it lists is
// pending, so that node churn leaves nothing behind.
func (t *nodeTrust) syncNode(ctx context.Context, node string) error {
	lease, err := t.n.nodeLease(node)
	if err != nil {
		return err
	}
	cm, err := t.removedListObject(node)
	if err != nil {
		return err
	}
	if lease, err = t.moveLegacy(ctx, node, lease, cm); err != nil || lease == nil && cm == nil {
		return err
	}
	released, err := readReleased(lease)
	if err != nil {
		return err
	}
	list, err := readRemovedList(cm)
	if err != nil {
		return err
	}
	if cm != nil && (list.drop(released) || len(list) == 0) {
		if err := t.writeRemovedList(ctx, cm, list); err != nil {
			return err
		}
	}
	if list.pending(released) {
		return nil
	}
	return t.collectLease(ctx, node, lease)
}

// removedListObject returns the removal list of node from the cache, nil
// when none.
func (t *nodeTrust) removedListObject(node string) (*corev1.ConfigMap, error) {
	obj, exists, err := t.n.listInf.GetStore().GetByKey(t.n.settings.LeaseNamespace + "/" + RemovedListName(node))
	if err != nil || !exists {
		return nil, err
	}
	cm, _ := obj.(*corev1.ConfigMap)
	return cm.DeepCopy(), nil
}

// writeRemovedList writes list to cm, at the version read, or deletes cm
// when list is empty.
func (t *nodeTrust) writeRemovedList(ctx context.Context, cm *corev1.ConfigMap, list removedList) error {
	api := t.n.client.CoreV1().ConfigMaps(cm.Namespace)
	if len(list) == 0 {
		err := api.Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cannot delete the empty removal list %s: %w", cm.Name, err)
		}
		klog.FromContext(ctx).V(2).Info("Deleted an empty removal list", "configMap", klog.KObj(cm))
		return nil
	}
	data, err := list.encode()
	if err != nil {
		return err
	}
	cm.Data = data
	if _, err := api.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("cannot update the removal list %s: %w", cm.Name, err)
	}
	return nil
}

// moveLegacy moves the volumes lease lists in AnnRemovedVolumes, as older
// versions kept them, to node's removal list cm (nil: none yet), then takes
// the annotation off the Lease. It returns the Lease as it is now.
func (t *nodeTrust) moveLegacy(ctx context.Context, node string, lease *coordinationv1.Lease, cm *corev1.ConfigMap) (*coordinationv1.Lease, error) {
	if lease == nil {
		return nil, nil
	}
	legacy, err := readLegacyRemoved(lease)
	if _, listed := lease.Annotations[AnnRemovedVolumes]; err != nil || !listed {
		return lease, err
	}
	if len(legacy) > 0 {
		if err := t.addLegacy(ctx, node, cm, legacy); err != nil {
			return nil, err
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": lease.ResourceVersion,
		"annotations":     map[string]any{AnnRemovedVolumes: nil},
	}})
	if err != nil {
		return nil, fmt.Errorf("cannot encode the removal of the annotation: %w", err)
	}
	patched, err := t.n.client.CoordinationV1().Leases(lease.Namespace).Patch(ctx, lease.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot take the removed volumes off Lease %s: %w", lease.Name, err)
	}
	klog.FromContext(ctx).Info("Moved the removed volumes of a node from its Lease to its removal list", "lease", klog.KObj(lease), "node", node)
	return patched, nil
}

// addLegacy adds the volumes of legacy that cm does not list by name yet.
func (t *nodeTrust) addLegacy(ctx context.Context, node string, cm *corev1.ConfigMap, legacy removedList) error {
	api := t.n.client.CoreV1().ConfigMaps(t.n.settings.LeaseNamespace)
	if cm == nil {
		cm = newRemovedList(t.n.settings.LeaseNamespace, node)
	}
	list, err := readRemovedList(cm)
	if err != nil {
		return err
	}
	for name, volumes := range legacy {
		list[name] = append(list[name], slices.DeleteFunc(volumes, func(v removedVolume) bool {
			return slices.ContainsFunc(list[name], func(listed removedVolume) bool { return listed.Name == v.Name })
		})...)
	}
	data, err := list.encode()
	switch {
	case err != nil || maps.Equal(data, cm.Data):
		return err
	case cm.ResourceVersion == "":
		cm.Data = data
		_, err = api.Create(ctx, cm, metav1.CreateOptions{})
	default:
		cm.Data = data
		_, err = api.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("cannot move the removed volumes of node %s to its removal list: %w", node, err)
	}
	return nil
}

// collectLease deletes lease, of node, whose removal list holds nothing
// pending, once the Node is gone and the Lease expired by the manager's
// clock (leaseClock); while it lives on, node is looked at again when it
// would expire.
func (t *nodeTrust) collectLease(ctx context.Context, node string, lease *coordinationv1.Lease) error {
	if lease == nil {
		return nil
	}
	if _, exists, err := t.n.nodeInf.GetStore().GetByKey(node); err != nil || exists {
		return err
	}
	now := time.Now()
	if expiry, held := t.n.clock.expiry(lease, now); held && expiry.After(now) {
		t.queue.AddAfter(node, expiry.Sub(now)+time.Second)
		return nil
	}
	err := t.n.client.CoordinationV1().Leases(lease.Namespace).Delete(ctx, lease.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion}})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// Gone or changed meanwhile: its event brings the next look.
		return nil
	case err != nil:
		return fmt.Errorf("cannot delete the Lease of the removed node %s: %w", node, err)
	}
	klog.FromContext(ctx).Info("Deleted the Lease of a removed node", "lease", klog.KObj(lease), "node", node)
	return nil
}

// nodeLease returns the Lease of node from the cache, nil when none.
func (n *Nodes) nodeLease(node string) (*coordinationv1.Lease, error) {
	obj, exists, err := n.leaseInf.GetStore().GetByKey(n.settings.LeaseNamespace + "/" + NodeLeaseName(node))
	if err != nil || !exists {
		return nil, err
	}
	lease, _ := obj.(*coordinationv1.Lease)
	return lease, nil
}
