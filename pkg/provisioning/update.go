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

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// updateClaim writes the change mutate makes to the claim.
func (c *Controller) updateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, mutate func(*corev1.PersistentVolumeClaim) bool) (*corev1.PersistentVolumeClaim, error) {
	return updateObject(ctx, c.client.CoreV1().PersistentVolumeClaims(claim.Namespace), claim, mutate)
}

type getPatcher[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	patcher[T]
}

// object is what updateObject writes: a typed API object.
type object[T any] interface {
	metav1.Object
	DeepCopy() T
}

// updateObject applies mutate to a copy of obj, and to a fresh copy after a
// conflict, and writes the change unless mutate reports no change. It returns
// the latest object it knows.
//
// obj may come from an informer cache that dropped fields (internal/cachetrim):
// an Update of it would erase them, so the write is a patch of the change
// alone. The patch carries the resource version mutate saw, which keeps the
// optimistic concurrency of an Update: a change made meanwhile is a conflict,
// and mutate runs again on the object as the API has it now.
func updateObject[T object[T]](ctx context.Context, api getPatcher[T], obj T, mutate func(T) bool) (T, error) {
	current := obj
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		updated := current.DeepCopy()
		if !mutate(updated) {
			return nil
		}
		patch, err := changePatch(current, updated)
		if err != nil {
			return err
		}
		result, err := api.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
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

// changePatch returns the JSON merge patch that turns original into modified,
// conditional on original's resource version. Fields that neither has, as
// those a trimmed cache dropped, are left as the API has them.
func changePatch[T object[T]](original, modified T) ([]byte, error) {
	// Without it in the original, the patch sets the resource version:
	// the API refuses the patch with a conflict if it is not current.
	base := original.DeepCopy()
	base.SetResourceVersion("")
	from, err := json.Marshal(base)
	if err != nil {
		return nil, fmt.Errorf("cannot encode %s: %w", original.GetName(), err)
	}
	to, err := json.Marshal(modified)
	if err != nil {
		return nil, fmt.Errorf("cannot encode the change of %s: %w", original.GetName(), err)
	}
	patch, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return nil, fmt.Errorf("cannot compute the patch of %s: %w", original.GetName(), err)
	}
	return patch, nil
}
