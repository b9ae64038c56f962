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

package dirvoltest

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
)

// volumesPath is where the PersistentVolumes of TestRelease say the base is.
const volumesPath = "/vols"

// releaseCase is one Release on a base holding the volumes of claims in
// namespace team: gone, nested (in folder team/x), kept (deleted but not
// named), live (its PersistentVolume exists) and unsaved (on record).
type releaseCase struct {
	// onDelete is the policy given with each of names, but for those
	// policies gives another; the store's own is always Archive.
	onDelete backend.OnDeletePolicy
	names    []string
	policies map[string]backend.OnDeletePolicy
	// existsErr fails every look-up of a PersistentVolume.
	existsErr error
	// plant changes the base at host, in the temporary folder tmp, after
	// the volumes were made.
	plant    func(t *testing.T, tmp, host string)
	want     []string
	wantTree []string
	wantErr  string
}

// removed returns the volumes the case releases, each with its policy.
func (tc releaseCase) removed() []backend.RemovedVolume {
	var removed []backend.RemovedVolume
	for _, name := range tc.names {
		policy, ok := tc.policies[name]
		if !ok {
			policy = tc.onDelete
		}
		removed = append(removed, backend.RemovedVolume{PVName: name, OnDelete: policy})
	}
	return removed
}

// keptVolumes are the volumes no Release of a case touches.
var keptVolumes = []string{
	".pvc-team-kept.provfleet-volume", ".pvc-team-live.provfleet-volume", ".pvc-team-unsaved.provfleet-volume",
	"pvc-team-kept/", "pvc-team-kept/file", "pvc-team-live/", "pvc-team-live/file", "pvc-team-unsaved/", "pvc-team-unsaved/file",
}

// allNames are the names the manager would give: every volume but kept,
// and one with no directory here.
var allNames = []string{"pvc-team-gone", "pvc-team-live", "pvc-team-unsaved", "pvc-team-nested", "pvc-team-nowhere"}

func releaseCases() map[string]releaseCase {
	withKept := func(tree ...string) []string { return slices.Sorted(slices.Values(append(tree, keptVolumes...))) }
	unreleased := withKept(".pvc-team-gone.provfleet-volume", "pvc-team-gone/", "pvc-team-gone/file",
		"team/", "team/x/", "team/x/.nested.provfleet-volume", "team/x/nested/", "team/x/nested/file")
	return map[string]releaseCase{
		"delete": {
			onDelete: backend.OnDeleteDelete, names: allNames,
			want: []string{"pvc-team-gone", "pvc-team-nested", "pvc-team-nowhere"}, wantTree: withKept(),
		},
		"archive": {
			onDelete: backend.OnDeleteArchive, names: allNames,
			want: []string{"pvc-team-gone", "pvc-team-nested", "pvc-team-nowhere"},
			wantTree: withKept("archived-pvc-team-gone-20260102T030405Z/", "archived-pvc-team-gone-20260102T030405Z/file",
				"team/", "team/x/", "team/x/archived-nested-20260102T030405Z/", "team/x/archived-nested-20260102T030405Z/file"),
		},
		"retain drops the markers": {
			onDelete: backend.OnDeleteRetain, names: allNames,
			want:     []string{"pvc-team-gone", "pvc-team-nested", "pvc-team-nowhere"},
			wantTree: withKept("pvc-team-gone/", "pvc-team-gone/file", "team/", "team/x/", "team/x/nested/", "team/x/nested/file"),
		},
		"each volume by the policy given with it": {
			onDelete: backend.OnDeleteDelete, names: allNames, policies: map[string]backend.OnDeletePolicy{"pvc-team-nested": backend.OnDeleteRetain},
			want:     []string{"pvc-team-gone", "pvc-team-nested", "pvc-team-nowhere"},
			wantTree: withKept("team/", "team/x/", "team/x/nested/", "team/x/nested/file"),
		},
		"a policy in doubt releases nothing": {
			onDelete: backend.OnDeleteDelete, names: []string{"pvc-team-gone", "pvc-team-nowhere"},
			policies: map[string]backend.OnDeletePolicy{"pvc-team-gone": "delete"},
			want:     []string{"pvc-team-nowhere"}, wantTree: unreleased, wantErr: `onDelete "delete" is not one of Delete, Retain, Archive`,
		},
		"a name given twice is returned once": {
			onDelete: backend.OnDeleteDelete, names: []string{"pvc-team-nowhere", "pvc-team-nowhere"},
			want: []string{"pvc-team-nowhere"}, wantTree: unreleased,
		},
		"no names": {onDelete: backend.OnDeleteDelete, wantTree: unreleased},
		"a link planted as a pattern folder is not followed": {
			onDelete: backend.OnDeleteDelete, names: allNames,
			plant: func(t *testing.T, tmp, host string) {
				t.Helper()
				outside := filepath.Join(tmp, "outside", "volumes")
				backendtest.WriteFile(t, filepath.Join(outside, ".old.provfleet-volume"), "pvc-team-gone")
				backendtest.WriteFile(t, filepath.Join(outside, "old", "file"), "data")
				backendtest.Symlink(t, outside, filepath.Join(host, "link"))
			},
			want: []string{"pvc-team-gone", "pvc-team-nested", "pvc-team-nowhere"}, wantTree: withKept("link"),
		},
		"a failing look-up releases nothing": {
			onDelete: backend.OnDeleteDelete, names: []string{"pvc-team-gone", "pvc-team-nowhere"}, existsErr: errors.New("cache gone"),
			want: []string{"pvc-team-nowhere"}, wantTree: unreleased, wantErr: "cache gone",
		},
	}
}

// TestRelease checks dirvol.Store.Release on a Store over what serve
// returns, one base per case: the directories of the named volumes whose
// PersistentVolume is gone get the onDelete policy, and no other changes.
func TestRelease(t *testing.T, serve Serve) {
	tmp := t.TempDir()
	export := filepath.Join(tmp, "export")
	backendtest.WriteFile(t, filepath.Join(tmp, "outside", "keep"), "outside the served directory")
	backendtest.WriteFile(t, filepath.Join(export, "beside", "keep"), "beside the bases")
	fsys, root, base := serve(t, export)
	cases := releaseCases()
	for i, name := range slices.Sorted(func(yield func(string) bool) {
		for name := range cases {
			if !yield(name) {
				return
			}
		}
	}) {
		t.Run(name, func(t *testing.T) {
			tc := cases[name]
			rel := path.Join(strconv.Itoa(i), "base")
			host := filepath.Join(export, filepath.FromSlash(rel))
			store := newReleaseStore(t, fsys, root, path.Join(base, rel), host, tc)
			if tc.plant != nil {
				tc.plant(t, tmp, host)
			}
			before := backendtest.Snapshot(t, tmp, host)
			got, err := store.Release(t.Context(), tc.removed())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Release: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Release: %v, want an error containing %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("released (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTree, volumeTree(t, host)); diff != "" {
				t.Errorf("tree after Release (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, backendtest.Snapshot(t, tmp, host)); diff != "" {
				t.Errorf("outside the base changed (-before +after):\n%s", diff)
			}
		})
	}
}

// newReleaseStore makes the base at host, reached as base below root, and
// its volumes, each with a file.
func newReleaseStore(t *testing.T, fsys dirvol.Filesystem, root, base, host string, tc releaseCase) *dirvol.Store {
	t.Helper()
	if err := os.MkdirAll(host, 0o755); err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{"pvc-team-live": true}
	volumes := &existing{names: live}
	store, err := dirvol.New(dirvol.Config{
		FS: fsys, Root: root, Base: base, OnDelete: backend.OnDeleteArchive,
		Options: dirvol.Options{Volumes: volumes, Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }},
		VolumeDir: func(pv *corev1.PersistentVolume) (string, error) {
			if pv.Spec.HostPath == nil {
				return "", errors.New("not a hostPath volume")
			}
			return dirvol.RelDir(volumesPath, pv.Spec.HostPath.Path)
		},
		Locate: func(dir string) (string, string) { return "", path.Join(volumesPath, dir) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, claim := range []string{"gone", "nested", "kept", "live", "unsaved"} {
		class := backendtest.Class(nil)
		if claim == "nested" {
			class = backendtest.Class(map[string]string{"pathPattern": "{{.PVC.Namespace}}/x/{{.PVC.Name}}"})
		}
		req, err := dirvol.ParseRequest(backendtest.Options(backendtest.Claim("team", claim, "1Gi"), class))
		if err != nil {
			t.Fatal(err)
		}
		vol, err := store.Create(t.Context(), req)
		if err != nil {
			t.Fatalf("Create %s: %v", claim, err)
		}
		dir := vol.Dir
		backendtest.WriteFile(t, filepath.Join(host, filepath.FromSlash(dir), "file"), "data")
		// Every PersistentVolume was saved, but for unsaved's.
		if claim != "unsaved" {
			if err := store.Forget(t.Context(), req.PVName, dir); err != nil {
				t.Fatal(err)
			}
		}
	}
	volumes.existsErr = tc.existsErr
	return store
}

// volumeTree lists the base's tree but for the records.
func volumeTree(t *testing.T, host string) []string {
	t.Helper()
	return slices.DeleteFunc(backendtest.Tree(t, host), func(name string) bool {
		return strings.HasPrefix(name, dirvol.JournalDir+"/")
	})
}

// existing is the cluster's PersistentVolumes as Release reads them: only
// their names. Each look-up of a name fails with existsErr, once set.
type existing struct {
	names     map[string]bool
	existsErr error
}

func (e *existing) List() ([]*corev1.PersistentVolume, error) { return nil, nil }

func (e *existing) Exists(name string) (bool, error) { return e.names[name], e.existsErr }

func (e *existing) Overlapping(string, string) ([]*corev1.PersistentVolume, error) { return nil, nil }
