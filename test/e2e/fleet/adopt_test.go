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
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

const (
	annAdoptedFrom = "provfleet.io/adopted-from"
	annAdoptedBy   = "provfleet.io/adopted-by"
)

// A claim of an nfs-subdir class with a fixed pathPattern and onDelete
// retain, deleted and made again, after the switch: its old volume, kept
// (reclaim policy Retain), names the directory and the claim. Without
// adoptRetainedDirectories the claim is refused, as before; with it, it is
// bound to a new volume on the same directory, its file intact, and the old
// volume is marked. A claim whose pattern hits a directory no volume names
// stays refused, saying why it was not adopted.
func TestAdoptRetainedDirectory(t *testing.T) {
	f := newFixture(t)
	f.startManager("adopt")
	e := f.serveNFS(nfsserver.Options{})
	port := strconv.Itoa(e.server.Port())
	oldName := "cluster.local/" + f.prefix
	class := f.prefix + "-fixed"
	f.class(class, oldName, map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.name}", "onDelete": "retain"})

	dir := path.Join(f.namespace, "data")
	writeVolumeFile(t, filepath.Join(e.dir, dir))
	old := f.oldPV("pvc-"+f.prefix+"-old", "data", class, oldName)
	old.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	old.Spec.NFS = &corev1.NFSVolumeSource{Server: nfsAddress, Path: path.Join(exportPath, dir)}
	old.Spec.MountOptions = []string{"port=" + port, "mountport=" + port}
	f.adopt(old, "data")
	if err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Delete(f.ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitPhase(old.Name, corev1.VolumeReleased)
	writeVolumeFile(t, filepath.Join(e.dir, f.namespace, "stray"))

	f.nfsSubdirProvisioner(e, oldName)
	f.claim("data", class)
	f.claim("stray", class)
	f.waitEvent(f.namespace, "data", corev1.EventTypeWarning, provisioning.EventProvisioningFailed, "the directory of another volume")
	f.waitEvent(f.namespace, "stray", corev1.EventTypeWarning, provisioning.EventProvisioningFailed, "it already exists")

	f.editConfig(f.prefix, func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Backend.NFS.AdoptRetainedDirectories = true })
	f.waitBound("data")
	pv := f.boundVolume("data")
	e.checkVolume(t, pv, dir, []string{"mountport=" + port, "port=" + port})
	checkVolumeFile(t, filepath.Join(e.dir, dir))
	want := map[string]string{annAdoptedFrom: old.Name, annOnDelete: "Retain"}
	got := map[string]string{annAdoptedFrom: pv.Annotations[annAdoptedFrom], annOnDelete: pv.Annotations[annOnDelete]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("annotations of the adopting volume (-want +got):\n%s", diff)
	}
	marked, err := f.kube.CoreV1().PersistentVolumes().Get(f.ctx, old.Name, metav1.GetOptions{})
	if err != nil || marked.Annotations[annAdoptedBy] != pv.Name {
		t.Errorf("old volume %s adopted-by = %q (%v), want %s", old.Name, marked.Annotations[annAdoptedBy], err, pv.Name)
	}
	f.waitEvent(f.namespace, "data", corev1.EventTypeNormal, "DirectoryAdopted", old.Name, dir)
	f.waitEvent(f.namespace, "stray", corev1.EventTypeWarning, provisioning.EventProvisioningFailed, "not adopted: no PersistentVolume names it")
	if pvs := f.volumesOf()["stray"]; len(pvs) != 0 {
		t.Errorf("the stray claim has volumes %v, want none", pvs)
	}

	// The new volume's release keeps the directory (its fate is Retain),
	// although the old volume still names it.
	f.release("data", pv.Name)
	if got := subdirOutcome(t, e.dir, dir); got != "kept" {
		t.Errorf("directory after the adopting volume's release: %s, want kept", got)
	}
	if left := f.volumesOf()["data"]; !slices.Equal(left, []string{oldName}) {
		t.Errorf("volumes of claim data after the release: %v, want only the old one", left)
	}
}

// waitPhase waits until the PV pvName is in phase.
func (f *fixture) waitPhase(pvName string, phase corev1.PersistentVolumePhase) {
	f.t.Helper()
	f.eventually("PV "+pvName+" "+string(phase), func(ctx context.Context) (bool, error) {
		pv, err := f.kube.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return err == nil && pv.Status.Phase == phase, nil
	})
}
