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

package backend

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The expected fates below are those of
// kubernetes-sigs/nfs-subdir-external-provisioner's
// cmd/nfs-subdir-external-provisioner/provisioner.go, func Delete: at commit
// 59a3ca2 (v4.0.3's changelog; the Delete of the v4.0.3 release, c147d72,
// is the same code) and at tag v4.0.2.
//
//   - v4.0.3 :164-170: onDelete is compared with "delete" (RemoveAll) and
//     "retain" (nothing) only; any other value, of any case, falls through.
//   - v4.0.3 :175-184: archiveOnDelete, when present, is read by
//     strconv.ParseBool; an error is returned (so the delete fails on every
//     retry, :179), false removes the directory (:181-182).
//   - v4.0.3 :186-188: otherwise the directory is renamed to
//     archived-<last component> at the top of the export.
//   - v4.0.2 :141-143: the directory acted on is <export>/<last component of
//     the path>; :145-147 a missing one is skipped, so a volume nested in
//     folders by a pathPattern is never touched.
//   - v4.0.3 :196-202: a volume without a class, or whose class cannot be
//     read, fails its delete on every retry.
func TestNFSSubdirOnDelete(t *testing.T) {
	v402 := NFSSubdir{Version: NFSSubdirVersion{Major: 4, Minor: 0, Patch: 2}}
	v403 := NFSSubdir{Version: NFSSubdirVersion{Major: 4, Minor: 0, Patch: 3}}
	tests := map[string]struct {
		subdir    NFSSubdir
		params    map[string]string
		dir       string
		want      OnDeletePolicy
		undecided bool
	}{
		"no parameters: archive (:175 absent, :186)":         {subdir: v403, want: OnDeleteArchiveAsNFSSubdir},
		"onDelete delete (:166)":                             {subdir: v403, params: map[string]string{"onDelete": "delete"}, want: OnDeleteDelete},
		"onDelete retain (:168)":                             {subdir: v403, params: map[string]string{"onDelete": "retain"}, want: OnDeleteRetain},
		"onDelete Delete is no match: archive (:165)":        {subdir: v403, params: map[string]string{"onDelete": "Delete"}, want: OnDeleteArchiveAsNFSSubdir},
		"onDelete DELETE is no match: archive (:165)":        {subdir: v403, params: map[string]string{"onDelete": "DELETE"}, want: OnDeleteArchiveAsNFSSubdir},
		"onDelete Retain is no match: archive (:165)":        {subdir: v403, params: map[string]string{"onDelete": "Retain"}, want: OnDeleteArchiveAsNFSSubdir},
		"onDelete archive is no word of it: archive (:165)":  {subdir: v403, params: map[string]string{"onDelete": "archive"}, want: OnDeleteArchiveAsNFSSubdir},
		"onDelete empty: archive (:165)":                     {subdir: v403, params: map[string]string{"onDelete": ""}, want: OnDeleteArchiveAsNFSSubdir},
		"onDelete with spaces is no match (:165)":            {subdir: v403, params: map[string]string{"onDelete": " delete"}, want: OnDeleteArchiveAsNFSSubdir},
		"onDelete Delete, archiveOnDelete true: archive":     {subdir: v403, params: map[string]string{"onDelete": "Delete", "archiveOnDelete": "true"}, want: OnDeleteArchiveAsNFSSubdir},
		"onDelete Delete, archiveOnDelete false: delete":     {subdir: v403, params: map[string]string{"onDelete": "Delete", "archiveOnDelete": "false"}, want: OnDeleteDelete},
		"onDelete delete wins over archiveOnDelete true":     {subdir: v403, params: map[string]string{"onDelete": "delete", "archiveOnDelete": "true"}, want: OnDeleteDelete},
		"onDelete retain wins over archiveOnDelete false":    {subdir: v403, params: map[string]string{"onDelete": "retain", "archiveOnDelete": "false"}, want: OnDeleteRetain},
		"onDelete retain wins over a bad archiveOnDelete":    {subdir: v403, params: map[string]string{"onDelete": "retain", "archiveOnDelete": "yes"}, want: OnDeleteRetain},
		"archiveOnDelete true (:177, :186)":                  {subdir: v403, params: map[string]string{"archiveOnDelete": "true"}, want: OnDeleteArchiveAsNFSSubdir},
		"archiveOnDelete True":                               {subdir: v403, params: map[string]string{"archiveOnDelete": "True"}, want: OnDeleteArchiveAsNFSSubdir},
		"archiveOnDelete TRUE":                               {subdir: v403, params: map[string]string{"archiveOnDelete": "TRUE"}, want: OnDeleteArchiveAsNFSSubdir},
		"archiveOnDelete t":                                  {subdir: v403, params: map[string]string{"archiveOnDelete": "t"}, want: OnDeleteArchiveAsNFSSubdir},
		"archiveOnDelete 1":                                  {subdir: v403, params: map[string]string{"archiveOnDelete": "1"}, want: OnDeleteArchiveAsNFSSubdir},
		"archiveOnDelete false (:181)":                       {subdir: v403, params: map[string]string{"archiveOnDelete": "false"}, want: OnDeleteDelete},
		"archiveOnDelete False":                              {subdir: v403, params: map[string]string{"archiveOnDelete": "False"}, want: OnDeleteDelete},
		"archiveOnDelete FALSE":                              {subdir: v403, params: map[string]string{"archiveOnDelete": "FALSE"}, want: OnDeleteDelete},
		"archiveOnDelete f":                                  {subdir: v403, params: map[string]string{"archiveOnDelete": "f"}, want: OnDeleteDelete},
		"archiveOnDelete F":                                  {subdir: v403, params: map[string]string{"archiveOnDelete": "F"}, want: OnDeleteDelete},
		"archiveOnDelete 0":                                  {subdir: v403, params: map[string]string{"archiveOnDelete": "0"}, want: OnDeleteDelete},
		"archiveOnDelete yes fails every delete (:179)":      {subdir: v403, params: map[string]string{"archiveOnDelete": "yes"}, undecided: true},
		"archiveOnDelete no fails every delete (:179)":       {subdir: v403, params: map[string]string{"archiveOnDelete": "no"}, undecided: true},
		"archiveOnDelete empty fails every delete (:179)":    {subdir: v403, params: map[string]string{"archiveOnDelete": ""}, undecided: true},
		"archiveOnDelete fAlse fails every delete (:179)":    {subdir: v403, params: map[string]string{"archiveOnDelete": "fAlse"}, undecided: true},
		"unknown parameters are not read":                    {subdir: v403, params: map[string]string{"archive": "false", "mode": "0700", "onDelte": "delete"}, want: OnDeleteArchiveAsNFSSubdir},
		"a pathPattern plays no part in v4.0.3 (:149)":       {subdir: v403, params: map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.name}", "onDelete": "delete"}, dir: "team/data", want: OnDeleteDelete},
		"v4.0.3 archives a nested directory (:186)":          {subdir: v403, params: map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.name}"}, dir: "team/data", want: OnDeleteArchiveAsNFSSubdir},
		"v4.0.2 deletes a top directory":                     {subdir: v402, params: map[string]string{"onDelete": "delete"}, dir: "team-data-pvc-1", want: OnDeleteDelete},
		"v4.0.2 archives a top directory":                    {subdir: v402, dir: "team-data-pvc-1", want: OnDeleteArchiveAsNFSSubdir},
		"v4.0.2 never touches a nested directory (:143-147)": {subdir: v402, params: map[string]string{"onDelete": "delete"}, dir: "team/data", want: OnDeleteRetain},
		"v4.0.2 nested, a bad archiveOnDelete never read":    {subdir: v402, params: map[string]string{"archiveOnDelete": "yes"}, dir: "team/data", want: OnDeleteRetain},
		"v4.0.2 top directory, a bad archiveOnDelete (:175)": {subdir: v402, params: map[string]string{"archiveOnDelete": "yes"}, dir: "top", undecided: true},
		"a later version goes as v4.0.3":                     {subdir: NFSSubdir{Version: NFSSubdirVersion{Major: 4, Minor: 1}}, dir: "team/data", want: OnDeleteArchiveAsNFSSubdir},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := tc.dir
			if dir == "" {
				dir = "team-data-pvc-1"
			}
			got, err := tc.subdir.OnDelete(tc.params, dir)
			if undecided := errors.Is(err, ErrFateUndecided); undecided != tc.undecided {
				t.Fatalf("OnDelete() error = %v, want one wrapping ErrFateUndecided: %v", err, tc.undecided)
			}
			if tc.undecided && !strings.Contains(err.Error(), "parameter archiveOnDelete") {
				t.Errorf("OnDelete() error = %q, want it to name the parameter", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("OnDelete() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNFSSubdirVolumeOnDelete(t *testing.T) {
	subdir := NFSSubdir{ProvisionerName: "cluster.local/nfs", Version: NFSSubdirVersion{Major: 4, Minor: 0, Patch: 3}}
	retain := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "keep"}, Parameters: map[string]string{"onDelete": "retain"}}
	tests := map[string]struct {
		className string
		class     *storagev1.StorageClass
		want      OnDeletePolicy
		wantErr   string
	}{
		"its class decides":               {className: "keep", class: retain, want: OnDeleteRetain},
		"no class name (:197-198)":        {wantErr: "volume pv-1 has no StorageClass: nfs-subdir-external-provisioner would fail"},
		"a class that is gone (:200-202)": {className: "gone", wantErr: "StorageClass gone of volume pv-1 does not exist: nfs-subdir-external-provisioner would fail"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{StorageClassName: tc.className}}
			got, err := subdir.VolumeOnDelete(pv, tc.class, "dir")
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if tc.wantErr == "" && gotErr != "" || !strings.Contains(gotErr, tc.wantErr) {
				t.Errorf("error = %q, want one containing %q", gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("VolumeOnDelete() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseNFSSubdirVersion(t *testing.T) {
	tests := map[string]struct {
		text    string
		want    NFSSubdirVersion
		wantErr bool
	}{
		"with v":    {text: "v4.0.2", want: NFSSubdirVersion{Major: 4, Patch: 2}},
		"without v": {text: "4.0.3", want: NFSSubdirVersion{Major: 4, Patch: 3}},
		"two parts": {text: "v4.0", wantErr: true},
		"a tag":     {text: "v4.0.2-rc1", wantErr: true},
		"negative":  {text: "v4.-1.0", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseNFSSubdirVersion(tc.text)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want an error: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseNFSSubdirVersion() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
