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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

func TestParseRequest(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	tests := map[string]struct {
		mutate        func(*provisioning.ProvisionOptions)
		wantDir       string
		wantErr       string
		wantDirectory backend.Directory
	}{
		"plain claim": {wantDir: "pvc-team-data"},
		"class pattern": {mutate: func(o *provisioning.ProvisionOptions) {
			o.StorageClass = backendtest.Class(map[string]string{"pathPattern": nsPattern})
		}, wantDir: "team/data"},
		"no class":   {mutate: func(o *provisioning.ProvisionOptions) { o.StorageClass = nil }, wantDir: "pvc-team-data"},
		"no claim":   {mutate: func(o *provisioning.ProvisionOptions) { o.PVC = nil }, wantErr: "no claim"},
		"block":      {mutate: func(o *provisioning.ProvisionOptions) { o.PVC.Spec.VolumeMode = &block }, wantErr: "block volumes are not supported"},
		"no request": {mutate: func(o *provisioning.ProvisionOptions) { o.PVC.Spec.Resources.Requests = nil }, wantErr: "no positive storage request"},
		"unknown parameter": {
			mutate: func(o *provisioning.ProvisionOptions) {
				o.StorageClass = backendtest.Class(map[string]string{"volumeType": "local"})
			},
			wantErr: `unknown parameter "volumeType"`,
		},
		"bad class pattern": {
			mutate: func(o *provisioning.ProvisionOptions) {
				o.StorageClass = backendtest.Class(map[string]string{"pathPattern": "{{printf `x`}}"})
			},
			wantErr: "StorageClass standard: parameter pathPattern: path pattern",
		},
		"class mode and owner": {
			mutate: func(o *provisioning.ProvisionOptions) {
				o.StorageClass = backendtest.Class(map[string]string{"mode": "2770", "uid": "1000", "gid": "0"})
			},
			wantDir:       "pvc-team-data",
			wantDirectory: backend.Directory{Mode: ptr(fs.FileMode(0o770) | fs.ModeSetgid), UID: ptr(int64(1000)), GID: ptr(int64(0))},
		},
		"class mode of three digits": {
			mutate: func(o *provisioning.ProvisionOptions) {
				o.StorageClass = backendtest.Class(map[string]string{"mode": "750"})
			},
			wantDir:       "pvc-team-data",
			wantDirectory: backend.Directory{Mode: ptr(fs.FileMode(0o750))},
		},
		"mode not octal": {
			mutate: func(o *provisioning.ProvisionOptions) {
				o.StorageClass = backendtest.Class(map[string]string{"mode": "0778"})
			},
			wantErr: `StorageClass standard: parameter mode: mode "0778" is not an octal mode`,
		},
		"mode too long": {
			mutate: func(o *provisioning.ProvisionOptions) {
				o.StorageClass = backendtest.Class(map[string]string{"mode": "00777"})
			},
			wantErr: "parameter mode: mode \"00777\" is not an octal mode of three or four digits",
		},
		"mode as a symbol": {
			mutate: func(o *provisioning.ProvisionOptions) {
				o.StorageClass = backendtest.Class(map[string]string{"mode": "rwx"})
			},
			wantErr: "parameter mode",
		},
		"negative uid": {
			mutate: func(o *provisioning.ProvisionOptions) {
				o.StorageClass = backendtest.Class(map[string]string{"uid": "-1"})
			},
			wantErr: `StorageClass standard: parameter uid: "-1" is not a number from 0 to 2147483647`,
		},
		"gid too large": {
			mutate: func(o *provisioning.ProvisionOptions) {
				o.StorageClass = backendtest.Class(map[string]string{"gid": "4294967295"})
			},
			wantErr: "parameter gid",
		},
		"uid not a number": {
			mutate: func(o *provisioning.ProvisionOptions) {
				o.StorageClass = backendtest.Class(map[string]string{"uid": "nobody"})
			},
			wantErr: "parameter uid",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts := backendtest.Options(backendtest.Claim("team", "data", "2Gi"), backendtest.Class(nil))
			if tc.mutate != nil {
				tc.mutate(&opts)
			}
			req, err := ParseRequest(opts)
			checkErr(t, err, tc.wantErr)
			if err != nil {
				return
			}
			pattern := req.Pattern
			if pattern == nil {
				pattern, _ = ParsePattern("")
			}
			dir, err := pattern.Render(req.PVName, req.Claim)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantDir, dir); diff != "" {
				t.Errorf("directory mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDirectory, req.Directory); diff != "" {
				t.Errorf("directory settings mismatch (-want +got):\n%s", diff)
			}
			if got := req.Size.String(); got != "2Gi" {
				t.Errorf("Size = %s, want 2Gi", got)
			}
		})
	}
}

func TestNewPV(t *testing.T) {
	retain := corev1.PersistentVolumeReclaimRetain
	filesystem := corev1.PersistentVolumeFilesystem
	source := corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/vols/x"}}
	tests := map[string]struct {
		class       bool
		wantReclaim corev1.PersistentVolumeReclaimPolicy
		wantClass   string
	}{
		"class reclaim policy": {class: true, wantReclaim: retain, wantClass: "standard"},
		"no class":             {wantReclaim: corev1.PersistentVolumeReclaimDelete},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := backendtest.Claim("team", "data", "2Gi")
			claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			opts := backendtest.Options(claim, nil)
			if tc.class {
				opts.StorageClass = backendtest.Class(nil)
				opts.StorageClass.ReclaimPolicy = &retain
			}
			req := Request{PVName: opts.PVName, Claim: claim, Size: resource.MustParse("2Gi")}
			want := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pvc-team-data"},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
					PersistentVolumeReclaimPolicy: tc.wantReclaim,
					StorageClassName:              tc.wantClass,
					VolumeMode:                    &filesystem,
					PersistentVolumeSource:        source,
				},
			}
			if diff := cmp.Diff(want, NewPV(opts, req, source)); diff != "" {
				t.Errorf("NewPV() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
