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
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

func TestDirectory(t *testing.T) {
	tests := map[string]struct {
		spec    v1alpha1.VolumeDirectory
		want    backend.Directory
		wantErr error
	}{
		"unset":            {},
		"mode only":        {spec: v1alpha1.VolumeDirectory{Mode: "0750"}, want: backend.Directory{Mode: ptr.To(fs.FileMode(0o750))}},
		"three-digit mode": {spec: v1alpha1.VolumeDirectory{Mode: "700"}, want: backend.Directory{Mode: ptr.To(fs.FileMode(0o700))}},
		"setgid and owner": {
			spec: v1alpha1.VolumeDirectory{Mode: "2770", UID: ptr.To[int64](1000), GID: ptr.To[int64](0)},
			want: backend.Directory{Mode: ptr.To(fs.FileMode(0o770) | fs.ModeSetgid), UID: ptr.To[int64](1000), GID: ptr.To[int64](0)},
		},
		"mode the CRD refuses": {spec: v1alpha1.VolumeDirectory{Mode: "rwx"}, wantErr: backend.ErrInvalidSpec},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := directory(tc.spec)
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("directory (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHostPathDirectoryMode checks that the spec's mode reaches the
// directories the hostPath backend makes.
func TestHostPathDirectoryMode(t *testing.T) {
	root := t.TempDir()
	spec := &v1alpha1.BackendSpec{HostPath: &v1alpha1.HostPathBackend{
		Path:            v1alpha1.AbsolutePath(filepath.Join(root, "vols")),
		NodeName:        "node-a",
		VolumeDirectory: v1alpha1.VolumeDirectory{Mode: "0705"},
	}}
	p, err := buildBackend(t.Context(), nil, BackendRequest{Spec: spec, HostPathRoot: root, NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "data", UID: "uid-1"},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		}},
	}
	pv, _, err := p.Provision(t.Context(), provisioning.ProvisionOptions{PVName: "pvc-uid-1", PVC: claim})
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(pv.Spec.Local.Path)
	if err != nil {
		t.Fatal(err)
	}
	if got := backend.FormatMode(info.Mode()); got != "0705" {
		t.Errorf("mode of the volume directory is %s, want 0705", got)
	}
}
