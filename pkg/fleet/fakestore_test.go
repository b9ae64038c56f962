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

package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/generated/clientset/versioned/fake"
)

// storeLikeTheAPIServer makes the fake clientset keep ProvisionerConfigs as
// the apiserver does, where the plain object tracker replaces whole objects:
//   - a write at a stale resourceVersion is a conflict;
//   - a status write changes only the status;
//   - a spec write leaves the status and bumps the generation when the spec
//     changed;
//   - a merge patch is checked and versioned like an update;
//   - a delete of an object with finalizers marks it deleted, with a new
//     generation, and the object goes once its last finalizer is removed.
//
// Without it a status write from the manager's cache could undo an edit the
// manager had not seen yet, which no apiserver allows.
func storeLikeTheAPIServer(cs *fake.Clientset) {
	s := &apiserverStore{tracker: cs.Tracker(), gvr: v1alpha1.SchemeGroupVersion.WithResource("provisionerconfigs")}
	cs.PrependReactor("create", "provisionerconfigs", s.create)
	cs.PrependReactor("update", "provisionerconfigs", s.update)
	cs.PrependReactor("patch", "provisionerconfigs", s.patch)
	cs.PrependReactor("delete", "provisionerconfigs", s.delete)
}

type apiserverStore struct {
	tracker clienttesting.ObjectTracker
	gvr     schema.GroupVersionResource

	mu      sync.Mutex
	version int
}

func (s *apiserverStore) create(action clienttesting.Action) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pc := action.(clienttesting.CreateAction).GetObject().(*v1alpha1.ProvisionerConfig).DeepCopy()
	if pc.Generation == 0 {
		pc.Generation = 1
	}
	pc.ResourceVersion = s.nextVersion()
	if err := s.tracker.Create(s.gvr, pc, ""); err != nil {
		return true, nil, err
	}
	return true, pc.DeepCopy(), nil
}

func (s *apiserverStore) update(action clienttesting.Action) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	update := action.(clienttesting.UpdateAction)
	written := update.GetObject().(*v1alpha1.ProvisionerConfig)
	stored, err := s.current(written.Name)
	if err != nil {
		return true, nil, err
	}
	if written.ResourceVersion != stored.ResourceVersion {
		return true, nil, s.conflict(written.Name)
	}
	obj, err := s.store(stored, written, update.GetSubresource() == "status")
	return true, obj, err
}

func (s *apiserverStore) patch(action clienttesting.Action) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	patch := action.(clienttesting.PatchAction)
	if patch.GetPatchType() != types.MergePatchType {
		return true, nil, fmt.Errorf("the fake store takes only merge patches, not %s", patch.GetPatchType())
	}
	stored, err := s.current(patch.GetName())
	if err != nil {
		return true, nil, err
	}
	original, err := json.Marshal(stored)
	if err != nil {
		return true, nil, err
	}
	merged, err := jsonpatch.MergePatch(original, patch.GetPatch())
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	written := &v1alpha1.ProvisionerConfig{}
	if err := json.Unmarshal(merged, written); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if written.ResourceVersion != stored.ResourceVersion {
		return true, nil, s.conflict(written.Name)
	}
	obj, err := s.store(stored, written, patch.GetSubresource() == "status")
	return true, obj, err
}

func (s *apiserverStore) delete(action clienttesting.Action) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := action.(clienttesting.DeleteAction).GetName()
	stored, err := s.current(name)
	if err != nil {
		return true, nil, err
	}
	if len(stored.Finalizers) == 0 {
		return true, nil, s.tracker.Delete(s.gvr, "", name)
	}
	if stored.DeletionTimestamp != nil {
		return true, nil, nil
	}
	next := stored.DeepCopy()
	now := metav1.Now()
	next.DeletionTimestamp = &now
	next.Generation++
	next.ResourceVersion = s.nextVersion()
	return true, nil, s.tracker.Update(s.gvr, next, "")
}

func (s *apiserverStore) current(name string) (*v1alpha1.ProvisionerConfig, error) {
	obj, err := s.tracker.Get(s.gvr, "", name)
	if err != nil {
		return nil, err
	}
	return obj.(*v1alpha1.ProvisionerConfig), nil
}

// store writes what an apiserver keeps of written over stored: the status
// alone, or all but the status and the fields the server owns.
func (s *apiserverStore) store(stored, written *v1alpha1.ProvisionerConfig, status bool) (runtime.Object, error) {
	next := stored.DeepCopy()
	if status {
		next.Status = *written.Status.DeepCopy()
	} else {
		next.ObjectMeta = *written.ObjectMeta.DeepCopy()
		next.Generation, next.UID, next.CreationTimestamp, next.DeletionTimestamp = stored.Generation, stored.UID, stored.CreationTimestamp, stored.DeletionTimestamp
		if !equality.Semantic.DeepEqual(written.Spec, stored.Spec) {
			next.Generation++
		}
		next.Spec = *written.Spec.DeepCopy()
	}
	next.ResourceVersion = s.nextVersion()
	if next.DeletionTimestamp != nil && len(next.Finalizers) == 0 {
		return next, s.tracker.Delete(s.gvr, "", next.Name)
	}
	if err := s.tracker.Update(s.gvr, next, ""); err != nil {
		return nil, err
	}
	return next.DeepCopy(), nil
}

func (s *apiserverStore) nextVersion() string {
	s.version++
	return strconv.Itoa(s.version)
}

func (s *apiserverStore) conflict(name string) error {
	return apierrors.NewConflict(s.gvr.GroupResource(), name, errors.New("the object has been modified; apply your changes to the latest version and try again"))
}
