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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestVolumeOnDelete(t *testing.T) {
	tests := map[string]struct {
		annotations map[string]string
		want        OnDeletePolicy
		wantErr     string
	}{
		"none recorded: the configured": {want: OnDeleteRetain},
		"recorded":                      {annotations: map[string]string{AnnOnDelete: "Archive"}, want: OnDeleteArchive},
		"recorded Delete":               {annotations: map[string]string{AnnOnDelete: "Delete"}, want: OnDeleteDelete},
		"not a policy":                  {annotations: map[string]string{AnnOnDelete: "archive"}, wantErr: `annotation provfleet.io/on-delete: "archive" is not one of Delete, Retain, Archive, ArchiveAsNFSSubdir`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{}
			pv.Annotations = tc.annotations
			got, err := VolumeOnDelete(pv, OnDeleteRetain)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("error = %q, want %q", gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("VolumeOnDelete() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRemovedOnDelete: a directory is released as its provisioner's Delete
// would release it, and kept whenever that would not run or is in doubt.
func TestRemovedOnDelete(t *testing.T) {
	tests := map[string]struct {
		reclaim     corev1.PersistentVolumeReclaimPolicy
		annotations map[string]string
		configured  OnDeletePolicy
		want        OnDeletePolicy
	}{
		"Delete volume, nothing configured: Delete":       {reclaim: corev1.PersistentVolumeReclaimDelete, configured: "", want: OnDeleteDelete},
		"Delete volume, nothing recorded: the configured": {reclaim: corev1.PersistentVolumeReclaimDelete, configured: OnDeleteArchive, want: OnDeleteArchive},
		"Delete volume, its class's policy":               {reclaim: corev1.PersistentVolumeReclaimDelete, configured: OnDeleteArchive, annotations: map[string]string{AnnOnDelete: "Delete"}, want: OnDeleteDelete},
		"Delete volume, its class retains":                {reclaim: corev1.PersistentVolumeReclaimDelete, configured: OnDeleteArchive, annotations: map[string]string{AnnOnDelete: "Retain"}, want: OnDeleteRetain},
		"Delete volume, a policy in doubt":                {reclaim: corev1.PersistentVolumeReclaimDelete, configured: OnDeleteArchive, annotations: map[string]string{AnnOnDelete: "delete"}, want: OnDeleteRetain},
		"Retain volume":                                   {reclaim: corev1.PersistentVolumeReclaimRetain, configured: OnDeleteArchive, annotations: map[string]string{AnnOnDelete: "Delete"}, want: OnDeleteRetain},
		"Recycle volume":                                  {reclaim: corev1.PersistentVolumeReclaimRecycle, configured: OnDeleteArchive, want: OnDeleteRetain},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: tc.reclaim}}
			pv.Annotations = tc.annotations
			if diff := cmp.Diff(tc.want, RemovedOnDelete(pv, tc.configured)); diff != "" {
				t.Errorf("RemovedOnDelete() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
