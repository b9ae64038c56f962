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
	"context"
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// An NFS volume grows when its claim asks for more within the capacity
// budget; a size past the budget is refused with an Event and leaves the
// PersistentVolume alone until the request is lowered again, and the
// grown volume counts against the budget of later claims.
func TestExpansionOfNFSVolumes(t *testing.T) {
	f := newFixture(t)
	f.startManager("expand-nfs")
	e := f.serveNFS(nfsserver.Options{})
	f.provisioner(f.prefix, func(pc *v1alpha1.ProvisionerConfig) {
		f.nfsSpec(pc, e)
		pc.Spec.Backend.NFS.Capacity = &v1alpha1.CapacitySpec{Storage: ptrQuantity("10Mi")}
	})
	class := f.prefix
	f.allowExpansion(class)
	f.claim("data", class)
	f.waitBound("data")

	f.setRequest("data", "4Mi")
	f.waitResized("data", "4Mi")

	f.setRequest("data", "20Mi")
	f.waitEvent(f.namespace, "data", corev1.EventTypeWarning, provisioning.EventResizeFailed, "capacity budget exhausted", "20Mi")
	f.waitResizeRefused("data")
	if got := f.boundVolume("data").Spec.Capacity[corev1.ResourceStorage]; got.String() != "4Mi" {
		t.Errorf("capacity of the refused volume: %s, want 4Mi", got.String())
	}

	f.setRequest("data", "6Mi")
	f.waitResized("data", "6Mi")

	f.labelledClaim("later", class, nil, func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("5Mi")
	})
	f.waitEvent(f.namespace, "later", corev1.EventTypeWarning, provisioning.EventProvisioningFailed, "capacity exhausted: 6Mi of 10Mi in use")
}

// Claims of nfs-subdir-external-provisioner whose request their users
// raised while it ignored it start resizing once provfleet takes them
// over: within the budget they grow, past it they are refused with an
// Event; nothing else happens to them.
func TestExpansionOfMigratedClaims(t *testing.T) {
	f := newFixture(t)
	f.startManager("expand-migrated")
	e := f.serveNFS(nfsserver.Options{})
	port := strconv.Itoa(e.server.Port())
	oldName := "cluster.local/" + f.prefix
	class := f.prefix + "-old"
	f.class(class, oldName, map[string]string{"archiveOnDelete": "false"})
	f.allowExpansion(class)
	for _, claim := range []string{"grown", "huge"} {
		pvName := "pvc-" + f.prefix + "-" + claim
		dir := fmt.Sprintf("%s-%s-%s", f.namespace, claim, pvName)
		writeVolumeFile(t, filepath.Join(e.dir, dir))
		pv := f.oldPV(pvName, claim, class, oldName)
		pv.Spec.NFS = &corev1.NFSVolumeSource{Server: nfsAddress, Path: path.Join(exportPath, dir)}
		pv.Spec.MountOptions = []string{"port=" + port, "mountport=" + port}
		f.adopt(pv, claim)
		// As the PV binder left a claim it had the old provisioner make.
		f.annotateClaim(claim, map[string]string{"volume.kubernetes.io/storage-provisioner": oldName})
	}
	f.setRequest("grown", "3Mi")
	f.setRequest("huge", "1Ti")

	f.provisioner(f.prefix, func(pc *v1alpha1.ProvisionerConfig) {
		f.nfsSpec(pc, e)
		pc.Spec.Backend.NFS.NFSSubdir = &v1alpha1.NFSSubdirOrigin{ProvisionerName: v1alpha1.ProvisionerName(oldName), Version: "v4.0.3"}
		pc.Spec.AdditionalProvisionerNames = []v1alpha1.ProvisionerName{v1alpha1.ProvisionerName(oldName)}
		pc.Spec.Backend.NFS.Capacity = &v1alpha1.CapacitySpec{Storage: ptrQuantity("10Mi")}
	})
	f.waitResized("grown", "3Mi")
	f.waitEvent(f.namespace, "huge", corev1.EventTypeWarning, provisioning.EventResizeFailed, "capacity budget exhausted", "1Ti")
	f.waitResizeRefused("huge")
	if got := f.boundVolume("huge").Spec.Capacity[corev1.ResourceStorage]; got.String() != "1Mi" {
		t.Errorf("capacity of the refused volume: %s, want 1Mi", got.String())
	}
	for _, claim := range []string{"grown", "huge"} {
		checkVolumeFile(t, filepath.Join(e.dir, fmt.Sprintf("%s-%s-pvc-%s-%s", f.namespace, claim, f.prefix, claim)))
	}
}

func ptrQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// allowExpansion lets the claims of class grow.
func (f *fixture) allowExpansion(class string) {
	f.t.Helper()
	patch := []byte(`{"allowVolumeExpansion":true}`)
	if _, err := f.kube.StorageV1().StorageClasses().Patch(f.ctx, class, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// annotateClaim adds annotations to claim.
func (f *fixture) annotateClaim(claim string, annotations map[string]string) {
	f.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Patch(f.ctx, claim, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// setRequest sets the storage request of claim to size, as its user does
// to grow it.
func (f *fixture) setRequest(claim, size string) {
	f.t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"resources":{"requests":{"storage":%q}}}}`, size))
	if _, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Patch(f.ctx, claim, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatalf("cannot request %s for claim %s: %v", size, claim, err)
	}
}

// resizedState is what a finished resize leaves on a claim and its volume.
type resizedState struct {
	Volume, Capacity string
	Statuses         map[corev1.ResourceName]corev1.ClaimResourceStatus
	Conditions       []corev1.PersistentVolumeClaimConditionType
}

// resizeConditions are the claim conditions a resize sets; others, such as
// kube-controller-manager's Unused, are no business of it.
var resizeConditions = []corev1.PersistentVolumeClaimConditionType{
	corev1.PersistentVolumeClaimResizing, corev1.PersistentVolumeClaimFileSystemResizePending, corev1.PersistentVolumeClaimControllerResizeError,
}

// waitResized waits until claim and its PersistentVolume have size, with
// no resize status or condition left.
func (f *fixture) waitResized(claim, size string) {
	f.t.Helper()
	want := resizedState{Volume: size, Capacity: size}
	var got resizedState
	f.eventually("claim "+claim+" resized to "+size, func(ctx context.Context) (bool, error) {
		c, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pv, err := f.kube.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		volume, capacity := pv.Spec.Capacity[corev1.ResourceStorage], c.Status.Capacity[corev1.ResourceStorage]
		got = resizedState{Volume: volume.String(), Capacity: capacity.String(), Statuses: c.Status.AllocatedResourceStatuses}
		for _, cond := range c.Status.Conditions {
			if slices.Contains(resizeConditions, cond.Type) {
				got.Conditions = append(got.Conditions, cond.Type)
			}
		}
		return cmp.Equal(want, got), nil
	})
}

// waitResizeRefused waits until the resize status of claim is
// ControllerResizeInfeasible.
func (f *fixture) waitResizeRefused(claim string) {
	f.t.Helper()
	const status = corev1.PersistentVolumeClaimControllerResizeInfeasible
	f.eventually(fmt.Sprintf("claim %s's resize %s", claim, status), func(ctx context.Context) (bool, error) {
		c, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == status, nil
	})
}

// Claims that local-path-provisioner made on a node, whose class allows
// expansion and whose users raised their requests while it ignored them,
// start resizing once a provisioner served by node agents answers to its
// name: each within the budget of its own node, counting the node's other
// volumes; past it refused with an Event, the volume and its data left as
// they were.
func TestExpansionOfMigratedLocalPathClaimsOnNodes(t *testing.T) {
	const oldName = "rancher.io/local-path"
	c := newNodeCluster(t)
	node := c.nodes[0]
	base := filepath.Join(c.disks[node], "volumes")
	oldClass := c.prefix + "-local-path"
	c.createClass(&storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: oldClass},
		Provisioner:          oldName,
		Parameters:           map[string]string{"nodePath": base},
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowVolumeExpansion: ptr.To(true),
	})
	dirs := map[string]string{}
	for _, claim := range []string{"grown", "huge"} {
		pvName := "pvc-" + c.prefix + "-" + claim
		dirs[claim] = filepath.Join(base, fmt.Sprintf("%s_%s_%s", pvName, c.namespace, claim))
		writeVolumeFile(t, dirs[claim])
		pv := c.oldPV(pvName, claim, oldClass, oldName)
		pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: dirs[claim], Type: ptr.To(corev1.HostPathDirectoryOrCreate)}
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}}
		c.adopt(pv, claim)
		c.annotateClaim(claim, map[string]string{provisioning.AnnStorageProvisioner: oldName, provisioning.AnnSelectedNode: node})
	}
	c.setRequest("grown", "3Mi")
	c.setRequest("huge", "1Ti")

	c.provisioner(c.prefix, storagev1.VolumeBindingWaitForFirstConsumer, func(hp *v1alpha1.HostPathBackend) {
		hp.Capacity = &v1alpha1.CapacitySpec{Storage: ptrQuantity("10Mi")}
	})
	c.answerTo(c.prefix, oldName)

	c.waitResized("grown", "3Mi")
	c.waitEvent(c.namespace, "huge", corev1.EventTypeWarning, provisioning.EventResizeFailed, fmt.Sprintf("capacity budget of node %q is exhausted", node), "1Ti")
	c.waitResizeRefused("huge")

	// The node's other volume counts: 1Mi of huge and 9.5Mi are past 10Mi.
	c.setRequest("grown", "9728Ki")
	c.waitEvent(c.namespace, "grown", corev1.EventTypeWarning, provisioning.EventResizeFailed, "its other volumes use 1Mi of 10Mi")
	c.waitResizeRefused("grown")
	c.setRequest("grown", "9Mi")
	c.waitResized("grown", "9Mi")

	got := map[string]string{}
	for _, claim := range []string{"grown", "huge"} {
		capacity := c.boundVolume(claim).Spec.Capacity[corev1.ResourceStorage]
		got[claim] = capacity.String()
		checkVolumeFile(t, dirs[claim])
	}
	if diff := cmp.Diff(map[string]string{"grown": "9Mi", "huge": "1Mi"}, got); diff != "" {
		t.Errorf("capacity of the volumes (-want +got):\n%s", diff)
	}
}
