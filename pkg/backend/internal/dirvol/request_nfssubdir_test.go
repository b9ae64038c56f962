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
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
)

// subdirResult is what a class of nfs-subdir-external-provisioner makes of
// the claim team/data (PV pvc-team-data).
type subdirResult struct {
	Dir       string
	Directory backend.Directory
}

// The expected results are those of nfs-subdir-external-provisioner's
// cmd/nfs-subdir-external-provisioner/provisioner.go, func Provision: at tag
// v4.0.2 and at c147d72 (PR #373, released in v4.0.3).
//
//   - v4.0.2 :90, :101-109 and v4.0.3 :95, :106-116: the directory is
//     <namespace>-<claim>-<PV name>, or what pathPattern renders; from v4.0.3
//     on a pattern that renders nothing falls back to the default, where
//     v4.0.2 gives the whole export (refused here).
//   - v4.0.3 :118-127: k8s-sigs.io/nfs-directory-mode, octal, 0 to 0777
//     (getModeFromString); a bad one fails the claim.
//   - v4.0.3 :137-161: k8s-sigs.io/nfs-directory-uid and -gid, decimal, 0 to
//     65535 (getIdFromString); a bad one is logged and the default used,
//     where here it fails the claim.
//   - v4.0.2 reads no claim annotation; neither reads mode, uid, gid or
//     nodePath parameters, nor any parameter but pathPattern, onDelete and
//     archiveOnDelete.
func TestParseNFSSubdirRequest(t *testing.T) {
	v402 := backend.NFSSubdir{ProvisionerName: "cluster.local/nfs", Version: backend.NFSSubdirVersion{Major: 4, Patch: 2}}
	v403 := backend.NFSSubdir{ProvisionerName: "cluster.local/nfs", Version: backend.NFSSubdirVersion{Major: 4, Patch: 3}}
	mode := func(m fs.FileMode) *fs.FileMode { return &m }
	tests := map[string]struct {
		subdir      backend.NFSSubdir
		params      map[string]string
		labels      map[string]string
		annotations map[string]string
		want        subdirResult
		wantErr     string
	}{
		"no parameters: its default name":           {subdir: v403, want: subdirResult{Dir: "team-data-pvc-team-data"}},
		"pathPattern":                               {subdir: v403, params: map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.name}"}, want: subdirResult{Dir: "team/data"}},
		"pathPattern with a label":                  {subdir: v403, params: map[string]string{"pathPattern": "${.PVC.labels.app}/${.PVC.name}"}, labels: map[string]string{"app": "web"}, want: subdirResult{Dir: "web/data"}},
		"pathPattern of fixed text":                 {subdir: v403, params: map[string]string{"pathPattern": "shared"}, want: subdirResult{Dir: "shared"}},
		"pathPattern with Go actions is text":       {subdir: v403, params: map[string]string{"pathPattern": "{{.PVC.Name}}"}, want: subdirResult{Dir: "{{.PVC.Name}}"}},
		"pathPattern empty: its default name":       {subdir: v403, params: map[string]string{"pathPattern": ""}, want: subdirResult{Dir: "team-data-pvc-team-data"}},
		"v4.0.3: renders nothing, the default":      {subdir: v403, params: map[string]string{"pathPattern": "${.PVC.labels.tier}"}, want: subdirResult{Dir: "team-data-pvc-team-data"}},
		"v4.0.2: renders nothing, refused":          {subdir: v402, params: map[string]string{"pathPattern": "${.PVC.labels.tier}"}, wantErr: "would give it the whole export"},
		"v4.0.2: empty pathPattern, refused":        {subdir: v402, params: map[string]string{"pathPattern": ""}, wantErr: "would give it the whole export"},
		"v4.0.2: no pathPattern, the default":       {subdir: v402, want: subdirResult{Dir: "team-data-pvc-team-data"}},
		"onDelete in any case is no error":          {subdir: v403, params: map[string]string{"onDelete": "Delete"}, want: subdirResult{Dir: "team-data-pvc-team-data"}},
		"archiveOnDelete no boolean":                {subdir: v403, params: map[string]string{"archiveOnDelete": "yes"}, wantErr: `StorageClass standard of nfs-subdir-external-provisioner cluster.local/nfs: parameter archiveOnDelete: nfs-subdir-external-provisioner would fail to delete this volume on every retry and keep its directory: strconv.ParseBool: parsing "yes": invalid syntax: use "true" or "false"`},
		"archiveOnDelete no boolean, onDelete wins": {subdir: v403, params: map[string]string{"archiveOnDelete": "yes", "onDelete": "delete"}, want: subdirResult{Dir: "team-data-pvc-team-data"}},
		"unknown parameters are ignored":            {subdir: v403, params: map[string]string{"archive": "x", "server": "y"}, want: subdirResult{Dir: "team-data-pvc-team-data"}},
		"our mode parameter refused":                {subdir: v403, params: map[string]string{"mode": "0750"}, wantErr: "parameter mode is not one nfs-subdir-external-provisioner reads"},
		"our uid parameter refused":                 {subdir: v403, params: map[string]string{"uid": "1000"}, wantErr: "parameter uid is not one"},
		"our gid parameter refused":                 {subdir: v403, params: map[string]string{"gid": "1000"}, wantErr: "parameter gid is not one"},
		"local-path's nodePath refused":             {subdir: v403, params: map[string]string{"nodePath": "/opt"}, wantErr: "parameter nodePath is not one"},
		"local-path's nodeAffinityKey refused":      {subdir: v403, params: map[string]string{"nodeAffinityKey": "rack"}, wantErr: "parameter nodeAffinityKey is not one"},
		"unknown ${} key refused":                   {subdir: v403, params: map[string]string{"pathPattern": "${.PVC.uid}"}, wantErr: "parameter pathPattern: path pattern"},
		"v4.0.3 mode annotation":                    {subdir: v403, annotations: map[string]string{AnnNFSDirectoryMode: "0750"}, want: subdirResult{Dir: "team-data-pvc-team-data", Directory: backend.Directory{Mode: mode(0o750)}}},
		"v4.0.3 mode annotation without 0":          {subdir: v403, annotations: map[string]string{AnnNFSDirectoryMode: "750"}, want: subdirResult{Dir: "team-data-pvc-team-data", Directory: backend.Directory{Mode: mode(0o750)}}},
		"v4.0.3 mode annotation empty: not set":     {subdir: v403, annotations: map[string]string{AnnNFSDirectoryMode: ""}, want: subdirResult{Dir: "team-data-pvc-team-data"}},
		"v4.0.3 mode annotation above 0777":         {subdir: v403, annotations: map[string]string{AnnNFSDirectoryMode: "1777"}, wantErr: `annotation k8s-sigs.io/nfs-directory-mode: "1777" is not an octal mode between 0 and 0777`},
		"v4.0.3 mode annotation not octal":          {subdir: v403, annotations: map[string]string{AnnNFSDirectoryMode: "0789"}, wantErr: "is not an octal mode"},
		"v4.0.3 uid and gid annotations":            {subdir: v403, annotations: map[string]string{AnnNFSDirectoryUID: "1000", AnnNFSDirectoryGID: "2000"}, want: subdirResult{Dir: "team-data-pvc-team-data", Directory: backend.Directory{UID: ptr(int64(1000)), GID: ptr(int64(2000))}}},
		"v4.0.3 uid annotation zero":                {subdir: v403, annotations: map[string]string{AnnNFSDirectoryUID: "0"}, want: subdirResult{Dir: "team-data-pvc-team-data", Directory: backend.Directory{UID: ptr(int64(0))}}},
		"v4.0.3 uid annotation above 65535":         {subdir: v403, annotations: map[string]string{AnnNFSDirectoryUID: "65536"}, wantErr: `annotation k8s-sigs.io/nfs-directory-uid: "65536" is not a number between 0 and 65535`},
		"v4.0.3 gid annotation not a number":        {subdir: v403, annotations: map[string]string{AnnNFSDirectoryGID: "staff"}, wantErr: `annotation k8s-sigs.io/nfs-directory-gid: "staff"`},
		"v4.0.2 ignores the annotations":            {subdir: v402, annotations: map[string]string{AnnNFSDirectoryMode: "bad", AnnNFSDirectoryUID: "1000"}, want: subdirResult{Dir: "team-data-pvc-team-data"}},
		"the unmerged nfs.io names are not read":    {subdir: v403, annotations: map[string]string{"nfs.io/createMode": "0700", "nfs.io/createUID": "1000"}, want: subdirResult{Dir: "team-data-pvc-team-data"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := backendtest.Claim("team", "data", "1Gi")
			claim.Labels, claim.Annotations = tc.labels, tc.annotations
			class := backendtest.Class(tc.params)
			class.Provisioner = tc.subdir.ProvisionerName
			req, err := ParseNFSSubdirRequest(backendtest.Options(claim, class), tc.subdir)
			var got subdirResult
			if err == nil {
				got.Directory = req.Directory
				got.Dir, err = req.Pattern.Render(req.PVName, req.Claim)
			}
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("request mismatch (-want +got):\n%s", diff)
			}
			if req.OnDelete != "" {
				t.Errorf("OnDelete = %q before the directory is known", req.OnDelete)
			}
		})
	}
}

// TestDeleteAtArchiveAsNFSSubdir archives volume directories as
// nfs-subdir-external-provisioner v4.0.3 does (provisioner.go:186-188):
// archived-<last component> at the top of the base, whatever folders a
// pattern put the directory in; where that name is taken, with a suffix.
func TestDeleteAtArchiveAsNFSSubdir(t *testing.T) {
	tests := map[string]struct {
		dir        string
		taken      bool
		wantRemain []string
	}{
		"top directory": {
			dir:        "team-data-pvc-1",
			wantRemain: []string{"archived-team-data-pvc-1/", "archived-team-data-pvc-1/file"},
		},
		"nested directory: to the top": {
			dir:        "team/data",
			wantRemain: []string{"archived-data/", "archived-data/file"},
		},
		"name taken: a suffix": {
			dir:   "team/data",
			taken: true,
			wantRemain: []string{
				"archived-data-20260102T020405Z/", "archived-data-20260102T020405Z/file",
				"archived-data/", "archived-data/earlier",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			backendtest.WriteFile(t, filepath.Join(f.base, tc.dir, "file"), "data")
			if tc.taken {
				backendtest.WriteFile(t, filepath.Join(f.base, "archived-data", "earlier"), "an earlier archive")
			}
			pv := volume("pvc-1", tc.dir, "1Gi", "cluster.local/nfs")
			pv.Annotations[backend.AnnOnDelete] = string(backend.OnDeleteArchiveAsNFSSubdir)
			pv.Annotations[backend.AnnDeleteUnmarked] = "true"
			if err := f.store.DeleteAt(t.Context(), pv, tc.dir); err != nil {
				t.Fatalf("DeleteAt: %v", err)
			}
			if diff := cmp.Diff(tc.wantRemain, volumesIn(t, f.base)); diff != "" {
				t.Errorf("tree after DeleteAt (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeleteUndecided keeps a directory whose fate is not known, and
// succeeds for one that is gone, as nfs-subdir-external-provisioner skips a
// missing directory before it reads the class (provisioner.go:151-154 at
// 59a3ca2).
func TestDeleteUndecided(t *testing.T) {
	f := newFixture(t, nil)
	backendtest.WriteFile(t, filepath.Join(f.base, "kept", "file"), "data")
	cause := backend.ErrFateUndecided
	err := f.store.DeleteUndecided(t.Context(), volume("pvc-1", "kept", "1Gi", "cluster.local/nfs"), cause)
	checkErr(t, err, cause.Error())
	if err := f.store.DeleteUndecided(t.Context(), volume("pvc-2", "gone", "1Gi", "cluster.local/nfs"), cause); err != nil {
		t.Errorf("DeleteUndecided of a missing directory: %v", err)
	}
	if diff := cmp.Diff([]string{"kept/", "kept/file"}, volumesIn(t, f.base)); diff != "" {
		t.Errorf("tree after DeleteUndecided (-want +got):\n%s", diff)
	}
}
