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
	"strings"
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

func TestMountOptionPort(t *testing.T) {
	tests := map[string]struct {
		options []string
		name    string
		want    int
		wantErr string
	}{
		"none":                   {options: []string{"nfsvers=3", "hard"}, name: "port"},
		"an option of its own":   {options: []string{"nfsvers=3", "port=2050"}, name: "port", want: 2050},
		"in a list":              {options: []string{"nfsvers=3, port=2050,hard"}, name: "port", want: 2050},
		"the last wins":          {options: []string{"port=2050", "hard,port=2051"}, name: "port", want: 2051},
		"mountport is not port":  {options: []string{"mountport=2050"}, name: "port"},
		"port is not mountport":  {options: []string{"port=2050"}, name: "mountport"},
		"mountport":              {options: []string{"port=2050,mountport=2051"}, name: "mountport", want: 2051},
		"not a number":           {options: []string{"port=nfs"}, name: "port", wantErr: "port=nfs is not a port"},
		"beyond the last port":   {options: []string{"port=65536"}, name: "port", wantErr: "not a port"},
		"a negative port":        {options: []string{"port=-1"}, name: "port", wantErr: "not a port"},
		"zero, the portmapper's": {options: []string{"port=0"}, name: "port"},
		"a longer name's prefix": {options: []string{"xport=1"}, name: "port"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := MountOptionPort(tc.options, tc.name)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("MountOptionPort(%q, %q) = %d, want %d", tc.options, tc.name, got, tc.want)
			}
		})
	}
}

func TestNFSServer(t *testing.T) {
	tests := []struct {
		host string
		port int
		want string
	}{
		{"nfs.example.com", 0, "nfs.example.com"},
		{"nfs.example.com", DefaultNFSPort, "nfs.example.com"},
		{"nfs.example.com", 2050, "nfs.example.com,port=2050"},
		{"fd00::1", 2050, "fd00::1,port=2050"},
	}
	for _, tc := range tests {
		if got := NFSServer(tc.host, tc.port); got != tc.want {
			t.Errorf("NFSServer(%q, %d) = %q, want %q", tc.host, tc.port, got, tc.want)
		}
	}
}
