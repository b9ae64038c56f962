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
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

func TestUpdateClaimRetriesConflict(t *testing.T) {
	claim := newClaim("c", "fast", testProvisioner)
	claim.Annotations[annSelectedNode] = "node-1"
	f := newFixture(t, claim)
	c := f.newController(testConfig(testProvisioner), newFakeBackend(), &testRecorder{})
	conflicts := 1
	f.client.PrependReactor("update", "persistentvolumeclaims", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(v1.Resource("persistentvolumeclaims"), "c", errors.New("stale"))
		}
		return false, nil, nil
	})
	_, err := c.updateClaim(context.Background(), claim, func(claim *v1.PersistentVolumeClaim) bool {
		delete(claim.Annotations, annSelectedNode)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if conflicts != 0 {
		t.Fatal("the update met no conflict")
	}
	if node, ok := f.getClaim("c").Annotations[annSelectedNode]; ok {
		t.Errorf("selected node %q still set after a conflict", node)
	}
}
