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

package leasetest

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEnforceLeaseVersions(t *testing.T) {
	client := fake.NewClientset()
	EnforceVersions(client)
	ctx := t.Context()
	leases := client.CoordinationV1().Leases("default")
	created, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	updated, err := leases.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion == created.ResourceVersion {
		t.Errorf("update kept resource version %q", created.ResourceVersion)
	}
	if _, err := leases.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update of a stale version: got %v, want a conflict", err)
	}
	stale := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &created.ResourceVersion}}
	if err := leases.Delete(ctx, "l", stale); !apierrors.IsConflict(err) {
		t.Errorf("delete with a stale version as precondition: got %v, want a conflict", err)
	}
	current := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &updated.ResourceVersion}}
	if err := leases.Delete(ctx, "l", current); err != nil {
		t.Errorf("delete with the current version as precondition: %v", err)
	}
}
