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
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
)

func ptr[T any](v T) *T { return &v }

func TestCreateModeAndOwner(t *testing.T) {
	// A umask that would strip group and other bits from Mkdir's mode.
	defer syscall.Umask(syscall.Umask(0o077))
	uid, gid := int64(os.Geteuid()), int64(os.Getegid())
	otherUID, otherGID := uid, gid
	if uid == 0 {
		otherUID, otherGID = 12345, 23456
	}
	tests := map[string]struct {
		config, class backend.Directory
		want          backendtest.Owned
	}{
		"default: 0777, owner unchanged": {want: backendtest.Owned{Mode: "0777", UID: uid, GID: gid}},
		"backend mode":                   {config: backend.Directory{Mode: ptr(fs.FileMode(0o750))}, want: backendtest.Owned{Mode: "0750", UID: uid, GID: gid}},
		"class mode over backend mode": {
			config: backend.Directory{Mode: ptr(fs.FileMode(0o750))},
			class:  backend.Directory{Mode: ptr(fs.FileMode(0o700))},
			want:   backendtest.Owned{Mode: "0700", UID: uid, GID: gid},
		},
		"setgid and sticky bits": {class: backend.Directory{Mode: ptr(fs.FileMode(0o770) | fs.ModeSetgid | fs.ModeSticky)}, want: backendtest.Owned{Mode: "3770", UID: uid, GID: gid}},
		"backend owner, class mode": {
			config: backend.Directory{UID: &otherUID, GID: &otherGID},
			class:  backend.Directory{Mode: ptr(fs.FileMode(0o770))},
			want:   backendtest.Owned{Mode: "0770", UID: otherUID, GID: otherGID},
		},
		"class group only keeps the user": {
			config: backend.Directory{Mode: ptr(fs.FileMode(0o770) | fs.ModeSetgid)},
			class:  backend.Directory{GID: &otherGID},
			want:   backendtest.Owned{Mode: "2770", UID: uid, GID: otherGID},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Directory = tc.config })
			req := request(t, "team", "data", "1Gi", "")
			req.Directory = tc.class
			dir, err := dirOf(f.store.Create(t.Context(), req))
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if diff := cmp.Diff(tc.want, backendtest.OwnedOf(t, filepath.Join(f.base, dir))); diff != "" {
				t.Errorf("volume directory (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCreateOwnerRefused checks that a chown the file system refuses fails
// the volume with what to do, and leaves no directory, marker, record or
// parent folder behind. Not as root, the host refuses a chown to root;
// as root, the file system refuses every chown, as an NFS server squashing
// root does.
func TestCreateOwnerRefused(t *testing.T) {
	var fsys Filesystem = LocalFS{}
	if os.Geteuid() == 0 {
		fsys = squashedFS{}
	}
	root := int64(0)
	f := newFixture(t, func(c *Config) {
		c.FS = fsys
		c.Directory = backend.Directory{UID: &root}
	})
	before := f.outside(t)
	req := request(t, "team", "data", "1Gi", nsPattern)
	_, err := f.store.Create(t.Context(), req)
	if !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("Create: %v, want an error wrapping fs.ErrPermission", err)
	}
	for _, want := range []string{`cannot create directory "team/data"`, "uid 0, gid -1", "no_root_squash", "the directory was removed again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if diff := cmp.Diff([]string{JournalDir + "/"}, backendtest.Tree(t, f.base)); diff != "" {
		t.Errorf("tree after a refused chown (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, f.outside(t)); diff != "" {
		t.Errorf("files outside the base changed (-before +after):\n%s", diff)
	}
	// The refused volume holds no capacity and no path: another takes it.
	f.store.cfg.Directory = backend.Directory{}
	other := request(t, "team", "data", "1Gi", nsPattern)
	other.PVName = "pvc-other"
	if _, err := f.store.Create(t.Context(), other); err != nil {
		t.Errorf("Create of another volume at the same path: %v", err)
	}
}

// squashedFS is the host's file system refusing every chown, as an NFS
// export with root_squash refuses root's.
type squashedFS struct{}

func (squashedFS) OpenBase(ctx context.Context, root, base string) (Dir, error) {
	d, err := LocalFS{}.OpenBase(ctx, root, base)
	if err != nil {
		return nil, err
	}
	return squashedDir{d}, nil
}

type squashedDir struct {
	Dir
}

func (d squashedDir) OpenDir(ctx context.Context, name string) (Dir, error) {
	sub, err := d.Dir.OpenDir(ctx, name)
	if err != nil {
		return nil, err
	}
	return squashedDir{sub}, nil
}

func (squashedDir) Chown(context.Context, int, int) error {
	return &fs.PathError{Op: "chown", Path: ".", Err: syscall.EPERM}
}

// TestCreateOwnerRefusedKeepsFiles checks that a refused chown on a second
// call for one PV, whose directory already holds files, removes nothing.
func TestCreateOwnerRefusedKeepsFiles(t *testing.T) {
	f := newFixture(t, nil)
	req := request(t, "team", "data", "1Gi", "")
	dir, err := dirOf(f.store.Create(t.Context(), req))
	if err != nil {
		t.Fatal(err)
	}
	backendtest.WriteFile(t, filepath.Join(f.base, dir, "file"), "data")
	before := backendtest.Tree(t, f.base)
	root := int64(0)
	f.store.cfg.FS = squashedFS{}
	f.store.cfg.Directory = backend.Directory{UID: &root}
	if _, err := f.store.Create(t.Context(), req); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("Create: %v, want an error wrapping fs.ErrPermission", err)
	}
	if diff := cmp.Diff(before, backendtest.Tree(t, f.base)); diff != "" {
		t.Errorf("tree after a refused chown (-before +after):\n%s", diff)
	}
}
