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
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// The annotations docs/migrating.md has an administrator set on the
// PersistentVolumes an older provisioner made.
const (
	annDeleteUnmarked = "provfleet.io/delete-unmarked"
	annOnDelete       = "provfleet.io/on-delete"
	annProvisionedBy  = "pv.kubernetes.io/provisioned-by"
)

// An nfs-subdir-external-provisioner install moved over as docs/migrating.md
// says: a ProvisionerConfig answers to the old name, the old PVs (an
// unmarked directory <namespace>-<claim>-<PV name> each, mount options from
// their class) are deleted by the policy recorded on them or, with none
// recorded, by the ProvisionerConfig's, and a class with nfs-subdir's
// parameters provisions into its ${...} path and archives on delete, even
// after the class changed.
func TestMigrationFromNFSSubdir(t *testing.T) {
	f := newFixture(t)
	f.startManager("migrate-nfs")
	e := f.serveNFS(nfsserver.Options{})
	port := strconv.Itoa(e.server.Port())
	oldName := "cluster.local/" + f.prefix
	pcName := f.prefix
	f.nfsProvisioner(pcName, e, func(b *v1alpha1.NFSBackend) { b.OnDelete = v1alpha1.OnDeleteArchive })
	ownName := string(f.config(pcName).Spec.ProvisionerName)
	f.answerTo(pcName, oldName)

	oldClass := f.prefix + "-old"
	f.class(oldClass, oldName, map[string]string{"archiveOnDelete": "true"})
	dirs := map[string]string{}
	for claim, onDelete := range map[string]string{"by-config": "", "by-record": "Delete"} {
		pvName := "pvc-" + f.prefix + "-" + claim
		dirs[claim] = fmt.Sprintf("%s-%s-%s", f.namespace, claim, pvName)
		writeVolumeFile(t, filepath.Join(e.dir, dirs[claim]))
		pv := f.oldPV(pvName, claim, oldClass, oldName)
		pv.Spec.NFS = &corev1.NFSVolumeSource{Server: nfsAddress, Path: path.Join(exportPath, dirs[claim])}
		pv.Spec.MountOptions = []string{"port=" + port, "mountport=" + port}
		pv.Annotations[annDeleteUnmarked] = "true"
		if onDelete != "" {
			pv.Annotations[annOnDelete] = onDelete
		}
		f.adopt(pv, claim)
	}

	newClass := f.prefix + "-subdir"
	f.class(newClass, oldName, map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.labels.app}"})
	f.labelledClaim("new", newClass, map[string]string{"app": "web"})
	f.waitBound("new")
	pv := f.boundVolume("new")
	e.checkVolume(t, pv, path.Join(f.namespace, "web"), []string{"mountport=" + port, "port=" + port})
	wantAnn := map[string]string{annOnDelete: "Archive", annProvisionedBy: ownName}
	if diff := cmp.Diff(wantAnn, pickAnnotations(pv, annOnDelete, annProvisionedBy)); diff != "" {
		t.Errorf("annotations of the new PV (-want +got):\n%s", diff)
	}
	// The class changes before its volume goes: the recorded policy holds.
	f.remakeClass(newClass, map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.labels.app}", "onDelete": "delete"})

	f.release("by-config", "pvc-"+f.prefix+"-by-config")
	f.release("by-record", "pvc-"+f.prefix+"-by-record")
	f.release("new", pv.Name)
	left := map[string][]string{}
	for claim, dir := range dirs {
		left[claim] = leftBeside(t, filepath.Join(e.dir, dir))
	}
	left["new"] = leftBeside(t, filepath.Join(e.dir, f.namespace, "web"))
	want := map[string][]string{"by-config": {"archived"}, "by-record": nil, "new": {"archived"}}
	if diff := cmp.Diff(want, left); diff != "" {
		t.Errorf("what is left of each volume's directory on the server (-want +got):\n%s", diff)
	}

	mixed := f.prefix + "-mixed"
	f.class(mixed, oldName, map[string]string{"pathPattern": "${.PVC.namespace}/{{.PVC.Name}}"})
	f.claim("mixed", mixed)
	f.waitEvent(f.namespace, "mixed", corev1.EventTypeWarning, provisioning.EventProvisioningFailed, "mixes ${...} keys", "use one syntax")
}

// A local-path-provisioner install moved over as docs/migrating.md says: a
// hostPath ProvisionerConfig whose path is local-path's answers to
// rancher.io/local-path, deletes the old hostPath and local PVs (an
// unmarked directory <PV name>_<namespace>_<claim> each, pinned to the node
// by affinity alone) through the node agent, and provisions a claim of the
// old class, whose nodePath is its path.
func TestMigrationFromLocalPath(t *testing.T) {
	const oldName = "rancher.io/local-path"
	f := newFixture(t)
	f.startManager("migrate-lp")
	node := "node-migrate-lp"
	base := filepath.Join(f.root, "local-path-provisioner")
	pcName := f.prefix
	ownName := string(f.provisioner(pcName, func(pc *v1alpha1.ProvisionerConfig) {
		pc.Spec.Backend.HostPath.Path = v1alpha1.AbsolutePath(base)
		pc.Spec.AdditionalProvisionerNames = []v1alpha1.ProvisionerName{oldName}
	}).Spec.ProvisionerName)
	f.waitReady(pcName, 1, v1alpha1.ReasonRunning)

	oldClass := f.prefix + "-local-path"
	f.createClass(&storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: oldClass},
		Provisioner:       oldName,
		Parameters:        map[string]string{"nodePath": base},
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	})
	var dirs []string
	for _, claim := range []string{"hostpath", "local"} {
		pvName := "pvc-" + f.prefix + "-" + claim
		dir := filepath.Join(base, fmt.Sprintf("%s_%s_%s", pvName, f.namespace, claim))
		dirs = append(dirs, dir)
		writeVolumeFile(t, dir)
		pv := f.oldPV(pvName, claim, oldClass, oldName)
		if claim == "local" {
			pv.Spec.Local = &corev1.LocalVolumeSource{Path: dir}
		} else {
			pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}
		}
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}}
		pv.Annotations[annDeleteUnmarked] = "true"
		f.adopt(pv, claim)
	}

	f.labelledClaim("new", oldClass, nil, func(c *corev1.PersistentVolumeClaim) {
		c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": node}
	})
	f.waitBound("new")
	pv := f.boundVolume("new")
	newDir := filepath.Join(base, pv.Name)
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != newDir || pv.Annotations[annProvisionedBy] != ownName {
		t.Errorf("new PV %s: source %+v, provisioned by %q; want hostPath %s by %s", pv.Name, pv.Spec.PersistentVolumeSource, pv.Annotations[annProvisionedBy], newDir, ownName)
	}
	dirs = append(dirs, newDir)

	f.release("hostpath", "pvc-"+f.prefix+"-hostpath")
	f.release("local", "pvc-"+f.prefix+"-local")
	f.release("new", pv.Name)
	left := map[string][]string{}
	for _, dir := range dirs {
		left[filepath.Base(dir)] = leftBeside(t, dir)
	}
	want := map[string][]string{}
	for _, dir := range dirs {
		want[filepath.Base(dir)] = nil
	}
	if diff := cmp.Diff(want, left); diff != "" {
		t.Errorf("what is left of each volume's directory on the node (-want +got):\n%s", diff)
	}
}

// answerTo adds name to the names the ProvisionerConfig pcName answers to,
// and waits until it runs with them.
func (f *fixture) answerTo(pcName, name string) {
	f.t.Helper()
	f.editConfig(pcName, func(pc *v1alpha1.ProvisionerConfig) {
		pc.Spec.AdditionalProvisionerNames = append(pc.Spec.AdditionalProvisionerNames, v1alpha1.ProvisionerName(name))
	})
}

// editConfig changes the ProvisionerConfig pcName as change says, and waits
// until it runs so.
func (f *fixture) editConfig(pcName string, change func(*v1alpha1.ProvisionerConfig)) {
	f.t.Helper()
	var updated *v1alpha1.ProvisionerConfig
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pc := f.config(pcName)
		change(pc)
		var err error
		updated, err = f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Update(f.ctx, pc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.t.Fatalf("cannot update ProvisionerConfig %s: %v", pcName, err)
	}
	f.waitReady(pcName, updated.Generation, v1alpha1.ReasonRunning)
}

// oldPV returns a bound PersistentVolume of class as provisioner made it for
// the claim of the test's namespace: reclaim policy Delete, and no source.
func (f *fixture) oldPV(name, claim, class, provisioner string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              class,
			VolumeMode:                    ptr.To(corev1.PersistentVolumeFilesystem),
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: f.namespace, Name: claim},
		},
	}
}

// adopt creates pv and its claim, as the old provisioner left them, and
// waits until they are bound.
func (f *fixture) adopt(pv *corev1.PersistentVolume, claim string) {
	f.t.Helper()
	if _, err := f.kube.CoreV1().PersistentVolumes().Create(f.ctx, pv, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("cannot create PV %s: %v", pv.Name, err)
	}
	f.t.Cleanup(func() {
		_ = f.kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	f.labelledClaim(claim, pv.Spec.StorageClassName, nil, func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = pv.Name })
	f.waitBound(claim)
}

// labelledClaim creates a claim of class with labels, as mutate says.
func (f *fixture) labelledClaim(name, class string, labels map[string]string, mutate ...func(*corev1.PersistentVolumeClaim)) {
	f.t.Helper()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.namespace, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	for _, m := range mutate {
		m(claim)
	}
	if _, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Create(f.ctx, claim, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("cannot create claim %s: %v", name, err)
	}
}

// createClass creates class, deleted when the test ends.
func (f *fixture) createClass(class *storagev1.StorageClass) {
	f.t.Helper()
	if _, err := f.kube.StorageV1().StorageClasses().Create(f.ctx, class, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("cannot create StorageClass %s: %v", class.Name, err)
	}
	f.t.Cleanup(func() {
		_ = f.kube.StorageV1().StorageClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
	})
}

// remakeClass replaces the class name with one of parameters: those of a
// class cannot change in place.
func (f *fixture) remakeClass(name string, parameters map[string]string) {
	f.t.Helper()
	class, err := f.kube.StorageV1().StorageClasses().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.kube.StorageV1().StorageClasses().Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
	class.ResourceVersion, class.UID, class.Parameters = "", "", parameters
	if _, err := f.kube.StorageV1().StorageClasses().Create(f.ctx, class, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// volumeFileContent is what writeVolumeFile writes.
const volumeFileContent = "the old provisioner's data"

// writeVolumeFile makes the directory dir of a volume with a file in it.
func writeVolumeFile(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte(volumeFileContent), 0o600); err != nil {
		t.Fatal(err)
	}
}

// pickAnnotations returns the annotations keys of pv.
func pickAnnotations(pv *corev1.PersistentVolume, keys ...string) map[string]string {
	out := map[string]string{}
	for _, key := range keys {
		if value, ok := pv.Annotations[key]; ok {
			out[key] = value
		}
	}
	return out
}
