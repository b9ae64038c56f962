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
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
)

// TestDeleteUnmarked: Delete passes the PersistentVolume's opt-in to the
// store, so a directory without an owner marker goes only when it is set.
func TestDeleteUnmarked(t *testing.T) {
	tests := map[string]struct {
		annotations map[string]string
		wantErr     string
		wantKept    bool
	}{
		"refused":  {wantErr: "no owner marker", wantKept: true},
		"opted in": {annotations: map[string]string{dirvol.AnnDeleteUnmarked: "true"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, root := layout(t)
			path := filepath.Join(root, "vols")
			p, err := New(Config{Path: path, HostPathRoot: root, DefaultNodeName: "node-a"}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			backendtest.WriteFile(t, filepath.Join(path, "made-by-hand", "data"), "x")
			pv := &v1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pv-by-hand", Annotations: tc.annotations},
				Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{
					Local: &v1.LocalVolumeSource{Path: filepath.Join(path, "made-by-hand")},
				}},
			}
			err = p.Delete(t.Context(), pv)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Delete() error = %v, want %q", err, tc.wantErr)
			}
			_, err = os.Stat(filepath.Join(path, "made-by-hand", "data"))
			if kept := err == nil; kept != tc.wantKept {
				t.Errorf("data kept: %v, want %v", kept, tc.wantKept)
			}
		})
	}
}
