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
	"slices"
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

// Capability is a part of the contract that a file system may lack for a
// reason outside the implementation under test, such as a test server that
// cannot represent it; a case that needs one is skipped with that reason.
type Capability string

// SpecialModeBits is keeping the setuid, setgid and sticky bits. The NFSv3
// file system sends them, as real servers keep them, but its go-nfs test
// server masks every mode it is asked to set with 0777.
const SpecialModeBits Capability = "setuid, setgid and sticky bits"

// CheckDirectory checks, through a backend, that a volume directory gets the
// mode and owner of its class's parameters over the backend's settings,
// 0777 by default, and that bad parameters are refused; the cases that need
// a capability among lacking are skipped.
func CheckDirectory(t *testing.T, provision ProvisionDir, lacking ...Capability) {
	t.Helper()
	uid, gid := int64(os.Geteuid()), int64(os.Getegid())
	otherGID := gid
	if uid == 0 {
		otherGID = 23456
	}
	tests := directoryCases(uid, gid, otherGID)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.params["uid"] == "0" && uid != 0 {
				t.Skip("only root may give a directory to root")
			}
			if tc.needs != "" && slices.Contains(lacking, tc.needs) {
				t.Skipf("the file system under test lacks %s", tc.needs)
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

// directoryCase is a case of CheckDirectory: a volume directory made with
// config and a class's params has want, or is refused with wantErr.
type directoryCase struct {
	config  backend.Directory
	params  map[string]string
	want    Owned
	wantErr string
	needs   Capability
}

// directoryCases are CheckDirectory's cases for a test run as uid and gid;
// otherGID is a group the test may give a directory to.
func directoryCases(uid, gid, otherGID int64) map[string]directoryCase {
	mode := func(m os.FileMode) *os.FileMode { return &m }
	return map[string]directoryCase{
		"default": {want: Owned{Mode: "0777", UID: uid, GID: gid}},
		"backend settings": {
			config: backend.Directory{Mode: mode(0o750), GID: &otherGID},
			want:   Owned{Mode: "0750", UID: uid, GID: otherGID},
		},
		"class parameters win": {
			config: backend.Directory{Mode: mode(0o750)},
			params: map[string]string{"mode": "0770", "uid": "0", "gid": "0"},
			want:   Owned{Mode: "0770", UID: 0, GID: 0},
		},
		"setgid": {
			params: map[string]string{"mode": "2770"},
			want:   Owned{Mode: "2770", UID: uid, GID: gid},
			needs:  SpecialModeBits,
		},
		"bad mode":  {params: map[string]string{"mode": "u+rwx"}, wantErr: "StorageClass standard: parameter mode"},
		"bad uid":   {params: map[string]string{"uid": "-2"}, wantErr: "StorageClass standard: parameter uid"},
		"bad gid":   {params: map[string]string{"gid": "staff"}, wantErr: "StorageClass standard: parameter gid"},
		"typo name": {params: map[string]string{"owner": "0"}, wantErr: `unknown parameter "owner" (known: pathPattern, onDelete, archiveOnDelete, nodePath, nodeAffinityKey, mode, uid, gid, userPattern, groupPattern, permPattern)`},
	}
}
