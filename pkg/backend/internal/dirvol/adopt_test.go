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

package dirvol

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
)

// otherNode is the node whose volumes the adopting fixture does not hold.
const otherNode = "node-b"

// retained is a Released PersistentVolume of testProvisioner with reclaim
// policy Retain that was bound to the claim team/data of UID uid.
func retained(name, dir, uid string) *corev1.PersistentVolume {
	pv := volume(name, dir, "1Gi", testProvisioner)
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "team", Name: "data", UID: types.UID(uid)}
	pv.Status.Phase = corev1.VolumeReleased
	return pv
}

func adoptingFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixture(t, func(c *Config) {
		c.Adopt = true
		c.Holds = func(pv *corev1.PersistentVolume) bool { return backend.VolumeNode(pv) != otherNode }
	})
}

// TestAdoptable: only one retained volume of the same claim name, of this
// provisioner and node, naming exactly the directory, proves it.
func TestAdoptable(t *testing.T) {
	const dir = "team/data"
	mutated := func(mutate func(pv *corev1.PersistentVolume)) []*corev1.PersistentVolume {
		pv := retained("old", dir, "earlier")
		mutate(pv)
		return []*corev1.PersistentVolume{pv}
	}
	tests := map[string]struct {
		others  []*corev1.PersistentVolume
		want    string
		wantErr string
	}{
		"retained by reclaim policy": {
			others: mutated(func(*corev1.PersistentVolume) {}),
			want:   "old",
		},
		"retained by recorded fate": {
			others: mutated(func(pv *corev1.PersistentVolume) {
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
				pv.Annotations[backend.AnnOnDelete] = string(backend.OnDeleteRetain)
			}),
			want: "old",
		},
		"adopted before by a volume since gone": {
			others: mutated(func(pv *corev1.PersistentVolume) { pv.Annotations[backend.AnnAdoptedBy] = "pvc-gone" }),
			want:   "old",
		},
		"not retained": {
			others: mutated(func(pv *corev1.PersistentVolume) {
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
				pv.Annotations[backend.AnnOnDelete] = string(backend.OnDeleteArchive)
			}),
			wantErr: "not retained",
		},
		"another claim": {
			others:  mutated(func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef.Name = "cache" }),
			wantErr: "not made for a claim of this namespace and name",
		},
		"another namespace": {
			others:  mutated(func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef.Namespace = "other" }),
			wantErr: "not made for a claim of this namespace and name",
		},
		"no claim": {
			others:  mutated(func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = nil }),
			wantErr: "not made for a claim of this namespace and name",
		},
		"claimRef without UID": {
			others:  mutated(func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef.UID = "" }),
			wantErr: "not bound to an earlier claim",
		},
		"claimRef of the claim itself": {
			others:  mutated(func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef.UID = "team-data" }),
			wantErr: "not bound to an earlier claim",
		},
		"still Bound": {
			others:  mutated(func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeBound }),
			wantErr: "is Bound, not Released",
		},
		"another provisioner": {
			others: mutated(func(pv *corev1.PersistentVolume) {
				pv.Annotations["pv.kubernetes.io/provisioned-by"] = "example.com/other"
			}),
			wantErr: "not provisioned under this provisioner's names",
		},
		"made by hand": {
			others:  mutated(func(pv *corev1.PersistentVolume) { delete(pv.Annotations, "pv.kubernetes.io/provisioned-by") }),
			wantErr: "not provisioned under this provisioner's names",
		},
		"another node": {
			others:  mutated(func(pv *corev1.PersistentVolume) { pv.Annotations[backend.AnnNode] = otherNode }),
			wantErr: "not pinned to this node",
		},
		"the folder around it": {
			others:  []*corev1.PersistentVolume{retained("old", "team", "earlier")},
			wantErr: "around or inside it, not it",
		},
		"a directory inside it": {
			others:  []*corev1.PersistentVolume{retained("old", dir+"/sub", "earlier")},
			wantErr: "around or inside it, not it",
		},
		"two volumes": {
			others: []*corev1.PersistentVolume{
				retained("old", dir, "earlier"),
				retained("older", dir, "earliest"),
			},
			wantErr: "2 PersistentVolumes name it",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := adoptingFixture(t)
			got, err := f.store.adoptable(backendtest.Claim("team", "data", "1Gi"), dir, tc.others)
			gotName, gotErr := "", ""
			if got != nil {
				gotName = got.Name
			}
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.want, gotName); diff != "" {
				t.Errorf("adoptable() volume (-want +got):\n%s", diff)
			}
			if tc.wantErr == "" && gotErr != "" || !strings.Contains(gotErr, tc.wantErr) {
				t.Errorf("adoptable() error = %q, want it to contain %q", gotErr, tc.wantErr)
			}
		})
	}
}

// plantRetained makes the directory team/data a retained volume left, with
// a file and mode 0700, and returns its PersistentVolume, listed.
func (f *fixture) plantRetained(t *testing.T) *corev1.PersistentVolume {
	t.Helper()
	backendtest.WriteFile(t, filepath.Join(f.base, "team/data/file"), "kept")
	if err := os.Chmod(filepath.Join(f.base, "team/data"), 0o700); err != nil {
		t.Fatal(err)
	}
	old := retained("old", "team/data", "earlier")
	f.pvs = append(f.pvs, old)
	return old
}

// TestAdopt: an adopted directory gets the new volume's owner marker and
// keeps its contents and mode; a release of the old volume cannot touch it,
// and an unsaved adoption is retained.
func TestAdopt(t *testing.T) {
	f := adoptingFixture(t)
	old := f.plantRetained(t)
	req := request(t, "team", "data", "1Gi", nsPattern)
	vol, err := f.store.Create(t.Context(), req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if vol.Dir != "team/data" || vol.AdoptedFrom == nil || vol.AdoptedFrom.Name != old.Name {
		t.Fatalf("Create() = %+v, want team/data adopted from %s", vol, old.Name)
	}
	f.checkAdopted(t, req.PVName)

	unsaved, err := f.store.Unsaved(t.Context(), func(string) *corev1.PersistentVolume { return &corev1.PersistentVolume{} })
	if err != nil || len(unsaved) != 1 {
		t.Fatalf("Unsaved() = %v, %v; want one volume", unsaved, err)
	}
	want := map[string]string{backend.AnnAdoptedFrom: old.Name, backend.AnnOnDelete: string(backend.OnDeleteRetain)}
	if diff := cmp.Diff(want, unsaved[0].Volume.Annotations); diff != "" {
		t.Errorf("annotations of the unsaved adopted volume (-want +got):\n%s", diff)
	}

	// The old volume, even opted in to release unmarked directories and
	// deleted, leaves the directory alone: its marker names the new one.
	released := old.DeepCopy()
	released.Annotations[backend.AnnDeleteUnmarked] = "true"
	released.Annotations[backend.AnnOnDelete] = string(backend.OnDeleteDelete)
	if err := removeVolume(t, f, released, "team/data"); err == nil {
		t.Errorf("DeleteAt of the old volume succeeded, want it refused")
	}
	f.checkAdopted(t, req.PVName)

	// The new volume's release (Retain) is not held up by the old one.
	if err := removeVolume(t, f, unsaved[0].Volume, "team/data"); err != nil {
		t.Errorf("DeleteAt of the adopting volume: %v", err)
	}
	if diff := cmp.Diff([]string{JournalDir + "/", "team/", "team/data/", "team/data/file"}, backendtest.Tree(t, f.base)); diff != "" {
		t.Errorf("tree after the release (-want +got):\n%s", diff)
	}
}

// checkAdopted checks that team/data is pvName's, as it was left.
func (f *fixture) checkAdopted(t *testing.T, pvName string) {
	t.Helper()
	marker, err := os.ReadFile(filepath.Join(f.base, "team", markerName("data")))
	if err != nil || string(marker) != pvName {
		t.Errorf("owner marker = %q, %v; want %q", marker, err, pvName)
	}
	content, err := os.ReadFile(filepath.Join(f.base, "team/data/file"))
	if err != nil || string(content) != "kept" {
		t.Errorf("file = %q, %v; want it kept", content, err)
	}
	info, err := os.Stat(filepath.Join(f.base, "team/data"))
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("directory mode = %v, %v; want 0700 as it was", info.Mode().Perm(), err)
	}
}

// TestAdoptRefusals: without adoption, or without its proof, a directory
// that exists is refused as before, saying why it was not adopted, and
// nothing is written.
func TestAdoptRefusals(t *testing.T) {
	tests := map[string]struct {
		adopt   bool
		setup   func(t *testing.T, f *fixture)
		wantErr string
	}{
		"adoption off": {
			setup:   func(t *testing.T, f *fixture) { t.Helper(); f.plantRetained(t) },
			wantErr: "lies inside the directory of another volume",
		},
		"no volume names it": {
			adopt: true,
			setup: func(t *testing.T, f *fixture) {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, "team/data/file"), "kept")
			},
			wantErr: "it already exists; not adopted: no PersistentVolume names it",
		},
		"proof for another claim": {
			adopt: true,
			setup: func(t *testing.T, f *fixture) {
				t.Helper()
				f.plantRetained(t).Spec.ClaimRef.Name = "cache"
			},
			wantErr: "not adopted: the PersistentVolume that names it was not made for a claim of this namespace and name",
		},
		"marker of another volume": {
			adopt: true,
			setup: func(t *testing.T, f *fixture) {
				t.Helper()
				f.plantRetained(t)
				backendtest.WriteFile(t, filepath.Join(f.base, "team", markerName("data")), "pvc-other")
			},
			wantErr: "it belongs to another volume",
		},
		"directory gone": {
			adopt: true,
			setup: func(t *testing.T, f *fixture) {
				t.Helper()
				f.pvs = append(f.pvs, retained("old", "team/data", "earlier"))
				if err := os.MkdirAll(filepath.Join(f.base, "team"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "the directory to adopt is gone",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Adopt = tc.adopt })
			tc.setup(t, f)
			before := backendtest.Tree(t, f.base)
			_, err := f.store.Create(t.Context(), request(t, "team", "data", "1Gi", nsPattern))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Create() error = %v, want it to contain %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(before, backendtest.Tree(t, f.base)); diff != "" {
				t.Errorf("tree changed (-before +after):\n%s", diff)
			}
		})
	}
}
