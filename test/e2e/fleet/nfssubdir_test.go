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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// subdirCase is one StorageClass of nfs-subdir-external-provisioner v4.0.3,
// with the claims it made before the switch and those made after, and
// what becomes of their directories when the claims are deleted, as its
// Delete decides (cmd/nfs-subdir-external-provisioner/provisioner.go:146-189
// at 59a3ca2).
type subdirCase struct {
	params  map[string]string
	pattern bool
	// remade, when set, replaces the class's parameters once the fates
	// of its old volumes are recorded.
	remade map[string]string
	// want is what is left of each old and new volume: "deleted", "kept",
	// or the name of its archive at the top of the export.
	want    string
	wantNew string
}

// A switch from nfs-subdir-external-provisioner with backend.nfs.nfsSubdir:
// the volumes it made (unmarked directories in its layout, PVs as it writes
// them) each get their fate recorded from their class before anything is
// done to them; then every claim, old and new, is deleted, and each
// directory is deleted, archived or kept as that provisioner would have
// done it, a class remade after the switch changing nothing for the old
// volumes.
func TestMigrationFromNFSSubdirExact(t *testing.T) {
	f := newFixture(t)
	f.startManager("migrate-subdir")
	e := f.serveNFS(nfsserver.Options{})
	port := strconv.Itoa(e.server.Port())
	oldName := "cluster.local/" + f.prefix

	cases := map[string]subdirCase{
		"default":    {want: "archived-%s", wantNew: "archived-%s"},
		"capdelete":  {params: map[string]string{"onDelete": "Delete", "archiveOnDelete": "true"}, want: "archived-%s", wantNew: "archived-%s"},
		"delete":     {params: map[string]string{"onDelete": "delete"}, want: "deleted", wantNew: "deleted"},
		"retain":     {params: map[string]string{"onDelete": "retain"}, want: "kept", wantNew: "kept"},
		"noarchive":  {params: map[string]string{"archiveOnDelete": "False"}, want: "deleted", wantNew: "deleted"},
		"pattern":    {params: map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.name}"}, pattern: true, want: "archived-%s", wantNew: "archived-%s"},
		"edited":     {params: map[string]string{"onDelete": "retain"}, remade: map[string]string{"onDelete": "delete"}, want: "kept", wantNew: "deleted"},
		"editedback": {params: map[string]string{"onDelete": "delete"}, remade: map[string]string{"onDelete": "retain"}, want: "deleted", wantNew: "kept"},
	}
	dirs := map[string]string{}
	for name, c := range cases {
		f.class(f.prefix+"-"+name, oldName, c.params)
		claim := "old-" + name
		pvName := "pvc-" + f.prefix + "-" + claim
		dirs[claim] = fmt.Sprintf("%s-%s-%s", f.namespace, claim, pvName)
		if c.pattern {
			dirs[claim] = path.Join(f.namespace, claim)
		}
		writeVolumeFile(t, filepath.Join(e.dir, dirs[claim]))
		pv := f.oldPV(pvName, claim, f.prefix+"-"+name, oldName)
		pv.Spec.NFS = &corev1.NFSVolumeSource{Server: nfsAddress, Path: path.Join(exportPath, dirs[claim])}
		pv.Spec.MountOptions = []string{"port=" + port, "mountport=" + port}
		f.adopt(pv, claim)
	}
	// An archive of the same name from before: nfs-subdir's rename would
	// fail on every retry; the archive gets a suffix and this one stays.
	writeVolumeFile(t, filepath.Join(e.dir, "archived-old-pattern"))

	f.nfsSubdirProvisioner(e, oldName)
	for name := range cases {
		f.waitRecorded("pvc-" + f.prefix + "-old-" + name)
	}
	for name, c := range cases {
		if c.remade != nil {
			f.remakeClass(f.prefix+"-"+name, c.remade)
		}
	}

	for name := range cases {
		claim := "new-" + name
		f.claim(claim, f.prefix+"-"+name)
		f.waitBound(claim)
		pv := f.boundVolume(claim)
		dirs[claim] = path.Base(pv.Spec.NFS.Path)
		if cases[name].pattern {
			dirs[claim] = path.Join(f.namespace, claim)
		}
		writeVolumeFile(t, filepath.Join(e.dir, dirs[claim]))
	}

	got, want := map[string]string{}, map[string]string{}
	for name, c := range cases {
		for claim, fate := range map[string]string{"old-" + name: c.want, "new-" + name: c.wantNew} {
			pv := f.boundVolume(claim)
			f.release(claim, pv.Name)
			got[claim] = subdirOutcome(t, e.dir, dirs[claim])
			want[claim] = fate
			if fate != "deleted" && fate != "kept" {
				want[claim] = fmt.Sprintf(fate, path.Base(dirs[claim]))
			}
		}
	}
	want["old-pattern"] = "archived-old-pattern-*"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what is left of each volume's directory (-want +got):\n%s", diff)
	}
	if data, err := os.ReadFile(filepath.Join(e.dir, "archived-old-pattern", "data")); err != nil || string(data) != volumeFileContent {
		t.Errorf("the earlier archive archived-old-pattern holds %q (%v), want it untouched", data, err)
	}
}

// TestMigrationFromNFSSubdirUndecided: an old volume whose class
// nfs-subdir-external-provisioner could not read at delete time (an
// archiveOnDelete that is no boolean) gets no fate recorded; its release
// fails with an Event saying what to do, and its directory stays, as that
// provisioner's Delete fails on every retry (provisioner.go:177-180 at
// 59a3ca2). A new claim of that class is refused with an Event naming the
// parameter.
func TestMigrationFromNFSSubdirUndecided(t *testing.T) {
	f := newFixture(t)
	f.startManager("migrate-undecided")
	e := f.serveNFS(nfsserver.Options{})
	port := strconv.Itoa(e.server.Port())
	oldName := "cluster.local/" + f.prefix
	class := f.prefix + "-bad"
	f.class(class, oldName, map[string]string{"archiveOnDelete": "yes"})
	pvName := "pvc-" + f.prefix + "-old"
	dir := fmt.Sprintf("%s-old-%s", f.namespace, pvName)
	writeVolumeFile(t, filepath.Join(e.dir, dir))
	pv := f.oldPV(pvName, "old", class, oldName)
	pv.Spec.NFS = &corev1.NFSVolumeSource{Server: nfsAddress, Path: path.Join(exportPath, dir)}
	pv.Spec.MountOptions = []string{"port=" + port, "mountport=" + port}
	f.adopt(pv, "old")
	f.nfsSubdirProvisioner(e, oldName)

	f.claim("new", class)
	f.waitEvent(f.namespace, "new", corev1.EventTypeWarning, provisioning.EventProvisioningFailed, "parameter archiveOnDelete", `use "true" or "false"`)

	if err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Delete(f.ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitEvent(metav1.NamespaceDefault, pvName, corev1.EventTypeWarning, provisioning.EventVolumeFailedDelete, "the fate of its directory is not recorded", "provfleet.io/on-delete")
	if got := subdirOutcome(t, e.dir, dir); got != "kept" {
		t.Errorf("directory of the undecided volume: %s, want kept", got)
	}
}

// nfsSubdirProvisioner creates an NFS ProvisionerConfig of e that takes
// over the nfs-subdir-external-provisioner v4.0.3 named oldName.
func (f *fixture) nfsSubdirProvisioner(e *nfsExport, oldName string) {
	f.t.Helper()
	f.provisioner(f.prefix, func(pc *v1alpha1.ProvisionerConfig) {
		f.nfsSpec(pc, e)
		pc.Spec.Backend.NFS.NFSSubdir = &v1alpha1.NFSSubdirOrigin{ProvisionerName: v1alpha1.ProvisionerName(oldName), Version: "v4.0.3"}
		pc.Spec.AdditionalProvisionerNames = []v1alpha1.ProvisionerName{v1alpha1.ProvisionerName(oldName)}
	})
}

// waitRecorded waits until the PV pvName has a fate recorded.
func (f *fixture) waitRecorded(pvName string) {
	f.t.Helper()
	f.eventually("fate recorded on "+pvName, func(ctx context.Context) (bool, error) {
		pv, err := f.kube.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		_, ok := pv.Annotations[annOnDelete]
		return ok && pv.Annotations[annDeleteUnmarked] == "true", nil
	})
}

// subdirOutcome says what is left of the volume directory dir of the export
// after its release: "kept" (with its file intact), the name of its archive
// at the top of the export (archived-<name>-* for one with a suffix), or
// "deleted".
func subdirOutcome(t *testing.T, export, dir string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(export, dir)); err == nil {
		checkVolumeFile(t, filepath.Join(export, dir))
		return "kept"
	}
	archive := "archived-" + path.Base(dir)
	suffixed, err := filepath.Glob(filepath.Join(export, archive+"-*"))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case len(suffixed) == 1:
		checkVolumeFile(t, suffixed[0])
		return archive + "-*"
	case len(suffixed) > 1:
		return fmt.Sprintf("%d archives %s-*", len(suffixed), archive)
	}
	if _, err := os.Stat(filepath.Join(export, archive, "data")); err == nil {
		checkVolumeFile(t, filepath.Join(export, archive))
		return archive
	}
	return "deleted"
}

// checkVolumeFile checks that dir holds the file writeVolumeFile wrote.
func checkVolumeFile(t *testing.T, dir string) {
	t.Helper()
	if data, err := os.ReadFile(filepath.Join(dir, "data")); err != nil || string(data) != volumeFileContent {
		t.Errorf("%s holds %q (%v), want %q", dir, data, err, volumeFileContent)
	}
}
