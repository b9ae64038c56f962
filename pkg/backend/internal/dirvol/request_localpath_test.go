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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
)

// TestApplyLocalPathPatterns: local-path-provisioner's userPattern,
// groupPattern and permPattern, a class parameter over the class annotation
// of the same name, rendered for the claim with missing keys an error and
// surrounding space trimmed, set the directory's owner and mode where the
// backend applies them, as BusyBox's chown and chmod in its setup script
// do; what cannot be applied refuses the claim naming the pattern.
func TestApplyLocalPathPatterns(t *testing.T) {
	both := LocalPathPatterns{Owner: true, Mode: true}
	tests := map[string]struct {
		params, annotations map[string]string
		applied             LocalPathPatterns
		want                backend.Directory
		wantErr             string
	}{
		"numbers from the claim": {
			params:  map[string]string{"userPattern": "{{.PVC.Annotations.uid}}", "groupPattern": "{{index .PVC.Labels `gid`}}", "permPattern": "0750"},
			applied: both,
			want:    backend.Directory{UID: ptr(int64(1000)), GID: ptr(int64(2000)), Mode: ptr(fs.FileMode(0o750))},
		},
		"space around a value is trimmed": {
			params:  map[string]string{"userPattern": " 1000\n", "groupPattern": "\t2000 ", "permPattern": " 2770 "},
			applied: both,
			want:    backend.Directory{UID: ptr(int64(1000)), GID: ptr(int64(2000)), Mode: ptr(fs.FileMode(0o770) | fs.ModeSetgid)},
		},
		"annotations where no parameter is set": {
			annotations: map[string]string{"userPattern": "1001", "groupPattern": "2001", "permPattern": "700"},
			applied:     both,
			want:        backend.Directory{UID: ptr(int64(1001)), GID: ptr(int64(2001)), Mode: ptr(fs.FileMode(0o700))},
		},
		"a parameter over its annotation": {
			params:      map[string]string{"userPattern": "1000", "permPattern": "0750"},
			annotations: map[string]string{"userPattern": "name", "groupPattern": "2001", "permPattern": "u+rwx"},
			applied:     both,
			want:        backend.Directory{UID: ptr(int64(1000)), GID: ptr(int64(2001)), Mode: ptr(fs.FileMode(0o750))},
		},
		"an empty parameter over its annotation": {
			params:      map[string]string{"permPattern": ""},
			annotations: map[string]string{"permPattern": "0700"},
			applied:     LocalPathPatterns{Mode: true},
		},
		"a user without a group gives the group of its number": {
			params:  map[string]string{"userPattern": "1000"},
			applied: LocalPathPatterns{Owner: true},
			want:    backend.Directory{UID: ptr(int64(1000)), GID: ptr(int64(1000))},
		},
		"a group rendered empty, as chown 1000: does": {
			params:  map[string]string{"userPattern": "1000", "groupPattern": "{{index .PVC.Annotations `none`}}"},
			applied: LocalPathPatterns{Owner: true},
			want:    backend.Directory{UID: ptr(int64(1000)), GID: ptr(int64(1000))},
		},
		"a group without a user": {
			params:  map[string]string{"groupPattern": "2000"},
			applied: LocalPathPatterns{Owner: true},
			want:    backend.Directory{GID: ptr(int64(2000))},
		},
		"neither user nor group, which chown \":\" refuses": {
			params:  map[string]string{"userPattern": " ", "groupPattern": ""},
			applied: LocalPathPatterns{Owner: true},
			wantErr: `chown ":"`,
		},
		"no owner pattern at all": {
			applied: LocalPathPatterns{Owner: true},
			wantErr: "userPattern and groupPattern render nothing",
		},
		"a perm rendered empty changes nothing, as chmod \"\" does": {
			params:  map[string]string{"permPattern": "{{index .PVC.Annotations `none`}}"},
			applied: LocalPathPatterns{Mode: true},
		},
		"patterns not applied are ignored": {
			params: map[string]string{"userPattern": "{{.PVC.Annotations.none}}", "groupPattern": "staff", "permPattern": "u+rwx"},
		},
		"owner applied, mode not": {
			params:  map[string]string{"userPattern": "1000", "permPattern": "0700"},
			applied: LocalPathPatterns{Owner: true},
			want:    backend.Directory{UID: ptr(int64(1000)), GID: ptr(int64(1000))},
		},
		"a missing key": {
			params:  map[string]string{"userPattern": "{{.PVC.Annotations.none}}"},
			applied: both,
			wantErr: `StorageClass standard: cannot render userPattern for this claim`,
		},
		"a field the claim data lacks": {
			params:  map[string]string{"permPattern": "{{.PVC.UID}}"},
			applied: LocalPathPatterns{Mode: true},
			wantErr: "cannot render permPattern",
		},
		"a user name": {
			params:  map[string]string{"userPattern": "{{.PVC.Name}}"},
			applied: both,
			wantErr: `userPattern renders "data", a name: only numeric ids`,
		},
		"a group name": {
			params:  map[string]string{"userPattern": "1000", "groupPattern": "staff"},
			applied: both,
			wantErr: `groupPattern renders "staff", a name`,
		},
		"a negative uid": {
			params:  map[string]string{"userPattern": "-1"},
			applied: both,
			wantErr: `userPattern renders "-1": "-1" is not a number from 0 to 2147483647`,
		},
		"a uid too large": {
			params:  map[string]string{"userPattern": "2147483648"},
			applied: both,
			wantErr: "is not a number from 0 to 2147483647",
		},
		"a symbolic mode": {
			params:  map[string]string{"userPattern": "1000", "permPattern": "u+rwx"},
			applied: both,
			wantErr: `permPattern renders "u+rwx"`,
		},
		"a mode of one digit": {
			params:  map[string]string{"permPattern": "7"},
			applied: LocalPathPatterns{Mode: true},
			wantErr: "three or four digits",
		},
		"a pattern that does not parse": {
			params:  map[string]string{"permPattern": "{{.PVC.Name"},
			applied: LocalPathPatterns{Mode: true},
			wantErr: "cannot parse permPattern",
		},
		"an unbounded function": {
			params:  map[string]string{"permPattern": "{{printf `%0999d` 7}}"},
			applied: LocalPathPatterns{Mode: true},
			wantErr: `function "printf" is not allowed`,
		},
		"a value too long": {
			params:  map[string]string{"permPattern": "{{.PVC.Annotations.long}}"},
			applied: LocalPathPatterns{Mode: true},
			wantErr: "longer than 64 bytes",
		},
		"both mode and permPattern": {
			params:  map[string]string{"mode": "0700", "permPattern": "0750"},
			applied: LocalPathPatterns{Mode: true},
			wantErr: "parameters mode and permPattern both set the mode",
		},
		"both uid and userPattern": {
			params:  map[string]string{"gid": "10", "userPattern": "1000"},
			applied: LocalPathPatterns{Owner: true},
			wantErr: "both set the owner",
		},
		"mode with permPattern not applied": {
			params: map[string]string{"mode": "0700", "permPattern": "0750"},
			want:   backend.Directory{Mode: ptr(fs.FileMode(0o700))},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := backendtest.Claim("team", "data", "1Gi")
			claim.Annotations = map[string]string{"uid": "1000", "long": strings.Repeat("7", 65)}
			claim.Labels = map[string]string{"gid": "2000"}
			class := backendtest.Class(tc.params)
			class.Annotations = tc.annotations
			req, err := ParseRequest(backendtest.Options(claim, class))
			if err != nil {
				t.Fatalf("ParseRequest() error = %v", err)
			}
			err = req.ApplyLocalPathPatterns(class, tc.applied)
			checkErr(t, err, tc.wantErr)
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, req.Directory); diff != "" {
				t.Errorf("directory (-want +got):\n%s", diff)
			}
		})
	}
}
