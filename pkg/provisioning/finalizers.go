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
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// addClaimFinalizer puts this provisioner's intent finalizer on a claim.
func (c *Controller) addClaimFinalizer(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	return addFinalizer(ctx, c.client.CoreV1().PersistentVolumeClaims(claim.Namespace), claim, c.finalizer)
}

// removeClaimFinalizer takes this provisioner's intent finalizer off a
// claim. A claim that is gone needs no removal.
func (c *Controller) removeClaimFinalizer(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	updated, err := removeFinalizer(ctx, c.client.CoreV1().PersistentVolumeClaims(claim.Namespace), claim, c.finalizer)
	if apierrors.IsNotFound(err) {
		return updated, nil
	}
	return updated, err
}

type patcher[T any] interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// addFinalizer puts finalizer on obj unless it has it already, and returns
// the object after the write, or obj.
func addFinalizer[T metav1.Object](ctx context.Context, api patcher[T], obj T, finalizer string) (T, error) {
	if hasFinalizer(obj, finalizer) {
		return obj, nil
	}
	return patchFinalizers(ctx, api, obj, "finalizers", finalizer)
}

// removeFinalizer takes finalizer off obj if it has it, and returns the
// object after the write, or obj.
func removeFinalizer[T metav1.Object](ctx context.Context, api patcher[T], obj T, finalizer string) (T, error) {
	if !hasFinalizer(obj, finalizer) {
		return obj, nil
	}
	return patchFinalizers(ctx, api, obj, "$deleteFromPrimitiveList/finalizers", finalizer)
}

// patchFinalizers writes finalizer under the metadata key field, which adds
// or removes it. The strategic merge patch touches nothing but the finalizer,
// so other writers of the object (the PV binder on claims) cannot make it
// conflict; its uid keeps it from changing a later object of the same name.
func patchFinalizers[T metav1.Object](ctx context.Context, api patcher[T], obj T, field, finalizer string) (T, error) {
	meta := map[string]any{"uid": obj.GetUID(), field: []string{finalizer}}
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

// claimFinalizersOnlyChanged reports whether an update of a claim changed
// nothing but its finalizers (and so the resource version).
func claimFinalizersOnlyChanged(o, n *corev1.PersistentVolumeClaim) bool {
	return metaFinalizersOnlyChanged(&o.ObjectMeta, &n.ObjectMeta) &&
		equality.Semantic.DeepEqual(&o.Spec, &n.Spec) && equality.Semantic.DeepEqual(&o.Status, &n.Status)
}

// volumeFinalizersOnlyChanged is claimFinalizersOnlyChanged for volumes.
func volumeFinalizersOnlyChanged(o, n *corev1.PersistentVolume) bool {
	return metaFinalizersOnlyChanged(&o.ObjectMeta, &n.ObjectMeta) &&
		equality.Semantic.DeepEqual(&o.Spec, &n.Spec) && equality.Semantic.DeepEqual(&o.Status, &n.Status)
}

// metaFinalizersOnlyChanged reports whether the finalizers changed and
// nothing else but the resource version and managed fields. Most updates keep
// the finalizers: they are told apart without comparing, or allocating,
// anything else.
func metaFinalizersOnlyChanged(o, n *metav1.ObjectMeta) bool {
	if slices.Equal(o.Finalizers, n.Finalizers) {
		return false
	}
	om, nm := *o, *n
	for _, m := range []*metav1.ObjectMeta{&om, &nm} {
		m.ResourceVersion, m.Finalizers, m.ManagedFields = "", nil, nil
	}
	return equality.Semantic.DeepEqual(&om, &nm)
}

func hasFinalizer(obj interface{ GetFinalizers() []string }, finalizer string) bool {
	return slices.Contains(obj.GetFinalizers(), finalizer)
}
