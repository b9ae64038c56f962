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

package hostpath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// layout makes a host path root with an outside sentinel and returns the
// temporary folder and the root.
func layout(t testing.TB) (string, string) {
	t.Helper()
	tmp := t.TempDir()
	root := filepath.Join(tmp, "root")
	backendtest.WriteFile(t, filepath.Join(root, "other", "keep"), "inside the root")
	backendtest.WriteFile(t, filepath.Join(tmp, "outside", "keep"), "outside the root")
	return tmp, root
}

func TestNew(t *testing.T) {
	tests := map[string]struct {
		mutate  func(t *testing.T, tmp string, c *Config)
		want    error
		wantErr string
	}{
		"defaults": {},
		"missing path is created": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.Path = filepath.Join(c.HostPathRoot, "a", "b")
			},
		},
		"path through a symlink inside the root": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				backendtest.Symlink(t, "other", filepath.Join(c.HostPathRoot, "alias"))
				c.Path = filepath.Join(c.HostPathRoot, "alias")
			},
		},
		"HostPath without a node": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.VolumeType, c.NodeName = VolumeTypeHostPath, ""
			},
			want: backend.ErrInvalidSpec, wantErr: "names no node",
		},
		"unknown volume type": {
			mutate: func(t *testing.T, tmp string, c *Config) { t.Helper(); c.VolumeType = "Block" },
			want:   backend.ErrInvalidSpec, wantErr: `volumeType "Block"`,
		},
		"Local without a node": {
			mutate: func(t *testing.T, tmp string, c *Config) { t.Helper(); c.NodeName = "" },
			want:   backend.ErrInvalidSpec, wantErr: "names no node",
		},
		"a node name with a slash": {
			mutate: func(t *testing.T, tmp string, c *Config) { t.Helper(); c.NodeName = "node/a" },
			want:   backend.ErrInvalidSpec, wantErr: "names no node",
		},
		"no host path root": {
			mutate: func(t *testing.T, tmp string, c *Config) { t.Helper(); c.HostPathRoot = "" },
			want:   backend.ErrInvalidSpec, wantErr: "host path root",
		},
		"relative path": {
			mutate: func(t *testing.T, tmp string, c *Config) { t.Helper(); c.Path = "vols" },
			want:   backend.ErrInvalidSpec, wantErr: "not absolute",
		},
		"path outside the root": {
			mutate: func(t *testing.T, tmp string, c *Config) { t.Helper(); c.Path = filepath.Join(tmp, "outside") },
			want:   backend.ErrInvalidSpec, wantErr: "outside the host path root",
		},
		"path climbing out of the root": {
			mutate: func(t *testing.T, tmp string, c *Config) { t.Helper(); c.Path = c.HostPathRoot + "/../outside" },
			want:   backend.ErrInvalidSpec, wantErr: "outside the host path root",
		},
		"path through a symlink out of the root": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				backendtest.Symlink(t, filepath.Join(tmp, "outside"), filepath.Join(c.HostPathRoot, "escape"))
				c.Path = filepath.Join(c.HostPathRoot, "escape", "vols")
			},
			want: backend.ErrInvalidSpec, wantErr: "escapes",
		},
		"path is a file": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.Path = filepath.Join(c.HostPathRoot, "other", "keep")
			},
			want: backend.ErrInvalidSpec, wantErr: "not a directory",
		},
		"missing root": {
			mutate: func(t *testing.T, tmp string, c *Config) { t.Helper(); c.HostPathRoot = filepath.Join(tmp, "missing") },
			want:   backend.ErrUnavailable, wantErr: "no such file",
		},
		"missing path outside the root": {
			mutate: func(t *testing.T, tmp string, c *Config) { t.Helper(); c.Path = filepath.Join(tmp, "nowhere") },
			want:   backend.ErrInvalidSpec, wantErr: "lies outside the host path root",
		},
		"bad pattern": {
			mutate: func(t *testing.T, tmp string, c *Config) { t.Helper(); c.PathPattern = "{{.PVC" },
			want:   backend.ErrInvalidSpec, wantErr: "cannot parse",
		},
		"additional paths": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.AdditionalPaths = []string{filepath.Join(c.HostPathRoot, "b"), filepath.Join(c.HostPathRoot, "c")}
			},
		},
		"an additional path inside path": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.AdditionalPaths = []string{filepath.Join(c.Path, "inner")}
			},
			want: backend.ErrInvalidSpec, wantErr: "of one node overlap",
		},
		"two additional paths, one the other": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.AdditionalPaths = []string{filepath.Join(c.HostPathRoot, "b"), filepath.Join(c.HostPathRoot, "b") + "/"}
			},
			want: backend.ErrInvalidSpec, wantErr: "of one node overlap",
		},
		"a shared file system": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.Shared, c.NodeName, c.VolumeType = true, "", VolumeTypeHostPath
			},
		},
		"a shared file system of local volumes": {
			mutate: func(t *testing.T, tmp string, c *Config) { t.Helper(); c.Shared, c.NodeName = true, "" },
			want:   backend.ErrInvalidSpec, wantErr: "volumeType must be HostPath",
		},
		"a shared file system of a node": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.Shared, c.VolumeType = true, VolumeTypeHostPath
			},
			want: backend.ErrInvalidSpec, wantErr: "one path of no node",
		},
		"a shared file system of several paths": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.Shared, c.NodeName, c.VolumeType = true, "", VolumeTypeHostPath
				c.AdditionalPaths = []string{filepath.Join(c.HostPathRoot, "b")}
			},
			want: backend.ErrInvalidSpec, wantErr: "one path of no node",
		},
		"StorageClasses sharing a path with the defaults and each other": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.StorageClasses = map[string][]string{
					"fast": {filepath.Join(c.HostPathRoot, "fast"), c.Path},
					"slow": {filepath.Join(c.HostPathRoot, "fast")},
				}
			},
		},
		"a StorageClass of no path": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.StorageClasses = map[string][]string{"fast": nil}
			},
			want: backend.ErrInvalidSpec, wantErr: `StorageClass "fast" has no path`,
		},
		"a StorageClass path inside path": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.StorageClasses = map[string][]string{"fast": {filepath.Join(c.Path, "fast")}}
			},
			want: backend.ErrInvalidSpec, wantErr: "of one node overlap",
		},
		"a StorageClass listing a path twice": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.StorageClasses = map[string][]string{"fast": {c.Path, c.Path}}
			},
			want: backend.ErrInvalidSpec, wantErr: "of one node overlap",
		},
		"a StorageClass path outside the root": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.StorageClasses = map[string][]string{"fast": {filepath.Join(tmp, "outside")}}
			},
			want: backend.ErrInvalidSpec, wantErr: "outside the host path root",
		},
		"more than 17 distinct paths": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.StorageClasses = map[string][]string{}
				for i := range 17 {
					c.StorageClasses[fmt.Sprint("class-", i)] = []string{filepath.Join(c.HostPathRoot, fmt.Sprint("base-", i))}
				}
			},
			want: backend.ErrInvalidSpec, wantErr: "18 distinct paths on the node, more than 17",
		},
		"a StorageClass on a shared file system": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.Shared, c.NodeName, c.VolumeType = true, "", VolumeTypeHostPath
				c.StorageClasses = map[string][]string{"fast": {filepath.Join(c.HostPathRoot, "fast")}}
			},
		},
		"a StorageClass of two paths on a shared file system": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.Shared, c.NodeName, c.VolumeType = true, "", VolumeTypeHostPath
				c.StorageClasses = map[string][]string{"fast": {filepath.Join(c.HostPathRoot, "fast"), filepath.Join(c.HostPathRoot, "fast2")}}
			},
			want: backend.ErrInvalidSpec, wantErr: `one path per StorageClass, "fast" has 2`,
		},
		"an additional path outside the root": {
			mutate: func(t *testing.T, tmp string, c *Config) {
				t.Helper()
				c.AdditionalPaths = []string{filepath.Join(tmp, "outside")}
			},
			want: backend.ErrInvalidSpec, wantErr: "outside the host path root",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tmp, root := layout(t)
			cfg := Config{Path: filepath.Join(root, "vols"), HostPathRoot: root, NodeName: "node-a"}
			if tc.mutate != nil {
				tc.mutate(t, tmp, &cfg)
			}
			before := backendtest.Snapshot(t, filepath.Join(tmp, "outside"), "")
			_, err := New(cfg, Options{})
			if diff := cmp.Diff(before, backendtest.Snapshot(t, filepath.Join(tmp, "outside"), "")); diff != "" {
				t.Errorf("New changed files outside the root (-before +after):\n%s", diff)
			}
			backendtest.CheckNewError(t, err, tc.want, tc.wantErr)
		})
	}
}

func TestProvision(t *testing.T) {
	directory := corev1.HostPathDirectory
	filesystem := corev1.PersistentVolumeFilesystem
	affinity := func(host string) *corev1.VolumeNodeAffinity {
		return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{host}}},
		}}}}
	}
	pinned := func(key, value string) *corev1.VolumeNodeAffinity {
		return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}},
		}}}}
	}
	node := func(name, hostname string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: hostname}}}
	}
	local := func(p string) corev1.PersistentVolumeSource {
		return corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: p}}
	}
	const rackKey = "topology.example.com/rack"
	racked := node("node-a", "host-a")
	racked.Labels[rackKey] = "rack-1"
	tests := map[string]struct {
		volumeType VolumeType
		pattern    string
		// affinityKey is the backend's NodeAffinityKey.
		affinityKey string
		// params are more class parameters; a nodePath of "." is the
		// backend's path, of "+" its additional path.
		params map[string]string
		// wantAdditional says the volume goes in the additional path, not
		// the path.
		wantAdditional bool
		mountOptions   []string
		selected       *corev1.Node
		wantSource     func(path string) corev1.PersistentVolumeSource
		wantAffinity   *corev1.VolumeNodeAffinity
		wantAnn        map[string]string
		wantDir        string
		wantState      provisioning.ProvisioningState
		wantErr        string
	}{
		"local": {
			mountOptions: []string{"noatime"}, wantDir: "pvc-team-data",
			wantSource: func(p string) corev1.PersistentVolumeSource {
				return corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: p}}
			},
			wantAffinity: affinity("node-a"), wantAnn: map[string]string{backend.AnnNode: "node-a"},
		},
		"local on the selected node uses its hostname label": {
			selected: node("node-a", "host-a"), pattern: "{{.PVC.Namespace}}/{{.PVC.Name}}", wantDir: "team/data",
			wantSource: func(p string) corev1.PersistentVolumeSource {
				return corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: p}}
			},
			wantAffinity: affinity("host-a"), wantAnn: map[string]string{backend.AnnNode: "node-a"},
		},
		"hostPath": {
			volumeType: VolumeTypeHostPath, wantDir: "pvc-team-data",
			wantSource: func(p string) corev1.PersistentVolumeSource {
				return corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p, Type: &directory}}
			},
			wantAffinity: affinity("node-a"), wantAnn: map[string]string{backend.AnnNode: "node-a"},
		},
		"another selected node": {
			selected:  node("node-b", "node-b"),
			wantState: provisioning.ProvisioningReschedule, wantErr: "volumes live on node node-a",
		},
		"hostPath with mount options": {
			volumeType: VolumeTypeHostPath, mountOptions: []string{"ro"},
			wantErr: "hostPath volumes take no mount options",
		},
		"hostile pattern": {
			pattern: "{{.PVC.Namespace}}/../../{{.PVC.Name}}", wantErr: `".."`,
		},
		"local-path class of this path, its onDelete recorded": {
			volumeType: VolumeTypeHostPath, params: map[string]string{"nodePath": ".", "onDelete": "Retain"}, wantDir: "pvc-team-data",
			wantSource: func(p string) corev1.PersistentVolumeSource {
				return corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p, Type: &directory}}
			},
			wantAffinity: affinity("node-a"), wantAnn: map[string]string{backend.AnnNode: "node-a", backend.AnnOnDelete: "Retain"},
		},
		"local-path class of the additional path": {
			params: map[string]string{"nodePath": "+"}, wantDir: "pvc-team-data", wantAdditional: true,
			wantSource: local, wantAffinity: affinity("node-a"), wantAnn: map[string]string{backend.AnnNode: "node-a"},
		},
		"local-path class of another path": {
			params: map[string]string{"nodePath": "/opt/local-path-provisioner"}, wantErr: `parameter nodePath: "/opt/local-path-provisioner" is none of this provisioner's paths on the node (`,
		},
		"pinned by another label, of the selected node": {
			affinityKey: rackKey, selected: racked, wantDir: "pvc-team-data",
			wantSource: local, wantAffinity: pinned(rackKey, "rack-1"), wantAnn: map[string]string{backend.AnnNode: "node-a"},
		},
		"pinned by another label the node lacks: its name": {
			affinityKey: rackKey, selected: node("node-a", "host-a"), wantDir: "pvc-team-data",
			wantSource: local, wantAffinity: pinned(rackKey, "node-a"), wantAnn: map[string]string{backend.AnnNode: "node-a"},
		},
		"local-path class of the same nodeAffinityKey": {
			affinityKey: rackKey, selected: racked, params: map[string]string{"nodeAffinityKey": rackKey}, wantDir: "pvc-team-data",
			wantSource: local, wantAffinity: pinned(rackKey, "rack-1"), wantAnn: map[string]string{backend.AnnNode: "node-a"},
		},
		"local-path class of an empty nodeAffinityKey": {
			params: map[string]string{"nodeAffinityKey": ""}, selected: racked, wantDir: "pvc-team-data",
			wantSource: local, wantAffinity: affinity("host-a"), wantAnn: map[string]string{backend.AnnNode: "node-a"},
		},
		"local-path class of the host name as nodeAffinityKey": {
			params: map[string]string{"nodeAffinityKey": corev1.LabelHostname}, selected: racked, wantDir: "pvc-team-data",
			wantSource: local, wantAffinity: affinity("host-a"), wantAnn: map[string]string{backend.AnnNode: "node-a"},
		},
		"local-path class of another nodeAffinityKey": {
			params: map[string]string{"nodeAffinityKey": rackKey}, selected: racked,
			wantErr: `parameter nodeAffinityKey: "topology.example.com/rack" is not the node label this provisioner pins volumes with, "kubernetes.io/hostname": set hostPath.nodeAffinityKey`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, root := layout(t)
			path, additional := filepath.Join(root, "vols"), filepath.Join(root, "more")
			p, err := New(Config{
				Path: path, AdditionalPaths: []string{additional}, NodeAffinityKey: tc.affinityKey,
				HostPathRoot: root, VolumeType: tc.volumeType, NodeName: "node-a",
			}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			class := backendtest.Class(map[string]string{})
			if tc.pattern != "" {
				class.Parameters["pathPattern"] = tc.pattern
			}
			for key, value := range tc.params {
				if key == "nodePath" && value == "." {
					value = path
				}
				if key == "nodePath" && value == "+" {
					value = additional
				}
				class.Parameters[key] = value
			}
			class.MountOptions = tc.mountOptions
			opts := backendtest.Options(backendtest.Claim("team", "data", "3Gi"), class)
			opts.SelectedNode = tc.selected
			pv, state, err := p.Provision(t.Context(), opts)
			wantState := tc.wantState
			if wantState == "" {
				wantState = provisioning.ProvisioningFinished
			}
			if state != wantState {
				t.Errorf("state = %s, want %s", state, wantState)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Provision() error = %v, want %q", err, tc.wantErr)
				}
				for _, base := range []string{path, additional} {
					if diff := cmp.Diff([]string{dirvol.JournalDir + "/"}, backendtest.Tree(t, base)); diff != "" {
						t.Errorf("a refused claim left files in the base (-want +got):\n%s", diff)
					}
				}
				return
			}
			if tc.wantAdditional {
				path = additional
			}
			if err != nil {
				t.Fatalf("Provision: %v", err)
			}
			want := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pvc-team-data", Annotations: tc.wantAnn},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("3Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
					StorageClassName:              "standard",
					VolumeMode:                    &filesystem,
					MountOptions:                  tc.mountOptions,
					NodeAffinity:                  tc.wantAffinity,
					PersistentVolumeSource:        tc.wantSource(filepath.Join(path, tc.wantDir)),
				},
			}
			if diff := cmp.Diff(want, pv); diff != "" {
				t.Errorf("Provision() mismatch (-want +got):\n%s", diff)
			}
			if info, err := os.Stat(filepath.Join(path, tc.wantDir)); err != nil || !info.IsDir() {
				t.Errorf("volume directory missing: %v", err)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	tests := map[string]struct {
		onDelete backend.OnDeletePolicy
		mutate   func(pv *corev1.PersistentVolume, path string)
		wantErr  string
		wantLeft []string
	}{
		"delete":  {onDelete: backend.OnDeleteDelete},
		"retain":  {onDelete: backend.OnDeleteRetain, wantLeft: []string{"team"}},
		"archive": {onDelete: backend.OnDeleteArchive, wantLeft: []string{"team"}},
		"hostPath volume": {
			mutate: func(pv *corev1.PersistentVolume, path string) {
				pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: pv.Spec.Local.Path}
				pv.Spec.Local = nil
			},
		},
		"path outside the base": {
			mutate: func(pv *corev1.PersistentVolume, path string) {
				pv.Spec.Local.Path = filepath.Join(path, "..", "other")
			},
			wantErr: "not below", wantLeft: []string{"team"},
		},
		"the base itself": {
			mutate:  func(pv *corev1.PersistentVolume, path string) { pv.Spec.Local.Path = path },
			wantErr: "not below", wantLeft: []string{"team"},
		},
		"not a directory volume": {
			mutate:  func(pv *corev1.PersistentVolume, path string) { pv.Spec.Local = nil },
			wantErr: "neither a local nor a hostPath volume", wantLeft: []string{"team"},
		},
		"on another node": {
			mutate:  func(pv *corev1.PersistentVolume, path string) { pv.Annotations[backend.AnnNode] = "node-b" },
			wantErr: `lives on node "node-b"`, wantLeft: []string{"team"},
		},
		"pinned to another node by affinity alone": {
			mutate: func(pv *corev1.PersistentVolume, path string) {
				delete(pv.Annotations, backend.AnnNode)
				pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{"node-b"}
			},
			wantErr: `lives on node "node-b"`, wantLeft: []string{"team"},
		},
		"pinned to this node by affinity alone": {
			mutate: func(pv *corev1.PersistentVolume, path string) { delete(pv.Annotations, backend.AnnNode) },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tmp, root := layout(t)
			path := filepath.Join(root, "vols")
			p, err := New(Config{Path: path, HostPathRoot: root, NodeName: "node-a", OnDelete: tc.onDelete, PathPattern: "{{.PVC.Namespace}}/{{.PVC.Name}}"}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			pv, _, err := p.Provision(t.Context(), backendtest.Options(backendtest.Claim("team", "data", "1Gi"), nil))
			if err != nil {
				t.Fatal(err)
			}
			if tc.mutate != nil {
				tc.mutate(pv, path)
			}
			before := backendtest.Snapshot(t, tmp, path)
			err = p.Delete(t.Context(), pv)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Delete() error = %v, want %q", err, tc.wantErr)
			}
			var left []string
			entries, _ := os.ReadDir(path)
			for _, e := range entries {
				left = append(left, e.Name())
			}
			if diff := cmp.Diff(append([]string{dirvol.JournalDir}, tc.wantLeft...), left); diff != "" {
				t.Errorf("left in the base (-want +got):\n%s", diff)
			}
			// A refused Delete keeps the record, so the volume is not forgotten.
			var wantUnsaved []string
			if err != nil {
				wantUnsaved = []string{pv.Name}
			}
			if diff := cmp.Diff(wantUnsaved, backendtest.UnsavedNames(t, p)); diff != "" {
				t.Errorf("on record after Delete (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, backendtest.Snapshot(t, tmp, path)); diff != "" {
				t.Errorf("Delete changed files outside the base (-before +after):\n%s", diff)
			}
			if err == nil {
				if err := p.Delete(t.Context(), pv); err != nil {
					t.Errorf("second Delete: %v", err)
				}
			}
		})
	}
}

func TestReclaim(t *testing.T) {
	tests := map[string]struct {
		volumeType VolumeType
		pattern    string
		end        backendtest.ReclaimEnd
	}{
		"local, deleted":    {pattern: "{{.PVC.Namespace}}/{{.PVC.Name}}"},
		"local, saved":      {end: backendtest.ReclaimSaved},
		"hostPath, deleted": {volumeType: VolumeTypeHostPath},
		"hostPath, saved":   {volumeType: VolumeTypeHostPath, end: backendtest.ReclaimSaved},
		"hostPath in a pattern folder, deleted": {
			volumeType: VolumeTypeHostPath, pattern: "{{.PVC.Namespace}}/x/{{.PVC.Name}}",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, root := layout(t)
			p, err := New(Config{
				Path: filepath.Join(root, "vols"), HostPathRoot: root,
				VolumeType: tc.volumeType, NodeName: "node-a", PathPattern: tc.pattern,
			}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			opts := backendtest.Options(backendtest.Claim("team", "data", "1Gi"), backendtest.Class(nil))
			backendtest.CheckReclaim(t, p, opts, localPath, tc.end)
		})
	}
}

// Saved compares a record with its saved PersistentVolume by the directory
// each resolves to, never byte for byte: one directory drops the record, two
// apart make the recorded one a second volume that goes, and what cannot be
// told apart (one inside the other, a saved volume that is not this
// backend's) is kept, its record dropped. A saved volume of another node
// makes the recorded directory an earlier try's on this node: it goes when
// empty, and is kept when it holds files.
func TestSavedComparesDirectories(t *testing.T) {
	backendtest.CheckSaved(t, map[string]backendtest.SavedCase{
		"the same source": {Mutate: func(*corev1.PersistentVolume) {}},
		"a hostPath source of the same path": {Mutate: func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: pv.Spec.Local.Path}
			pv.Spec.Local = nil
		}},
		"the same path, written otherwise": {Mutate: func(pv *corev1.PersistentVolume) {
			pv.Spec.Local.Path = filepath.Dir(pv.Spec.Local.Path) + "/./data/"
		}},
		"another directory": {
			Mutate: func(pv *corev1.PersistentVolume) {
				pv.Spec.Local.Path = filepath.Join(filepath.Dir(pv.Spec.Local.Path), "other")
			},
			Removed: true,
		},
		"a directory inside it": {Mutate: func(pv *corev1.PersistentVolume) { pv.Spec.Local.Path = filepath.Join(pv.Spec.Local.Path, "sub") }},
		"a directory around it": {Mutate: func(pv *corev1.PersistentVolume) { pv.Spec.Local.Path = filepath.Dir(pv.Spec.Local.Path) }},
		"another node: an empty directory an earlier try made here": {
			Mutate:  func(pv *corev1.PersistentVolume) { pv.Annotations[backend.AnnNode] = "node-b" },
			Removed: true,
		},
		"another node, a directory that holds files": {
			Mutate: func(pv *corev1.PersistentVolume) { pv.Annotations[backend.AnnNode] = "node-b" },
			Files:  true,
		},
		"another base":    {Mutate: func(pv *corev1.PersistentVolume) { pv.Spec.Local.Path = "/elsewhere/team/data" }},
		"not a directory": {Mutate: func(pv *corev1.PersistentVolume) { pv.Spec.Local = nil }},
		"the base itself": {Mutate: func(pv *corev1.PersistentVolume) { pv.Spec.Local.Path = filepath.Dir(filepath.Dir(pv.Spec.Local.Path)) }},
	}, func(t *testing.T) (backendtest.Fixture, error) {
		t.Helper()
		_, root := layout(t)
		p, err := New(Config{
			Path: filepath.Join(root, "vols"), HostPathRoot: root, NodeName: "node-a",
			PathPattern: "{{.PVC.Namespace}}/{{.PVC.Name}}",
		}, Options{})
		return backendtest.Fixture{Backend: p, LocalPath: localPath}, err
	})
}

func localPath(pv *corev1.PersistentVolume) string {
	if pv.Spec.Local != nil {
		return pv.Spec.Local.Path
	}
	return pv.Spec.HostPath.Path
}

func TestDeleteUnmarked(t *testing.T) {
	backendtest.CheckDeleteUnmarked(t, map[string]string{backend.AnnDeleteUnmarked: "true"}, func(t *testing.T) (backendtest.UnmarkedVolume, error) {
		t.Helper()
		_, root := layout(t)
		path := filepath.Join(root, "vols")
		p, err := New(Config{Path: path, HostPathRoot: root, NodeName: "node-a"}, Options{})
		dir := filepath.Join(path, "made-by-hand")
		return backendtest.UnmarkedVolume{Backend: p, Dir: dir, Source: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}}}, err
	})
}

func TestProvisionDirectory(t *testing.T) {
	backendtest.CheckDirectory(t, func(t *testing.T, dir backend.Directory, parameters map[string]string) (string, error) {
		t.Helper()
		_, root := layout(t)
		p, err := New(Config{Path: filepath.Join(root, "vols"), HostPathRoot: root, NodeName: "node-a", Directory: dir}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		pv, _, err := p.Provision(t.Context(), backendtest.Options(backendtest.Claim("team", "data", "1Gi"), backendtest.Class(parameters)))
		if err != nil {
			return "", err
		}
		return pv.Spec.Local.Path, nil
	})
}

// TestProbe: the provisioner reports the space of its path's file system
// while the path is there, and the path's absence as unavailable, until it
// is back.
func TestProbe(t *testing.T) {
	_, root := layout(t)
	path := filepath.Join(root, "vols")
	p, err := New(Config{Path: path, HostPathRoot: root, NodeName: "node-a"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		change  func(t *testing.T)
		wantErr error
	}{
		{name: "started", change: func(*testing.T) {}},
		{name: "path gone", change: func(t *testing.T) { t.Helper(); rename(t, path, path+".away") }, wantErr: backend.ErrUnavailable},
		{name: "path back", change: func(t *testing.T) { t.Helper(); rename(t, path+".away", path) }},
	}
	for _, step := range steps {
		step.change(t)
		space, err := p.Probe(t.Context())
		if !errors.Is(err, step.wantErr) {
			t.Fatalf("%s: Probe() error = %v, want %v", step.name, err, step.wantErr)
		}
		if err == nil && space.TotalBytes <= 0 {
			t.Errorf("%s: Probe() = %+v, want the size of the file system", step.name, space)
		}
	}
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// TestNodesShareAPath: the agents of two nodes with the same path reach two
// file systems, so a volume of another node neither collides with a new
// directory nor counts towards the budget, while one of this node, or one
// pinned to no node, does.
func TestNodesShareAPath(t *testing.T) {
	tests := map[string]struct {
		node     string
		affinity string
		dir      string
		wantErr  string
	}{
		"another node's volume at the same path":       {node: "node-b", dir: "pvc-team-data"},
		"another node's volume elsewhere, not counted": {node: "node-b", dir: "elsewhere"},
		"another provisioner's volume pinned by affinity to another node": {
			affinity: "node-b", dir: "pvc-team-data",
		},
		"this node's volume at the same path": {node: "node-a", dir: "pvc-team-data", wantErr: "another volume"},
		"this node's volume elsewhere fills the budget": {
			node: "node-a", dir: "elsewhere", wantErr: "capacity exhausted",
		},
		"another provisioner's volume pinned by affinity to this node": {
			affinity: "node-a", dir: "pvc-team-data", wantErr: "another volume",
		},
		"a volume pinned to no node at the same path": {dir: "pvc-team-data", wantErr: "another volume"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, root := layout(t)
			path := filepath.Join(root, "vols")
			other := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pvc-other", Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": "fleet"}},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: filepath.Join(path, tc.dir)}},
				},
			}
			if tc.node != "" {
				other.Annotations[backend.AnnNode] = tc.node
			}
			if tc.affinity != "" {
				other.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{tc.affinity}}},
				}}}}
			}
			volumes := backend.NewListedVolumes(func() ([]*corev1.PersistentVolume, error) { return []*corev1.PersistentVolume{other}, nil })
			p, err := New(Config{Path: path, HostPathRoot: root, NodeName: "node-a", Capacity: backend.Capacity{MaxVolumes: 1}},
				Options{ProvisionerNames: []string{"fleet"}, Volumes: volumes})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = p.Provision(t.Context(), backendtest.Options(backendtest.Claim("team", "data", "1Gi"), nil))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Provision() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestReleaseRemoved: the agent of a node that comes back applies the
// policy the manager gave with each PersistentVolume it deleted while the
// node was gone, whatever the backend's own, to its directory, and to no
// other: not a deleted one it was not told of, nor one that exists.
func TestReleaseRemoved(t *testing.T) {
	tests := map[string]struct {
		// onDelete is given with each of names; the backend's own is
		// another, Archive or, for Archive, Delete.
		onDelete backend.OnDeletePolicy
		// deleted are the claims whose PersistentVolume is gone.
		deleted []string
		names   []string
		want    []string
		// wantTree is what is left in the base but for the records.
		wantTree []string
	}{
		"delete": {
			onDelete: backend.OnDeleteDelete, deleted: []string{"a", "b"}, names: []string{"pvc-team-a"},
			want: []string{"pvc-team-a"}, wantTree: []string{".pvc-team-b.provfleet-volume", "pvc-team-b/", "pvc-team-b/file"},
		},
		"archive": {
			onDelete: backend.OnDeleteArchive, deleted: []string{"a"}, names: []string{"pvc-team-a"},
			want: []string{"pvc-team-a"},
			wantTree: []string{".pvc-team-b.provfleet-volume", "archived-pvc-team-a-20260102T030405Z/",
				"archived-pvc-team-a-20260102T030405Z/file", "pvc-team-b/", "pvc-team-b/file"},
		},
		"retain": {
			onDelete: backend.OnDeleteRetain, deleted: []string{"a"}, names: []string{"pvc-team-a"},
			want:     []string{"pvc-team-a"},
			wantTree: []string{".pvc-team-b.provfleet-volume", "pvc-team-a/", "pvc-team-a/file", "pvc-team-b/", "pvc-team-b/file"},
		},
		"a PersistentVolume that exists": {
			onDelete: backend.OnDeleteDelete, names: []string{"pvc-team-a"},
			wantTree: []string{".pvc-team-a.provfleet-volume", ".pvc-team-b.provfleet-volume", "pvc-team-a/", "pvc-team-a/file", "pvc-team-b/", "pvc-team-b/file"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, root := layout(t)
			path := filepath.Join(root, "vols")
			var pvs []*corev1.PersistentVolume
			volumes := backend.NewListedVolumes(func() ([]*corev1.PersistentVolume, error) { return pvs, nil })
			configured := backend.OnDeleteArchive
			if tc.onDelete == backend.OnDeleteArchive {
				configured = backend.OnDeleteDelete
			}
			p, err := New(Config{Path: path, HostPathRoot: root, NodeName: "node-a", OnDelete: configured},
				Options{Volumes: volumes, Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
			if err != nil {
				t.Fatal(err)
			}
			for _, claim := range []string{"a", "b"} {
				pv, _, err := p.Provision(t.Context(), backendtest.Options(backendtest.Claim("team", claim, "1Gi"), nil))
				if err != nil {
					t.Fatal(err)
				}
				backendtest.WriteFile(t, filepath.Join(pv.Spec.Local.Path, "file"), "data")
				pvs = append(pvs, pv)
				if err := p.Saved(t.Context(), pv, pv); err != nil {
					t.Fatal(err)
				}
			}
			pvs = slices.DeleteFunc(pvs, func(pv *corev1.PersistentVolume) bool {
				return slices.Contains(tc.deleted, strings.TrimPrefix(pv.Name, "pvc-team-"))
			})
			var removed []backend.RemovedVolume
			for _, name := range tc.names {
				removed = append(removed, backend.RemovedVolume{PVName: name, OnDelete: tc.onDelete})
			}
			got, err := p.ReleaseRemoved(t.Context(), removed)
			if err != nil {
				t.Errorf("ReleaseRemoved: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("released (-want +got):\n%s", diff)
			}
			tree := slices.DeleteFunc(backendtest.Tree(t, path), func(name string) bool { return strings.HasPrefix(name, dirvol.JournalDir) })
			if diff := cmp.Diff(tc.wantTree, tree); diff != "" {
				t.Errorf("left in the base (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReleaseRemovedNeedsVolumes(t *testing.T) {
	_, root := layout(t)
	p, err := New(Config{Path: filepath.Join(root, "vols"), HostPathRoot: root, NodeName: "node-a"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReleaseRemoved(t.Context(), []backend.RemovedVolume{{PVName: "pvc-team-a", OnDelete: backend.OnDeleteDelete}}); err == nil {
		t.Error("ReleaseRemoved without the cluster's volumes did not fail")
	}
}

// TestSeveralBases checks that the bases of one node share one capacity
// budget, and that a volume of any of them is deleted, and released when
// deleted while the node was removed.
func TestSeveralBases(t *testing.T) {
	_, root := layout(t)
	first, second := filepath.Join(root, "vols"), filepath.Join(root, "more")
	p, err := New(Config{
		Path: first, AdditionalPaths: []string{second}, HostPathRoot: root, NodeName: "node-a",
		Capacity: backend.Capacity{MaxVolumes: 2},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	provision := func(name, nodePath string) (*corev1.PersistentVolume, error) {
		class := backendtest.Class(map[string]string{"nodePath": nodePath})
		pv, _, err := p.Provision(t.Context(), backendtest.Options(backendtest.Claim("team", name, "1Gi"), class))
		return pv, err
	}
	inFirst, err := provision("a", first)
	if err != nil {
		t.Fatal(err)
	}
	inSecond, err := provision("b", second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provision("c", second); !errors.Is(err, provisioning.ErrNoRoom) {
		t.Errorf("a third volume, in the second base, got %v, want the budget of both bases exhausted", err)
	}
	got := []string{inFirst.Spec.Local.Path, inSecond.Spec.Local.Path}
	want := []string{filepath.Join(first, "pvc-team-a"), filepath.Join(second, "pvc-team-b")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("volume paths (-want +got):\n%s", diff)
	}
	if err := p.Delete(t.Context(), inSecond); err != nil {
		t.Fatalf("Delete of the volume in the second base: %v", err)
	}
	if diff := cmp.Diff([]string{dirvol.JournalDir + "/"}, backendtest.Tree(t, second)); diff != "" {
		t.Errorf("the second base after Delete (-want +got):\n%s", diff)
	}
}

// TestStorageClassBases: a claim of a StorageClass with base directories
// of its own goes in the first of them, or in the one its nodePath names
// among them, and never in another class's or the defaults; a claim of
// another class goes in the defaults. Volumes of every base are deleted.
func TestStorageClassBases(t *testing.T) {
	_, root := layout(t)
	vols, fast, fast2 := filepath.Join(root, "vols"), filepath.Join(root, "fast"), filepath.Join(root, "fast2")
	p, err := New(Config{
		Path: vols, HostPathRoot: root, NodeName: "node-a",
		StorageClasses: map[string][]string{"fast": {fast, fast2}, "shares": {vols}},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		claim, class, nodePath string
		want                   string
		wantErr                string
	}{
		{claim: "a", class: "fast", want: filepath.Join(fast, "pvc-team-a")},
		{claim: "b", class: "fast", nodePath: fast2, want: filepath.Join(fast2, "pvc-team-b")},
		{claim: "c", class: "fast", nodePath: vols, wantErr: "is none of this provisioner's paths on the node (" + fast + ", " + fast2 + ")"},
		{claim: "d", class: "standard", want: filepath.Join(vols, "pvc-team-d")},
		{claim: "e", class: "standard", nodePath: fast, wantErr: "is none of this provisioner's paths on the node (" + vols + ")"},
		{claim: "f", class: "shares", want: filepath.Join(vols, "pvc-team-f")},
	}
	var made []*corev1.PersistentVolume
	for _, tc := range tests {
		class := backendtest.Class(map[string]string{})
		class.Name = tc.class
		if tc.nodePath != "" {
			class.Parameters["nodePath"] = tc.nodePath
		}
		pv, _, err := p.Provision(t.Context(), backendtest.Options(backendtest.Claim("team", tc.claim, "1Gi"), class))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("claim %s of class %s: Provision() = %v, want an error containing %q", tc.claim, tc.class, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("claim %s of class %s: Provision() = %v", tc.claim, tc.class, err)
		}
		if got := pv.Spec.Local.Path; got != tc.want {
			t.Errorf("claim %s of class %s: path %s, want %s", tc.claim, tc.class, got, tc.want)
		}
		made = append(made, pv)
	}
	for _, pv := range made {
		if err := p.Delete(t.Context(), pv); err != nil {
			t.Errorf("Delete(%s) = %v", pv.Name, err)
		}
	}
	for _, base := range []string{vols, fast, fast2} {
		if diff := cmp.Diff([]string{dirvol.JournalDir + "/"}, backendtest.Tree(t, base)); diff != "" {
			t.Errorf("%s after the deletes (-want +got):\n%s", base, diff)
		}
	}
}

// TestReleaseRemovedInEveryBase: a volume deleted while its node was gone
// is released from whichever of the node's bases holds it, and is done
// only once no base holds it.
func TestReleaseRemovedInEveryBase(t *testing.T) {
	_, root := layout(t)
	first, second := filepath.Join(root, "vols"), filepath.Join(root, "more")
	var pvs []*corev1.PersistentVolume
	volumes := backend.NewListedVolumes(func() ([]*corev1.PersistentVolume, error) { return pvs, nil })
	p, err := New(Config{Path: first, AdditionalPaths: []string{second}, HostPathRoot: root, NodeName: "node-a"}, Options{Volumes: volumes})
	if err != nil {
		t.Fatal(err)
	}
	for claim, base := range map[string]string{"a": first, "b": second, "c": second} {
		class := backendtest.Class(map[string]string{"nodePath": base})
		pv, _, err := p.Provision(t.Context(), backendtest.Options(backendtest.Claim("team", claim, "1Gi"), class))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Saved(t.Context(), pv, pv); err != nil {
			t.Fatal(err)
		}
		if claim == "c" {
			pvs = append(pvs, pv)
		}
	}
	removed := []backend.RemovedVolume{{PVName: "pvc-team-b", OnDelete: backend.OnDeleteDelete}, {PVName: "pvc-team-a", OnDelete: backend.OnDeleteDelete}}
	got, err := p.ReleaseRemoved(t.Context(), removed)
	if err != nil {
		t.Fatalf("ReleaseRemoved: %v", err)
	}
	if diff := cmp.Diff([]string{"pvc-team-b", "pvc-team-a"}, got); diff != "" {
		t.Errorf("released (-want +got):\n%s", diff)
	}
	left := map[string][]string{}
	for _, base := range []string{first, second} {
		left[base] = slices.DeleteFunc(backendtest.Tree(t, base), func(name string) bool { return strings.HasPrefix(name, dirvol.JournalDir) })
	}
	want := map[string][]string{first: {}, second: {".pvc-team-c.provfleet-volume", "pvc-team-c/"}}
	if diff := cmp.Diff(want, left, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("left in the bases (-want +got):\n%s", diff)
	}
}

// TestSharedFileSystem: on a shared file system a volume is pinned to no
// node, whichever node the scheduler selected, and takes any access mode;
// the class parameters nodePath and nodeAffinityKey are ignored, as
// local-path-provisioner's sharedFileSystemPath ignores them. A volume of a
// node is none of its own: Delete refuses it and leaves its directory.
func TestSharedFileSystem(t *testing.T) {
	_, root := layout(t)
	base := filepath.Join(root, "shared")
	p, err := New(Config{Path: base, HostPathRoot: root, Shared: true, VolumeType: VolumeTypeHostPath, Capacity: backend.Capacity{MaxVolumes: 2}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	claim := backendtest.Claim("team", "data", "1Gi")
	claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	class := backendtest.Class(map[string]string{"nodePath": "/elsewhere", "nodeAffinityKey": "topology.example.com/rack"})
	opts := backendtest.Options(claim, class)
	opts.SelectedNode = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}
	pv, state, err := p.Provision(t.Context(), opts)
	if err != nil || state != provisioning.ProvisioningFinished {
		t.Fatalf("Provision() = %v, %v, want a volume", state, err)
	}
	directory := corev1.HostPathDirectory
	want := corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(base, "pvc-team-data"), Type: &directory}}
	if diff := cmp.Diff(want, pv.Spec.PersistentVolumeSource); diff != "" {
		t.Errorf("source (-want +got):\n%s", diff)
	}
	if pv.Spec.NodeAffinity != nil {
		t.Errorf("node affinity = %+v, want none", pv.Spec.NodeAffinity)
	}
	if node, ok := pv.Annotations[backend.AnnNode]; ok {
		t.Errorf("annotation %s = %q, want none", backend.AnnNode, node)
	}
	if diff := cmp.Diff([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, pv.Spec.AccessModes); diff != "" {
		t.Errorf("access modes (-want +got):\n%s", diff)
	}

	pinned := pv.DeepCopy()
	pinned.Annotations = map[string]string{backend.AnnNode: "node-b"}
	if err := p.Delete(t.Context(), pinned); err == nil || !strings.Contains(err.Error(), "shared file system of no node") {
		t.Errorf("Delete of a volume of node-b = %v, want refused", err)
	}
	if _, err := os.Stat(filepath.Join(base, "pvc-team-data")); err != nil {
		t.Errorf("the directory after a refused Delete: %v", err)
	}
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatalf("Delete() = %v", err)
	}
	if diff := cmp.Diff([]string{dirvol.JournalDir + "/"}, backendtest.Tree(t, base)); diff != "" {
		t.Errorf("the shared path after Delete (-want +got):\n%s", diff)
	}
}
