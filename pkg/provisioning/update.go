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
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

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
