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

package nfs

import (
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

const subdirName = "cluster.local/nfs-subdir-external-provisioner"

var subdirV403 = &backend.NFSSubdir{ProvisionerName: subdirName, Version: backend.NFSSubdirVersion{Major: 4, Patch: 3}}

// TestNFSSubdirOldVolume records on a volume nfs-subdir-external-provisioner
// made the fate its class gives it, then releases its directory by that
// record alone, with the class gone.
func TestNFSSubdirOldVolume(t *testing.T) {
	tests := map[string]struct {
		params     map[string]string
		dir        string
		noClass    bool
		wantRecord map[string]string
		wantErr    string
		wantLeft   []string
	}{
		"archive by default": {
			dir:        "team-data-pvc-old",
			wantRecord: map[string]string{backend.AnnOnDelete: "ArchiveAsNFSSubdir", backend.AnnDeleteUnmarked: "true"},
			wantLeft:   []string{"archived-team-data-pvc-old/", "archived-team-data-pvc-old/data"},
		},
		"onDelete Delete archives": {
			params: map[string]string{"onDelete": "Delete"}, dir: "team/data",
			wantRecord: map[string]string{backend.AnnOnDelete: "ArchiveAsNFSSubdir", backend.AnnDeleteUnmarked: "true"},
			wantLeft:   []string{"archived-data/", "archived-data/data"},
		},
		"onDelete delete": {
			params: map[string]string{"onDelete": "delete"}, dir: "team-data-pvc-old",
			wantRecord: map[string]string{backend.AnnOnDelete: "Delete", backend.AnnDeleteUnmarked: "true"},
		},
		"onDelete retain": {
			params: map[string]string{"onDelete": "retain", "archiveOnDelete": "false"}, dir: "team-data-pvc-old",
			wantRecord: map[string]string{backend.AnnOnDelete: "Retain", backend.AnnDeleteUnmarked: "true"},
			wantLeft:   []string{"team-data-pvc-old/", "team-data-pvc-old/data"},
		},
		"archiveOnDelete no boolean: nothing recorded, kept": {
			params: map[string]string{"archiveOnDelete": "yes"}, dir: "team-data-pvc-old",
			wantErr:  "the fate of its directory is not recorded",
			wantLeft: []string{"team-data-pvc-old/", "team-data-pvc-old/data"},
		},
		"class gone: nothing recorded, kept": {
			noClass: true, dir: "team-data-pvc-old",
			wantErr:  "the fate of its directory is not recorded",
			wantLeft: []string{"team-data-pvc-old/", "team-data-pvc-old/data"},
		},
	}
	for name, tc := range tests {
		for reachName, r := range reaches {
			t.Run(name+"/"+reachName, func(t *testing.T) {
				p, export := newProvisioner(t, r, Config{Path: "/export", NFSSubdir: subdirV403}, Options{})
				backendtest.WriteFile(t, filepath.Join(export, tc.dir, "data"), "the old provisioner's data")
				pv := &corev1.PersistentVolume{
					ObjectMeta: metav1.ObjectMeta{Name: "pvc-old", Annotations: map[string]string{provisioning.AnnDynamicallyProvisioned: subdirName}},
					Spec: corev1.PersistentVolumeSpec{
						StorageClassName:       "old",
						PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: p.server, Path: path.Join("/export", tc.dir)}},
						MountOptions:           portOptions(Config{Port: p.port}),
					},
				}
				var class *storagev1.StorageClass
				if !tc.noClass {
					class = &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "old"}, Provisioner: subdirName, Parameters: tc.params}
				}
				record, _ := p.Record(t.Context(), pv, class)
				if diff := cmp.Diff(tc.wantRecord, record); diff != "" {
					t.Errorf("Record() mismatch (-want +got):\n%s", diff)
				}
				for key, value := range record {
					pv.Annotations[key] = value
				}
				if again, _ := p.Record(t.Context(), pv, nil); again != nil {
					t.Errorf("Record() of a recorded volume = %v, want nothing", again)
				}
				err := p.Delete(t.Context(), pv)
				gotErr := ""
				if err != nil {
					gotErr = err.Error()
				}
				if (tc.wantErr == "") != (gotErr == "") || !strings.Contains(gotErr, tc.wantErr) {
					t.Errorf("Delete() error = %q, want one containing %q", gotErr, tc.wantErr)
				}
				if diff := cmp.Diff(tc.wantLeft, volumes(t, export), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("export after Delete (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestNFSSubdirNewClaim provisions claims of a class of the
// nfs-subdir-external-provisioner taken over as it would, and records the
// fate it would give them; a class of another provisioner is read as ours.
func TestNFSSubdirNewClaim(t *testing.T) {
	tests := map[string]struct {
		provisioner string
		params      map[string]string
		wantPath    string
		wantRecord  string
		wantErr     string
	}{
		"onDelete Delete archives":      {provisioner: subdirName, params: map[string]string{"onDelete": "Delete"}, wantPath: "/export/team-data-pvc-team-data", wantRecord: "ArchiveAsNFSSubdir"},
		"onDelete delete deletes":       {provisioner: subdirName, params: map[string]string{"onDelete": "delete"}, wantPath: "/export/team-data-pvc-team-data", wantRecord: "Delete"},
		"pathPattern, no parameters":    {provisioner: subdirName, params: map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.name}"}, wantPath: "/export/team/data", wantRecord: "ArchiveAsNFSSubdir"},
		"archiveOnDelete no boolean":    {provisioner: subdirName, params: map[string]string{"archiveOnDelete": "maybe"}, wantErr: "parameter archiveOnDelete"},
		"our class: onDelete Delete":    {provisioner: "provfleet.io/nfs", params: map[string]string{"onDelete": "Delete"}, wantPath: "/export/pvc-team-data", wantRecord: "Delete"},
		"our class: nfs-subdir's style": {provisioner: "provfleet.io/nfs", params: map[string]string{"archiveOnDelete": "true"}, wantPath: "/export/team-data-pvc-team-data", wantRecord: "Archive"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, _ := newProvisioner(t, reaches["mounted"], Config{Path: "/export", NFSSubdir: subdirV403}, Options{})
			class := backendtest.Class(tc.params)
			class.Provisioner = tc.provisioner
			pv, _, err := p.Provision(t.Context(), backendtest.Options(backendtest.Claim("team", "data", "1Gi"), class))
			var got [2]string
			if err == nil {
				got = [2]string{pv.Spec.NFS.Path, pv.Annotations[backend.AnnOnDelete]}
			} else if tc.wantErr == "" || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Provision() error = %v, want one containing %q", err, tc.wantErr)
			}
			if diff := cmp.Diff([2]string{tc.wantPath, tc.wantRecord}, got); diff != "" {
				t.Errorf("path and recorded fate (-want +got):\n%s", diff)
			}
		})
	}
}

// volumes lists the export's tree without the volume records.
func volumes(t *testing.T, export string) []string {
	t.Helper()
	return slices.DeleteFunc(backendtest.Tree(t, export), func(entry string) bool {
		return strings.HasPrefix(entry, dirvol.JournalDir+"/") || entry == dirvol.JournalDir+"/"
	})
}
