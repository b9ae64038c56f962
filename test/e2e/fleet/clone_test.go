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
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
)

// A claim whose data source is a hostPath claim holding data is bound to a
// copy of that data, links as links; a clone deleted as soon as it was
// made leaves no directory once reclaimed.
func TestCloneOfAHostPathClaim(t *testing.T) {
	f := newFixture(t)
	f.startManager("clone")
	pcName := f.prefix + "-clone"
	base := filepath.Join(f.root, pcName)
	f.provisioner(pcName)
	f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
	f.claim("source", pcName)
	f.waitBound("source")
	source := f.boundVolume("source")
	sourceDir := filepath.Join(base, source.Name)
	writeSourceTree(t, sourceDir, "more data", "/etc/hostname")
	if err := unix.Mkfifo(filepath.Join(sourceDir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}

	f.cloneClaim("copy", pcName)
	dropped := f.cloneClaim("dropped", pcName)
	if err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Delete(f.ctx, "dropped", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitBound("copy")
	clone := f.boundVolume("copy")
	want := describe(t, sourceDir)
	delete(want, "fifo")
	if diff := cmp.Diff(want, describe(t, filepath.Join(base, clone.Name))); diff != "" {
		t.Errorf("the clone (-source less its FIFO +clone):\n%s", diff)
	}
	f.waitEvent(f.namespace, "copy", corev1.EventTypeWarning, "SpecialFilesSkipped", "left out 1 special files", "fifo")

	droppedPV := "pvc-" + string(dropped.UID)
	f.eventually("nothing left of the deleted clone", func(context.Context) (bool, error) {
		entries, err := os.ReadDir(base)
		if err != nil {
			return false, err
		}
		return !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.Contains(e.Name(), droppedPV) }), nil
	})
}

// A claim whose data source is an NFS claim holding data is bound to a
// copy of it on the same export, links as links, made by the manager over
// NFS with no mount.
func TestCloneOfAnNFSClaim(t *testing.T) {
	f := newFixture(t)
	f.startManager("clone-nfs")
	e := f.serveNFS(nfsserver.Options{})
	f.provisioner(f.prefix, func(pc *v1alpha1.ProvisionerConfig) { f.nfsSpec(pc, e) })
	class := f.prefix
	f.waitReady(class, 1, v1alpha1.ReasonRunning)
	f.claim("source", class)
	f.waitBound("source")
	sourceDir := e.hostDir(t, f.boundVolume("source"))
	writeSourceTree(t, sourceDir, strings.Repeat("more data ", 50_000), "deeper/more")

	f.cloneClaim("copy", class)
	f.waitBound("copy")
	clone := f.boundVolume("copy")
	if clone.Spec.NFS == nil || clone.Spec.NFS.Path == f.boundVolume("source").Spec.NFS.Path {
		t.Fatalf("the clone's volume is not a subdirectory of its own: %+v", clone.Spec.PersistentVolumeSource)
	}
	if diff := cmp.Diff(describe(t, sourceDir), describe(t, e.hostDir(t, clone))); diff != "" {
		t.Errorf("the clone (-source +clone):\n%s", diff)
	}
}

// A clone claim deleted while its source is being copied leaves no
// directory once its copy stopped and was reclaimed.
func TestCloneDeletedWhileCopying(t *testing.T) {
	f := newFixture(t)
	f.startManager("clone-deleted")
	pcName := f.prefix + "-clone"
	base := filepath.Join(f.root, pcName)
	f.provisioner(pcName)
	f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
	f.claim("source", pcName)
	f.waitBound("source")
	sourceDir := filepath.Join(base, f.boundVolume("source").Name)
	// Enough files that the copy is still under way when the claim goes.
	for i := range 50_000 {
		if err := os.WriteFile(filepath.Join(sourceDir, "file-"+strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copying := f.cloneClaim("copying", pcName)
	pvName := "pvc-" + string(copying.UID)
	f.eventually("the copy under way", func(context.Context) (bool, error) {
		_, err := os.Lstat(filepath.Join(base, "."+pvName+".provfleet-copying"))
		return err == nil, nil
	})
	if err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Delete(f.ctx, "copying", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("nothing left of the deleted clone", func(context.Context) (bool, error) {
		entries, err := os.ReadDir(base)
		if err != nil {
			return false, err
		}
		return !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.Contains(e.Name(), pvName) }), nil
	})
	if _, err := f.kube.CoreV1().PersistentVolumes().Get(f.ctx, pvName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted clone has a PersistentVolume: %v", err)
	}
}

// Clones of Immediate binding on a cluster of node agents are placed on
// their source's node, whose agent alone reads it, and hold its data.
func TestClonesOnTheSourcesNode(t *testing.T) {
	c := newNodeCluster(t)
	const name = "clones"
	c.provisioner(name, storagev1.VolumeBindingImmediate)
	c.waitReady(name, 1, v1alpha1.ReasonRunning)
	c.waitNodes(name, "3/3")
	c.claim("source", name)
	c.waitBound("source")
	source := c.boundVolume("source")
	sourceDir := source.Spec.HostPath.Path
	if err := os.WriteFile(filepath.Join(sourceDir, "data"), []byte("the source's data"), 0o644); err != nil {
		t.Fatal(err)
	}
	clones := []string{"copy-0", "copy-1", "copy-2"}
	for _, clone := range clones {
		c.cloneClaim(clone, name)
	}
	c.waitBound(clones...)
	placements := c.placements()
	for _, clone := range clones {
		if got, want := placements[clone], placements["source"]; got != want {
			t.Errorf("clone %s is on %+v, its source on %+v", clone, got, want)
		}
		if diff := cmp.Diff(describe(t, sourceDir), describe(t, c.boundVolume(clone).Spec.HostPath.Path)); diff != "" {
			t.Errorf("clone %s (-source +clone):\n%s", clone, diff)
		}
	}
}

// cloneClaim creates a claim of class whose data source is the claim
// "source", and returns it.
func (f *fixture) cloneClaim(name, class string) *corev1.PersistentVolumeClaim {
	f.t.Helper()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			},
			DataSource: &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "source"},
		},
	}
	created, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Create(f.ctx, claim, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("cannot create claim %s: %v", name, err)
	}
	return created
}

// describe describes every entry below dir by its path: a directory's or
// file's mode, a file's content, a link's target.
func describe(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			tree[rel] = "link " + target
			return err
		case d.Type()&fs.ModeNamedPipe != 0:
			tree[rel] = "fifo"
		case d.IsDir():
			tree[rel] = "dir " + info.Mode().Perm().String()
		default:
			data, err := os.ReadFile(p)
			tree[rel] = info.Mode().Perm().String() + " " + string(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// writeSourceTree writes a source volume's data into dir: a file, a file
// of content two folders down, and a link to target beside it.
func writeSourceTree(t *testing.T, dir, content, target string) {
	t.Helper()
	for name, content := range map[string]string{"data": "the source's data", "sub/deeper/more": content} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(target, filepath.Join(dir, "sub", "link")); err != nil {
		t.Fatal(err)
	}
}
