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
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// honourVolumeDeletion makes the fake clientset delete PersistentVolumes as
// the apiserver does: a delete checks its preconditions, a volume with
// finalizers only gets a deletion timestamp, and such a volume goes once
// its last finalizer is removed.
func honourVolumeDeletion(client *fake.Clientset) {
	resource := corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	client.PrependReactor("delete", "persistentvolumes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		del := action.(k8stesting.DeleteAction)
		obj, err := client.Tracker().Get(resource, "", del.GetName())
		if err != nil {
			return false, nil, nil // the tracker reports it
		}
		volume := obj.(*corev1.PersistentVolume).DeepCopy()
		if want := del.GetDeleteOptions().Preconditions; want != nil &&
			(want.UID != nil && *want.UID != volume.UID || want.ResourceVersion != nil && *want.ResourceVersion != volume.ResourceVersion) {
			return true, nil, apierrors.NewConflict(resource.GroupResource(), volume.Name, errors.New("the precondition failed"))
		}
		if len(volume.Finalizers) == 0 {
			return false, nil, nil
		}
		if volume.DeletionTimestamp == nil {
			volume.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			return true, nil, client.Tracker().Update(resource, volume, "")
		}
		return true, nil, nil
	})
	removeFinalized := func(action k8stesting.Action) (bool, runtime.Object, error) {
		handled, obj, err := k8stesting.ObjectReaction(client.Tracker())(action)
		if volume, ok := obj.(*corev1.PersistentVolume); ok && err == nil && volume.DeletionTimestamp != nil && len(volume.Finalizers) == 0 {
			err = client.Tracker().Delete(resource, "", volume.Name)
		}
		return handled, obj, err
	}
	client.PrependReactor("patch", "persistentvolumes", removeFinalized)
	client.PrependReactor("update", "persistentvolumes", removeFinalized)
}

func TestHonourVolumeDeletion(t *testing.T) {
	client := fake.NewClientset()
	honourVolumeDeletion(client)
	ctx := t.Context()
	volumes := client.CoreV1().PersistentVolumes()
	volume := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", UID: "uid", ResourceVersion: "1", Finalizers: []string{VolumeFinalizer}}}
	if _, err := volumes.Create(ctx, volume, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := "0"
	if err := volumes.Delete(ctx, "pv", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &stale}}); !apierrors.IsConflict(err) {
		t.Errorf("delete of a stale version: got %v, want a conflict", err)
	}
	if err := volumes.Delete(ctx, "pv", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleting, err := volumes.Get(ctx, "pv", metav1.GetOptions{})
	if err != nil || deleting.DeletionTimestamp == nil {
		t.Fatalf("after a delete, a volume with a finalizer must stay with a deletion timestamp: %v, %v", deleting, err)
	}
	if _, err := removeFinalizer(ctx, volumes, deleting, VolumeFinalizer); err != nil {
		t.Fatal(err)
	}
	if _, err := volumes.Get(ctx, "pv", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a deleted volume without finalizers: got %v, want it gone", err)
	}
}
