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
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv"
)

// annNode is the node a hostPath or local PV's directory is on, as the
// node agents read it.
const annNode = "hostpath.provfleet.io/node"

// migrateCommand runs manager migrate with the administrator's kubeconfig
// and args, and returns its output and error.
func (f *fixture) migrateCommand(args ...string) (stdout, stderr string, err error) {
	f.t.Helper()
	cmd := exec.CommandContext(f.ctx, managerBinary, append([]string{"migrate", "--kubeconfig", testenv.Env(f.t).AdminKubeconfigPath()}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// oldDeployment creates, in the test's namespace, the Deployment name of an
// old provisioner with one replica and container, and returns a function
// that scales it to zero. The control plane runs no Deployment
// controller: no pod is made.
func (f *fixture) oldDeployment(name string, container corev1.Container) (scaleToZero func()) {
	f.t.Helper()
	labels := map[string]string{"app": name}
	container.Name = name
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{container}},
			},
		},
	}
	if _, err := f.kube.AppsV1().Deployments(f.namespace).Create(f.ctx, d, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("cannot create Deployment %s: %v", name, err)
	}
	return func() {
		f.t.Helper()
		patch := []byte(`{"spec":{"replicas":0}}`)
		if _, err := f.kube.AppsV1().Deployments(f.namespace).Patch(f.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			f.t.Fatalf("cannot scale Deployment %s to zero: %v", name, err)
		}
	}
}

// recordedFates returns, for each PV named, its annotations of keys.
func (f *fixture) recordedFates(names []string, keys ...string) map[string]map[string]string {
	f.t.Helper()
	got := map[string]map[string]string{}
	for _, name := range names {
		pv, err := f.kube.CoreV1().PersistentVolumes().Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		got[name] = pickAnnotations(pv, keys...)
	}
	return got
}

// runPlan runs the plan of args: refused while the old provisioner runs,
// with nothing changed; printed and nothing changed with --dry-run once it
// is scaled to zero; then applied. It returns the applied plan's output.
func (f *fixture) runPlan(scaleToZero func(), pcName string, pvNames []string, args ...string) string {
	f.t.Helper()
	keys := []string{annOnDelete, annDeleteUnmarked, annNode}
	before := f.recordedFates(pvNames, keys...)
	unchanged := func(when string) {
		f.t.Helper()
		if diff := cmp.Diff(before, f.recordedFates(pvNames, keys...)); diff != "" {
			f.t.Errorf("%s changed the volumes (-before +after):\n%s", when, diff)
		}
		if _, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(f.ctx, pcName, metav1.GetOptions{}); err == nil {
			f.t.Errorf("%s created ProvisionerConfig %s", when, pcName)
		}
	}
	if _, stderr, err := f.migrateCommand(args...); err == nil || !strings.Contains(stderr, "scale it to zero") {
		f.t.Errorf("migrate while the old provisioner runs: error %v, stderr %q; want a failure saying to scale it to zero", err, stderr)
	}
	unchanged("a plan refused while the old provisioner runs")

	scaleToZero()
	stdout, stderr, err := f.migrateCommand(append(args, "--dry-run")...)
	if err != nil {
		f.t.Fatalf("migrate --dry-run: %v\n%s%s", err, stdout, stderr)
	}
	for _, want := range append([]string{"kind: ProvisionerConfig", "The old provisioner is gone"}, pvNames...) {
		if !strings.Contains(stdout, want) {
			f.t.Errorf("the dry run's plan does not name %q:\n%s", want, stdout)
		}
	}
	unchanged("a dry run")

	f.t.Cleanup(func() { f.deleteConfig(pcName) })
	stdout, stderr, err = f.migrateCommand(args...)
	if err != nil {
		f.t.Fatalf("migrate: %v\n%s%s", err, stdout, stderr)
	}
	return stdout
}

// The plan of an nfs-subdir-external-provisioner v4.0.3, run with the
// manager's command against the real API server: refused while the old
// Deployment runs, printed and nothing changed with --dry-run, then
// applied: the ProvisionerConfig passes the CRD's validation with the old
// name, server, export and release, and each old volume carries the fate
// nfs-subdir gives it from its class, a capitalised onDelete archiving.
// Then the manager serves the plan's ProvisionerConfig, two classes are
// remade with other parameters, and every old claim is deleted: each
// directory, made in nfs-subdir's layout, is archived, deleted or kept as
// nfs-subdir would have done it when the plan ran; new claims of the
// classes, as they are after the edit, go as nfs-subdir would take them.
func TestMigratePlanFromNFSSubdir(t *testing.T) {
	f := newFixture(t)
	f.startManager("mplan-subdir")
	oldName := "cluster.local/" + f.prefix
	scaleToZero := f.oldDeployment("nfs-subdir", corev1.Container{
		Image: "registry.k8s.io/sig-storage/nfs-subdir-external-provisioner:v4.0.3",
		Env: []corev1.EnvVar{
			{Name: "PROVISIONER_NAME", Value: oldName},
			{Name: "NFS_SERVER", Value: nfsAddress},
			{Name: "NFS_PATH", Value: exportPath},
		},
	})
	// export stands for the export as the manager's pod would mount it:
	// the plan names no port, and the test's NFS servers listen on free
	// ones, not behind a portmapper on port 111.
	export := filepath.Join(f.root, f.prefix+"-export")
	classes := map[string]subdirCase{
		"archive":     {remade: map[string]string{"onDelete": "delete"}, want: "archived-%s", wantNew: "deleted"},
		"delete":      {params: map[string]string{"onDelete": "delete"}, remade: map[string]string{"onDelete": "retain"}, want: "deleted", wantNew: "kept"},
		"capitalised": {params: map[string]string{"onDelete": "Delete"}, want: "archived-%s", wantNew: "archived-%s"},
		"retain":      {params: map[string]string{"onDelete": "retain"}, want: "kept", wantNew: "kept"},
		"pattern":     {params: map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.name}"}, pattern: true, want: "archived-%s", wantNew: "archived-%s"},
	}
	dirs := map[string]string{}
	var pvNames []string
	for name, c := range classes {
		class := f.prefix + "-" + name
		f.class(class, oldName, c.params)
		pv := f.oldPV("pvc-"+f.prefix+"-"+name, name, class, oldName)
		dirs[name] = fmt.Sprintf("%s-%s-%s", f.namespace, name, pv.Name)
		if c.pattern {
			dirs[name] = path.Join(f.namespace, name)
		}
		writeVolumeFile(t, filepath.Join(export, dirs[name]))
		pv.Spec.NFS = &corev1.NFSVolumeSource{Server: nfsAddress, Path: path.Join(exportPath, dirs[name])}
		f.adopt(pv, name)
		pvNames = append(pvNames, pv.Name)
	}
	pcName := f.prefix
	f.runPlan(scaleToZero, pcName, pvNames, "--from", "nfs-subdir", "--deployment", f.namespace+"/nfs-subdir", "--name", pcName)

	recorded := func(fate string) map[string]string {
		return map[string]string{annOnDelete: fate, annDeleteUnmarked: "true"}
	}
	want := map[string]map[string]string{
		"pvc-" + f.prefix + "-archive":     recorded("ArchiveAsNFSSubdir"),
		"pvc-" + f.prefix + "-delete":      recorded("Delete"),
		"pvc-" + f.prefix + "-capitalised": recorded("ArchiveAsNFSSubdir"),
		"pvc-" + f.prefix + "-retain":      recorded("Retain"),
		"pvc-" + f.prefix + "-pattern":     recorded("ArchiveAsNFSSubdir"),
	}
	if diff := cmp.Diff(want, f.recordedFates(pvNames, annOnDelete, annDeleteUnmarked)); diff != "" {
		t.Errorf("fates recorded on the old volumes (-want +got):\n%s", diff)
	}
	pc := f.config(pcName)
	wantNFS := &v1alpha1.NFSBackend{
		Server:    nfsAddress,
		Path:      exportPath,
		OnDelete:  v1alpha1.OnDeleteDelete, // the CRD's default, for the claims of other classes
		NFSSubdir: &v1alpha1.NFSSubdirOrigin{ProvisionerName: v1alpha1.ProvisionerName(oldName), Version: "v4.0.3"},
	}
	if diff := cmp.Diff(wantNFS, pc.Spec.Backend.NFS); diff != "" {
		t.Errorf("the ProvisionerConfig's NFS backend (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]v1alpha1.ProvisionerName{v1alpha1.ProvisionerName(oldName)}, pc.Spec.AdditionalProvisionerNames); diff != "" {
		t.Errorf("additionalProvisionerNames (-want +got):\n%s", diff)
	}

	f.mountExport(pcName, export)
	for name, c := range classes {
		if c.remade != nil {
			f.remakeClass(f.prefix+"-"+name, c.remade)
		}
	}
	f.releaseAsNFSSubdir(export, classes, dirs)
}

// mountExport sets the mountPath of the NFS ProvisionerConfig pcName to dir,
// as the plan's note asks where the manager cannot speak to the server
// itself, and waits until it runs with it.
func (f *fixture) mountExport(pcName, dir string) {
	f.t.Helper()
	var updated *v1alpha1.ProvisionerConfig
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pc := f.config(pcName)
		pc.Spec.Backend.NFS.MountPath = v1alpha1.AbsolutePath(dir)
		var err error
		updated, err = f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Update(f.ctx, pc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.t.Fatalf("cannot set the mountPath of ProvisionerConfig %s: %v", pcName, err)
	}
	f.waitReady(pcName, updated.Generation, v1alpha1.ReasonRunning)
}

// releaseAsNFSSubdir deletes the old claim of each class of classes, named
// as the class, whose directories below export dirs holds, then makes a new
// claim of each class, writes a file in its directory and deletes it, and
// checks what is left of each directory against the case's want (old) and
// wantNew (new).
func (f *fixture) releaseAsNFSSubdir(export string, classes map[string]subdirCase, dirs map[string]string) {
	f.t.Helper()
	got, want := map[string]string{}, map[string]string{}
	expect := func(claim, fate string) {
		want[claim] = fate
		if fate != "deleted" && fate != "kept" {
			want[claim] = fmt.Sprintf(fate, path.Base(dirs[claim]))
		}
	}
	for name, c := range classes {
		f.release(name, "pvc-"+f.prefix+"-"+name)
		got[name] = subdirOutcome(f.t, export, dirs[name])
		expect(name, c.want)
	}
	for name, c := range classes {
		claim := "new-" + name
		f.claim(claim, f.prefix+"-"+name)
		f.waitBound(claim)
		pv := f.boundVolume(claim)
		dirs[claim] = path.Base(pv.Spec.NFS.Path)
		if c.pattern {
			dirs[claim] = path.Join(f.namespace, claim)
		}
		writeVolumeFile(f.t, filepath.Join(export, dirs[claim]))
		f.release(claim, pv.Name)
		got[claim] = subdirOutcome(f.t, export, dirs[claim])
		expect(claim, c.wantNew)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		f.t.Errorf("what is left of each volume's directory (-want +got):\n%s", diff)
	}
}

// A local-path-provisioner v0.0.37 of the Helm chart taken over with the
// plan, end to end: the plan is refused while the old Deployment runs,
// changes nothing in a dry run, then records on each old volume its fate
// and node, the one local-path recorded for a volume pinned by another
// label (nodeAffinityKey) and the affinity's for one made before
// local-path recorded it, and creates the ProvisionerConfig; the manager's
// node agent then deletes both directories when their claims go, as
// local-path's teardown would.
func TestMigratePlanFromLocalPath(t *testing.T) {
	f := newFixture(t)
	const identity = "mplan-lp"
	f.startManager(identity)
	node := "node-" + identity
	oldName := "cluster.local/" + f.prefix
	base := filepath.Join(f.root, "local-path-provisioner")
	scaleToZero := f.oldDeployment("local-path", corev1.Container{
		Image: "docker.io/rancher/local-path-provisioner:v0.0.37",
		Command: []string{"local-path-provisioner", "start", "--config", "/etc/config/config.json",
			"--provisioner-name", oldName, "--configmap-name", "local-path-config"},
	})
	configMap := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: "local-path-config"},
		Data: map[string]string{
			"config.json": fmt.Sprintf(`{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [%q]}]}`, base),
			"setup":       "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"",
			"teardown":    "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"",
		},
	}
	if _, err := f.kube.CoreV1().ConfigMaps(f.namespace).Create(f.ctx, configMap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := f.prefix + "-local-path"
	f.createClass(&storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: class},
		Provisioner:       oldName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	})
	pinned := map[string]struct {
		key, value, selectedNode string
	}{
		"rack":     {key: "topology.example.com/rack", value: "rack-1", selectedNode: node},
		"hostname": {key: corev1.LabelHostname, value: node},
	}
	var pvNames, dirs []string
	for claim, pin := range pinned {
		pvName := "pvc-" + f.prefix + "-" + claim
		dir := filepath.Join(base, fmt.Sprintf("%s_%s_%s", pvName, f.namespace, claim))
		writeVolumeFile(t, dir)
		pv := f.oldPV(pvName, claim, class, oldName)
		pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: pin.key, Operator: corev1.NodeSelectorOpIn, Values: []string{pin.value}}},
		}}}}
		if pin.selectedNode != "" {
			pv.Annotations["local.path.provisioner/selected-node"] = pin.selectedNode
		}
		f.adopt(pv, claim)
		pvNames, dirs = append(pvNames, pvName), append(dirs, dir)
	}
	pcName := f.prefix
	f.runPlan(scaleToZero, pcName, pvNames, "--from", "local-path", "--deployment", f.namespace+"/local-path", "--name", pcName)

	want := map[string]map[string]string{}
	for _, name := range pvNames {
		want[name] = map[string]string{annOnDelete: "Delete", annDeleteUnmarked: "true", annNode: node}
	}
	if diff := cmp.Diff(want, f.recordedFates(pvNames, annOnDelete, annDeleteUnmarked, annNode)); diff != "" {
		t.Errorf("fates and nodes recorded on the old volumes (-want +got):\n%s", diff)
	}
	f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
	for claim := range pinned {
		f.release(claim, "pvc-"+f.prefix+"-"+claim)
	}
	left := map[string][]string{}
	for _, dir := range dirs {
		left[filepath.Base(dir)] = leftBeside(t, dir)
	}
	wantLeft := map[string][]string{}
	for _, dir := range dirs {
		wantLeft[filepath.Base(dir)] = nil
	}
	if diff := cmp.Diff(wantLeft, left); diff != "" {
		t.Errorf("what is left of each old volume's directory on the node (-want +got):\n%s", diff)
	}
}

// A local-path-provisioner v0.0.37 of sharedFileSystemPath taken over with
// the plan, end to end, by a manager alone, with no node agent: the plan
// records the fate of the old volume, pinned to no node, and creates a
// hostPath ProvisionerConfig of sharedFileSystem; the manager deletes the
// old directory when its claim goes, as local-path's teardown would, and
// gives a new ReadWriteMany claim a hostPath volume pinned to no node on
// the shared path, which it deletes in turn.
func TestMigratePlanFromLocalPathSharedFileSystem(t *testing.T) {
	f := newFixture(t)
	f.startManagerRole("mplan-shared")
	oldName := "cluster.local/" + f.prefix
	shared := filepath.Join(f.root, "shared")
	scaleToZero := f.oldDeployment("local-path", corev1.Container{
		Image: "docker.io/rancher/local-path-provisioner:v0.0.37",
		Command: []string{"local-path-provisioner", "start", "--config", "/etc/config/config.json",
			"--provisioner-name", oldName, "--configmap-name", "local-path-config"},
	})
	configMap := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: "local-path-config"},
		Data: map[string]string{
			"config.json": fmt.Sprintf(`{"sharedFileSystemPath": %q}`, shared),
			"setup":       "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"",
			"teardown":    "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"",
		},
	}
	if _, err := f.kube.CoreV1().ConfigMaps(f.namespace).Create(f.ctx, configMap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := f.prefix + "-shared"
	f.createClass(&storagev1.StorageClass{
		ObjectMeta:    metav1.ObjectMeta{Name: class},
		Provisioner:   oldName,
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete),
		// local-path ignores nodePath with a shared file system, and so
		// does provfleet.
		Parameters: map[string]string{"nodePath": "/elsewhere"},
	})
	pvName := "pvc-" + f.prefix + "-old"
	dir := filepath.Join(shared, fmt.Sprintf("%s_%s_old", pvName, f.namespace))
	writeVolumeFile(t, dir)
	pv := f.oldPV(pvName, "old", class, oldName)
	pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}
	pv.Annotations["local.path.provisioner/selected-node"] = ""
	f.adopt(pv, "old")

	pcName := f.prefix
	f.runPlan(scaleToZero, pcName, []string{pvName}, "--from", "local-path", "--deployment", f.namespace+"/local-path", "--name", pcName)
	want := map[string]map[string]string{pvName: {annOnDelete: "Delete", annDeleteUnmarked: "true"}}
	if diff := cmp.Diff(want, f.recordedFates([]string{pvName}, annOnDelete, annDeleteUnmarked, annNode)); diff != "" {
		t.Errorf("fate recorded on the old volume (-want +got):\n%s", diff)
	}
	if got := f.config(pcName).Spec.Backend.HostPath; got == nil || !got.SharedFileSystem || got.Path != v1alpha1.AbsolutePath(shared) {
		t.Fatalf("the plan's backend = %+v, want hostPath of sharedFileSystem %s", got, shared)
	}
	f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
	f.release("old", pvName)
	if diff := cmp.Diff([]string(nil), leftBeside(t, dir)); diff != "" {
		t.Errorf("what is left of the old volume's directory (-want +got):\n%s", diff)
	}

	f.labelledClaim("new", class, nil, func(c *corev1.PersistentVolumeClaim) {
		c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	})
	f.waitBound("new")
	volume := f.boundVolume("new")
	newDir := filepath.Join(shared, fmt.Sprintf("%s_%s_new", volume.Name, f.namespace))
	if volume.Spec.HostPath == nil || volume.Spec.HostPath.Path != newDir {
		t.Errorf("the new volume's source = %+v, want hostPath %s", volume.Spec.PersistentVolumeSource, newDir)
	}
	if volume.Spec.NodeAffinity != nil {
		t.Errorf("the new volume's node affinity = %+v, want none", volume.Spec.NodeAffinity)
	}
	writeVolumeFile(t, newDir)
	f.release("new", volume.Name)
	if diff := cmp.Diff([]string(nil), leftBeside(t, newDir)); diff != "" {
		t.Errorf("what is left of the new volume's directory (-want +got):\n%s", diff)
	}
}

// A local-path-provisioner v0.0.37 of storageClassConfigs taken over with
// the plan, end to end: two classes with paths of their own on the node
// (the top-level nodePathMap ignored, as local-path ignores it there), and
// a third class it does not list. The plan records a delete for the
// volumes of the listed classes and a retain for the other's, whose delete
// local-path fails; the node agent then deletes the first two directories
// when their claims go and keeps the third; a new claim of each listed
// class gets its directory in that class's path.
func TestMigratePlanFromLocalPathStorageClassConfigs(t *testing.T) {
	f := newFixture(t)
	const identity = "mplan-classes"
	f.startManager(identity)
	node := "node-" + identity
	oldName := "cluster.local/" + f.prefix
	standard, fast := filepath.Join(f.root, "standard"), filepath.Join(f.root, "fast")
	scaleToZero := f.oldDeployment("local-path", corev1.Container{
		Image: "docker.io/rancher/local-path-provisioner:v0.0.37",
		Command: []string{"local-path-provisioner", "start", "--config", "/etc/config/config.json",
			"--provisioner-name", oldName, "--configmap-name", "local-path-config"},
	})
	classes := map[string]string{"standard": f.prefix + "-standard", "fast": f.prefix + "-fast", "unlisted": f.prefix + "-unlisted"}
	configMap := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: "local-path-config"},
		Data: map[string]string{
			"config.json": fmt.Sprintf(`{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [%q]}], "storageClassConfigs": {
				%q: {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [%q]}]},
				%q: {"nodePathMap": [{"node": %q, "paths": [%q]}]}}}`,
				filepath.Join(f.root, "ignored"), classes["standard"], standard, classes["fast"], node, fast),
			"setup":    "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"",
			"teardown": "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"",
		},
	}
	if _, err := f.kube.CoreV1().ConfigMaps(f.namespace).Create(f.ctx, configMap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, class := range classes {
		f.createClass(&storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: class},
			Provisioner:       oldName,
			ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		})
	}
	// The unlisted class's volume is one local-path made before
	// storageClassConfigs was set, in the top-level path of that time.
	bases := map[string]string{"standard": standard, "fast": fast, "unlisted": standard}
	pvNames, dirs := map[string]string{}, map[string]string{}
	for claim, base := range bases {
		pvName := "pvc-" + f.prefix + "-" + claim
		dir := filepath.Join(base, fmt.Sprintf("%s_%s_%s", pvName, f.namespace, claim))
		writeVolumeFile(t, dir)
		pv := f.oldPV(pvName, claim, classes[claim], oldName)
		pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}}
		pv.Annotations["local.path.provisioner/selected-node"] = node
		f.adopt(pv, claim)
		pvNames[claim], dirs[claim] = pvName, dir
	}
	pcName := f.prefix
	f.runPlan(scaleToZero, pcName, slices.Collect(maps.Values(pvNames)), "--from", "local-path", "--deployment", f.namespace+"/local-path", "--name", pcName)

	want := map[string]map[string]string{
		pvNames["standard"]: {annOnDelete: "Delete", annDeleteUnmarked: "true", annNode: node},
		pvNames["fast"]:     {annOnDelete: "Delete", annDeleteUnmarked: "true", annNode: node},
		pvNames["unlisted"]: {annOnDelete: "Retain", annNode: node},
	}
	if diff := cmp.Diff(want, f.recordedFates(slices.Collect(maps.Values(pvNames)), annOnDelete, annDeleteUnmarked, annNode)); diff != "" {
		t.Errorf("fates and nodes recorded on the old volumes (-want +got):\n%s", diff)
	}
	f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
	left := map[string][]string{}
	for claim, pvName := range pvNames {
		f.release(claim, pvName)
		left[claim] = leftBeside(t, dirs[claim])
	}
	if diff := cmp.Diff(map[string][]string{"standard": nil, "fast": nil, "unlisted": {"kept"}}, left); diff != "" {
		t.Errorf("what is left of each old volume's directory (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dirs["unlisted"], "data")); err != nil {
		t.Errorf("the content of the retained directory: %v", err)
	}

	for _, claim := range []string{"standard", "fast"} {
		name := "new-" + claim
		f.claimOn(name, classes[claim], node)
		f.waitBound(name)
		volume := f.boundVolume(name)
		wantDir := filepath.Join(bases[claim], fmt.Sprintf("%s_%s_%s", volume.Name, f.namespace, name))
		if volume.Spec.HostPath == nil || volume.Spec.HostPath.Path != wantDir {
			t.Errorf("the new volume of class %s has source %+v, want hostPath %s", classes[claim], volume.Spec.PersistentVolumeSource, wantDir)
		}
		f.release(name, volume.Name)
		if diff := cmp.Diff([]string(nil), leftBeside(t, wantDir)); diff != "" {
			t.Errorf("what is left of the new volume's directory of class %s (-want +got):\n%s", classes[claim], diff)
		}
	}
}
