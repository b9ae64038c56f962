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

package provisioning_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/hostpath"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// A hostPath volume grows when its claim asks for more within the capacity
// budget, as a controller-only resize finishes: the PersistentVolume's
// capacity raised, the claim's status.capacity the new size, no resize
// status or condition left. A size past the budget is refused with an
// Event, the claim's resize ControllerResizeInfeasible and the
// PersistentVolume untouched, until the request is lowered; then it grows
// to that, and a later claim finds the room it took gone.
func TestExpansionOfHostPathVolumes(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	hostPath, err := hostpath.New(hostpath.Config{
		Path:         filepath.Join(root, "vols"),
		VolumeType:   hostpath.VolumeTypeHostPath,
		NodeName:     "node-1",
		HostPathRoot: root,
		Capacity:     backend.Capacity{Storage: resource.MustParse("10Mi")},
	}, hostpath.Options{
		// The budget counts the PersistentVolumes of the provisioner, as
		// the manager's index of them has it count.
		ProvisionerNames: []string{f.provisioner},
		Volumes: backend.NewListedVolumes(func() ([]*corev1.PersistentVolume, error) {
			list, err := f.admin.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			volumes := make([]*corev1.PersistentVolume, 0, len(list.Items))
			for i := range list.Items {
				volumes = append(volumes, &list.Items[i])
			}
			return volumes, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.start(f.config(), hostPath)
	f.createClass(f.class, func(c *storagev1.StorageClass) { c.AllowVolumeExpansion = ptr.To(true) })
	claim := f.createClaim("data", f.class, nil)
	f.waitBound(claim.Name)

	f.setRequest(claim.Name, "4Mi")
	f.waitResized(claim.Name, "4Mi")

	f.setRequest(claim.Name, "20Mi")
	f.waitResizeStatus(claim.Name, corev1.PersistentVolumeClaimControllerResizeInfeasible)
	f.waitEventSaying(claim, provisioning.EventResizeFailed, "capacity budget exhausted")
	if got := f.volume(volumeName(claim)).Spec.Capacity[corev1.ResourceStorage]; got.String() != "4Mi" {
		t.Errorf("capacity of the refused volume: %s, want 4Mi", got.String())
	}

	f.setRequest(claim.Name, "6Mi")
	f.waitResized(claim.Name, "6Mi")

	later := f.createClaim("later", f.class, func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("5Mi")
	})
	f.waitEventSaying(later, provisioning.EventProvisioningFailed, "capacity exhausted: 6Mi of 10Mi in use")
}

// A backend without provisioning.Expander refuses to grow a volume with an
// Event saying so and a resize status of ControllerResizeInfeasible, and
// leaves the volume as it was.
func TestExpansionWithoutExpander(t *testing.T) {
	f := newFixture(t)
	f.start(f.config(), &dirBackend{root: t.TempDir()})
	f.createClass(f.class, func(c *storagev1.StorageClass) { c.AllowVolumeExpansion = ptr.To(true) })
	claim := f.createClaim("data", f.class, nil)
	f.waitBound(claim.Name)

	f.setRequest(claim.Name, "2Mi")
	f.waitEventSaying(claim, provisioning.EventResizeFailed, "cannot expand volumes")
	f.waitResizeStatus(claim.Name, corev1.PersistentVolumeClaimControllerResizeInfeasible)
	got, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(t.Context(), claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	capacity := got.Status.Capacity[corev1.ResourceStorage]
	volume := f.volume(volumeName(claim)).Spec.Capacity[corev1.ResourceStorage]
	if capacity.String() != "1Mi" || volume.String() != "1Mi" {
		t.Errorf("after the refusal: claim capacity %s, volume %s; want 1Mi and 1Mi", capacity.String(), volume.String())
	}
}

// setRequest sets the storage request of a claim to size, as its user
// does to grow it.
func (f *fixture) setRequest(claim, size string) {
	f.t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"resources":{"requests":{"storage":%q}}}}`, size))
	if _, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Patch(f.t.Context(), claim, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatalf("cannot request %s for claim %s: %v", size, claim, err)
	}
}

// waitResized waits until claim and its PersistentVolume have size, with no
// resize status or condition left on the claim.
func (f *fixture) waitResized(claim, size string) {
	f.t.Helper()
	f.eventually(fmt.Sprintf("claim %s resized to %s", claim, size), func(ctx context.Context) (bool, error) {
		c, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pv, err := f.admin.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		volume, capacity := pv.Spec.Capacity[corev1.ResourceStorage], c.Status.Capacity[corev1.ResourceStorage]
		resizing := slices.ContainsFunc(c.Status.Conditions, func(cond corev1.PersistentVolumeClaimCondition) bool {
			return cond.Type == corev1.PersistentVolumeClaimResizing || cond.Type == corev1.PersistentVolumeClaimFileSystemResizePending ||
				cond.Type == corev1.PersistentVolumeClaimControllerResizeError
		})
		return volume.String() == size && capacity.String() == size && c.Status.AllocatedResourceStatuses == nil && !resizing, nil
	})
}

// waitResizeStatus waits until the resize status of claim is status.
func (f *fixture) waitResizeStatus(claim string, status corev1.ClaimResourceStatus) {
	f.t.Helper()
	f.eventually(fmt.Sprintf("claim %s's resize %s", claim, status), func(ctx context.Context) (bool, error) {
		c, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == status, nil
	})
}

// waitEventSaying waits for an Event of reason on claim, of the controller
// under test, whose message holds text.
func (f *fixture) waitEventSaying(claim *corev1.PersistentVolumeClaim, reason, text string) {
	f.t.Helper()
	f.eventually(fmt.Sprintf("a %s Event on %s saying %q", reason, claim.Name, text), func(context.Context) (bool, error) {
		for _, e := range ours(f.events(claim, reason)) {
			if strings.Contains(e.Message, text) {
				return true, nil
			}
		}
		return false, nil
	})
}
