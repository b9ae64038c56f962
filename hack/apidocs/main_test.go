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

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	crd := filepath.Join(dir, "widgets.yaml")
	if err := os.WriteFile(crd, []byte("---\n"+widget), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		files   []string
		wantErr string
	}{
		"a CRD":          {files: []string{crd}},
		"no CRD":         {wantErr: "no CRD files given"},
		"a missing file": {files: []string{filepath.Join(dir, "none.yaml")}, wantErr: "cannot read a CRD"},
		"not a CRD":      {files: []string{filepath.Join(dir, "api.md")}, wantErr: "cannot decode the CRD"},
	}
	if err := os.WriteFile(filepath.Join(dir, "api.md"), []byte("- a\nb: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "api.md")
			err := run(out, tc.files)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(string(got), widgetDoc) {
				t.Errorf("%s does not end with the reference of the CRD:\n%s", out, got)
			}
		})
	}
}
