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
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/provfleet/provfleet/pkg/backend"
)

// ProvisionDir provisions a claim of a class with parameters through a
// backend configured with dir, and returns the volume directory on the host.
type ProvisionDir func(t *testing.T, dir backend.Directory, parameters map[string]string) (string, error)

// Owned is a directory's mode, as backend.FormatMode writes it, and owner.
type Owned struct {
	Mode     string
	UID, GID int64
}

// OwnedOf returns the mode and owner of the directory path on the host.
func OwnedOf(t testing.TB, path string) Owned {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatalf("no owner in %T", info.Sys())
	}
	return Owned{Mode: backend.FormatMode(info.Mode()), UID: int64(st.Uid), GID: int64(st.Gid)}
}

// CheckDirectory checks, through a backend, that a volume directory gets the
// mode and owner of its class's parameters over the backend's settings,
// 0777 by default, and that bad parameters are refused.
func CheckDirectory(t *testing.T, provision ProvisionDir) {
	uid, gid := int64(os.Geteuid()), int64(os.Getegid())
	otherGID := gid
	if uid == 0 {
		otherGID = 23456
	}
	mode := func(m os.FileMode) *os.FileMode { return &m }
	tests := map[string]struct {
		config  backend.Directory
		params  map[string]string
		want    Owned
		wantErr string
	}{
		"default": {want: Owned{Mode: "0777", UID: uid, GID: gid}},
		"backend settings": {
			config: backend.Directory{Mode: mode(0o750), GID: &otherGID},
			want:   Owned{Mode: "0750", UID: uid, GID: otherGID},
		},
		"class parameters win": {
			config: backend.Directory{Mode: mode(0o750)},
			params: map[string]string{"mode": "2770", "uid": "0", "gid": "0"},
			want:   Owned{Mode: "2770", UID: 0, GID: 0},
		},
		"bad mode":  {params: map[string]string{"mode": "u+rwx"}, wantErr: "StorageClass standard: parameter mode"},
		"bad uid":   {params: map[string]string{"uid": "-2"}, wantErr: "StorageClass standard: parameter uid"},
		"bad gid":   {params: map[string]string{"gid": "staff"}, wantErr: "StorageClass standard: parameter gid"},
		"typo name": {params: map[string]string{"owner": "0"}, wantErr: `unknown parameter "owner" (known: pathPattern, mode, uid, gid)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.params["uid"] == "0" && uid != 0 {
				t.Skip("only root may give a directory to root")
			}
			dir, err := provision(t, tc.config, tc.params)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, OwnedOf(t, dir)); diff != "" {
				t.Errorf("volume directory (-want +got):\n%s", diff)
			}
		})
	}
}
