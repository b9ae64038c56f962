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

package backend

import (
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestParseMode(t *testing.T) {
	tests := map[string]struct {
		in         string
		want       fs.FileMode
		wantFormat string
		wantErr    bool
	}{
		"four digits":     {in: "0750", want: 0o750, wantFormat: "0750"},
		"three digits":    {in: "750", want: 0o750, wantFormat: "0750"},
		"setgid":          {in: "2770", want: 0o770 | fs.ModeSetgid, wantFormat: "2770"},
		"all special":     {in: "7777", want: 0o777 | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky, wantFormat: "7777"},
		"sticky":          {in: "1777", want: 0o777 | fs.ModeSticky, wantFormat: "1777"},
		"not octal":       {in: "0778", wantErr: true},
		"five digits":     {in: "00777", wantErr: true},
		"two digits":      {in: "77", wantErr: true},
		"signed":          {in: "+777", wantErr: true},
		"symbolic":        {in: "u=rwx", wantErr: true},
		"empty":           {in: "", wantErr: true},
		"with whitespace": {in: " 777", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseMode(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseMode(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseMode(%q) (-want +got):\n%s", tc.in, diff)
			}
			if err == nil {
				if diff := cmp.Diff(tc.wantFormat, FormatMode(got)); diff != "" {
					t.Errorf("FormatMode (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestParseID(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    int64
		wantErr bool
	}{
		"root":          {in: "0", want: 0},
		"user":          {in: "1000", want: 1000},
		"largest":       {in: "2147483647", want: MaxID},
		"too large":     {in: "2147483648", wantErr: true},
		"chown's -1":    {in: "-1", wantErr: true},
		"a name":        {in: "nobody", wantErr: true},
		"empty":         {in: "", wantErr: true},
		"hex":           {in: "0x10", wantErr: true},
		"leading space": {in: " 1", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseID(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseID(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseID(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestDirectoryOr(t *testing.T) {
	backendSettings := Directory{Mode: ptr.To(fs.FileMode(0o750)), UID: ptr.To[int64](1000), GID: ptr.To[int64](1000)}
	tests := map[string]struct {
		class Directory
		want  Directory
	}{
		"class sets nothing": {want: backendSettings},
		"class mode wins, owner stays": {
			class: Directory{Mode: ptr.To(fs.FileMode(0o700))},
			want:  Directory{Mode: ptr.To(fs.FileMode(0o700)), UID: ptr.To[int64](1000), GID: ptr.To[int64](1000)},
		},
		"class root group wins": {
			class: Directory{GID: ptr.To[int64](0)},
			want:  Directory{Mode: ptr.To(fs.FileMode(0o750)), UID: ptr.To[int64](1000), GID: ptr.To[int64](0)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.class.Or(backendSettings)); diff != "" {
				t.Errorf("Or (-want +got):\n%s", diff)
			}
		})
	}
}

// The setuid, setgid and sticky bits travel as chmod(2) and NFSv3 write
// them, and come back as fs.FileMode keeps them.
func TestUnixMode(t *testing.T) {
	tests := map[string]struct {
		mode fs.FileMode
		unix uint32
	}{
		"permissions":    {mode: 0o750, unix: 0o750},
		"setgid":         {mode: 0o770 | fs.ModeSetgid, unix: 0o2770},
		"sticky":         {mode: 0o777 | fs.ModeSticky, unix: 0o1777},
		"setuid":         {mode: 0o755 | fs.ModeSetuid, unix: 0o4755},
		"all three":      {mode: 0o700 | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky, unix: 0o7700},
		"no permissions": {mode: 0, unix: 0},
		"type bits drop": {mode: fs.ModeDir | 0o755, unix: 0o755},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.unix, UnixMode(tc.mode)); diff != "" {
				t.Errorf("UnixMode (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.mode&^fs.ModeType, FileModeOf(tc.unix)); diff != "" {
				t.Errorf("FileModeOf (-want +got):\n%s", diff)
			}
		})
	}
}
