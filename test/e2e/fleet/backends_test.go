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
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// The built-in backends through the manager: a bound claim gets its
// directory, and releasing it deletes, retains or archives the directory as
// the ProvisionerConfig says. A local folder stands in for the NFS export.
func TestBuiltInBackendsThroughTheManager(t *testing.T) {
	f := newFixture(t)
	f.startManager("backends")
	nfsServerPath := "/exports/e2e"
	cases := map[string]struct {
		backend func(base string) v1alpha1.BackendSpec
		// dir is where the volume of claim must live, below base.
		dir func(claim string, pv *corev1.PersistentVolume) string
		// volumePath is the path the PV itself names.
		volumePath func(pv *corev1.PersistentVolume) string
		wantPath   func(base, dir string) string
		// afterRelease lists what is left in the directory's parent, with the
		// archived directory as "archived".
		afterRelease []string
	}{
		"hostpath-delete": {
			backend: func(base string) v1alpha1.BackendSpec {
				return v1alpha1.BackendSpec{HostPath: &v1alpha1.HostPathBackend{Path: v1alpha1.AbsolutePath(base), VolumeType: v1alpha1.HostPathVolumeHostPath}}
			},
			dir:          func(_ string, pv *corev1.PersistentVolume) string { return pv.Name },
			volumePath:   func(pv *corev1.PersistentVolume) string { return pv.Spec.HostPath.Path },
			wantPath:     joinPath,
			afterRelease: nil,
		},
		"local-retain": {
			backend: func(base string) v1alpha1.BackendSpec {
				return v1alpha1.BackendSpec{HostPath: &v1alpha1.HostPathBackend{
					Path: v1alpha1.AbsolutePath(base), VolumeType: v1alpha1.HostPathVolumeLocal,
					PathPattern: "{{.PVC.Namespace}}-{{.PVC.Name}}", OnDelete: v1alpha1.OnDeleteRetain,
				}}
			},
			dir:          func(claim string, _ *corev1.PersistentVolume) string { return f.namespace + "-" + claim },
			volumePath:   func(pv *corev1.PersistentVolume) string { return pv.Spec.Local.Path },
			wantPath:     joinPath,
			afterRelease: []string{"kept"},
		},
		"nfs-archive-subfolders": {
			backend: func(base string) v1alpha1.BackendSpec {
				return v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{
					Server: "nfs.example.com", Path: v1alpha1.AbsolutePath(nfsServerPath), MountPath: v1alpha1.AbsolutePath(base),
					PathPattern: "{{.PVC.Namespace}}/{{.PVC.Name}}", OnDelete: v1alpha1.OnDeleteArchive,
				}}
			},
			dir:          func(claim string, _ *corev1.PersistentVolume) string { return filepath.Join(f.namespace, claim) },
			volumePath:   func(pv *corev1.PersistentVolume) string { return pv.Spec.NFS.Server + ":" + pv.Spec.NFS.Path },
			wantPath:     func(_, dir string) string { return "nfs.example.com:" + filepath.Join(nfsServerPath, dir) },
			afterRelease: []string{"archived"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(f.root, name)
			if err := os.MkdirAll(base, 0o755); err != nil {
				t.Fatal(err)
			}
			pcName := f.prefix + "-" + name
			f.provisioner(pcName, func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Backend = tc.backend(base) })
			f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
			claim := name
			f.claim(claim, pcName)
			f.waitBound(claim)

			pv := f.boundVolume(claim)
			dir := tc.dir(claim, pv)
			if got, want := tc.volumePath(pv), tc.wantPath(base, dir); got != want {
				t.Errorf("the PV names %q, want %q", got, want)
			}
			if info, err := os.Stat(filepath.Join(base, dir)); err != nil || !info.IsDir() {
				t.Fatalf("no directory for the bound claim: %v", err)
			}

			if err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Delete(f.ctx, claim, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			f.waitGone(pv.Name)
			if diff := cmp.Diff(tc.afterRelease, leftBeside(t, filepath.Join(base, dir))); diff != "" {
				t.Errorf("what is left of the volume's directory (-want +got):\n%s", diff)
			}
		})
	}
}

func joinPath(base, dir string) string { return filepath.Join(base, dir) }

// boundVolume returns the PV a bound claim names.
func (f *fixture) boundVolume(claim string) *corev1.PersistentVolume {
	f.t.Helper()
	c, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Get(f.ctx, claim, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	pv, err := f.kube.CoreV1().PersistentVolumes().Get(f.ctx, c.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return pv
}

// leftBeside describes what remains of dir after its volume was released:
// "kept" when dir itself is still there, "archived" for each archived copy
// beside it.
func leftBeside(t *testing.T, dir string) []string {
	t.Helper()
	var left []string
	if _, err := os.Stat(dir); err == nil {
		left = append(left, "kept")
	}
	archived, err := filepath.Glob(filepath.Join(filepath.Dir(dir), "archived-"+filepath.Base(dir)+"-*"))
	if err != nil {
		t.Fatal(err)
	}
	for range archived {
		left = append(left, "archived")
	}
	return left
}
