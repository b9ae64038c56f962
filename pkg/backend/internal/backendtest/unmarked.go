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

package backendtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// UnmarkedVolume is a backend and a directory of its base that it did not
// make: dir is where the test finds the directory, source is how a
// PersistentVolume made by hand names it, with mountOptions (an NFS server's
// port).
type UnmarkedVolume struct {
	Backend      provisioning.Provisioner
	Dir          string
	Source       corev1.PersistentVolumeSource
	MountOptions []string
}

// CheckDeleteUnmarked checks that a backend's Delete passes the
// PersistentVolume's opt-in to the store: a directory without an owner marker
// goes only when the PersistentVolume asks for it with the annotations optIn.
// setup makes a fresh backend for each case.
func CheckDeleteUnmarked(t *testing.T, optIn map[string]string, setup func(t *testing.T) (UnmarkedVolume, error)) {
	t.Helper()
	tests := map[string]struct {
		annotations map[string]string
		wantErr     string
		wantKept    bool
	}{
		"refused":  {wantErr: "no owner marker", wantKept: true},
		"opted in": {annotations: optIn},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			u, err := setup(t)
			if err != nil {
				t.Fatal(err)
			}
			WriteFile(t, filepath.Join(u.Dir, "data"), "x")
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pv-by-hand", Annotations: tc.annotations},
				Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: u.Source, MountOptions: u.MountOptions},
			}
			err = u.Backend.Delete(t.Context(), pv)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Delete() error = %v, want %q", err, tc.wantErr)
			}
			_, err = os.Stat(filepath.Join(u.Dir, "data"))
			if kept := err == nil; kept != tc.wantKept {
				t.Errorf("data kept: %v, want %v", kept, tc.wantKept)
			}
		})
	}
}
