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

package harness

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCheckExport compares the volume directories on an export's folder
// with the PVs: markers, the store's hidden folders and files are not
// volumes, and a system without an export is not checked.
func TestCheckExport(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"pvc-a", "pvc-b", ".provfleet-unsaved"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{".pvc-a.provfleet-volume", "pvc-file"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nfs := &nfsSystem{dir: dir}
	tests := map[string]struct {
		sys     system
		want    []string
		wantErr string
	}{
		"the PVs' directories": {sys: nfs, want: []string{"pvc-b", "pvc-a"}},
		"one unexpected":       {sys: nfs, want: []string{"pvc-a"}, wantErr: "the NFS export's volume directories are not the PVs': 0 missing [], 1 unexpected [pvc-b]"},
		"one missing":          {sys: nfs, want: []string{"pvc-a", "pvc-b", "pvc-file"}, wantErr: "the NFS export's volume directories are not the PVs': 1 missing [pvc-file], 0 unexpected []"},
		"deleted":              {sys: nfs, wantErr: "the NFS export's volume directories are not the PVs': 0 missing [], 2 unexpected [pvc-a pvc-b]"},
		"no export":            {sys: &upstreamSystem{}, want: []string{"pvc-x"}},
		"a folder that is gone": {
			sys:     &nfsSystem{dir: filepath.Join(dir, "gone")},
			wantErr: "cannot list the NFS export's folder: open " + filepath.Join(dir, "gone") + ": no such file or directory",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got string
			if err := checkExport(tc.sys, tc.want); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}
