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

package nfsclient

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// export is a served folder with a sibling outside the export.
type export struct {
	dir, outside string
	server       *nfsserver.Server
}

func serve(t testing.TB, opts nfsserver.Options) *export {
	t.Helper()
	root := t.TempDir()
	e := &export{dir: filepath.Join(root, "export"), outside: filepath.Join(root, "outside")}
	for _, d := range []string{e.dir, e.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts.Dir = e.dir
	server, err := nfsserver.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	e.server = server
	t.Cleanup(func() {
		if err := e.server.Stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}

func (e *export) dial(t *testing.T, opts Options) *Client {
	t.Helper()
	c, err := Dial(context.Background(), e.options(opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func (e *export) options(opts Options) Options {
	host, _, _ := net.SplitHostPort(e.server.Addr())
	opts.Server, opts.Port = host, e.server.Port()
	if opts.Path == "" {
		opts.Path = "/"
	}
	return opts
}

// tree lists what the host holds under dir: path, type and, for files,
// content.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var got []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		entry := rel + " " + d.Type().String()
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			entry += " " + string(data)
		}
		got = append(got, entry)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestOperations(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	ctx := context.Background()

	steps := []struct {
		name string
		do   func() error
	}{
		{"mkdir", func() error { return c.Mkdir(ctx, "vol", 0o770) }},
		{"mkdir nested", func() error { return c.Mkdir(ctx, "vol/sub", 0o700) }},
		{"create", func() error { return c.CreateFile(ctx, "vol/owner", []byte("marker"), 0o640) }},
		{"create large", func() error { return c.CreateFile(ctx, "vol/sub/big", []byte(strings.Repeat("x", 3*ioChunk+5)), 0o600) }},
		{"create temporary", func() error { return c.CreateFile(ctx, "record.tmp", []byte("r1"), 0o600) }},
		{"rename", func() error { return c.Rename(ctx, "record.tmp", "vol/sub/record") }},
		{"chmod", func() error { return c.Chmod(ctx, "vol/sub", 0o755) }},
		{"mkdir doomed", func() error { return c.Mkdir(ctx, "doomed", 0o755) }},
		{"create in doomed", func() error { return c.CreateFile(ctx, "doomed/f", nil, 0o600) }},
		{"remove in doomed", func() error { return c.Remove(ctx, "doomed/f") }},
		{"remove doomed", func() error { return c.Remove(ctx, "doomed") }},
		{"mkdir empty", func() error { return c.Mkdir(ctx, "empty", 0o755) }},
		{"remove empty dir", func() error { return c.Remove(ctx, "empty") }},
	}
	for _, step := range steps {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
	}
	want := []string{
		". d---------",
		"vol d---------",
		"vol/owner ---------- marker",
		"vol/sub d---------",
		"vol/sub/big ---------- " + strings.Repeat("x", 3*ioChunk+5),
		"vol/sub/record ---------- r1",
	}
	if diff := cmp.Diff(want, tree(t, e.dir)); diff != "" {
		t.Errorf("export after the steps (-want +got):\n%s", diff)
	}

	attrs := map[string]fs.FileMode{}
	for _, name := range []string{"vol", "vol/sub", "vol/owner", "vol/sub/record"} {
		attr, err := c.Lstat(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		attrs[name] = attr.Mode
		if attr.UID != uint32(os.Getuid()) || attr.GID != uint32(os.Getgid()) { //nolint:gosec // ids are small
			t.Errorf("%s owned by %d:%d, want the server's user", name, attr.UID, attr.GID)
		}
	}
	wantModes := map[string]fs.FileMode{
		"vol": fs.ModeDir | 0o770, "vol/sub": fs.ModeDir | 0o755, "vol/owner": 0o640, "vol/sub/record": 0o600,
	}
	if diff := cmp.Diff(wantModes, attrs); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}

	renamed, err := c.Lstat(ctx, "vol/sub/record")
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(e.dir, "vol", "sub", "record"), &st); err != nil {
		t.Fatal(err)
	}
	if renamed.FileID != st.Ino {
		t.Errorf("file id %d, want the inode %d", renamed.FileID, st.Ino)
	}

	data, err := c.ReadFile(ctx, "vol/owner", 100)
	if diff := cmp.Diff("marker", string(data)); err != nil || diff != "" {
		t.Errorf("ReadFile: %v (-want +got):\n%s", err, diff)
	}
	if _, err := c.ReadFile(ctx, "vol/sub/big", ioChunk); err == nil {
		t.Error("ReadFile read a file beyond its limit")
	}
	names, err := c.ReadDir(ctx, "vol")
	sort.Strings(names)
	if diff := cmp.Diff([]string{"owner", "sub"}, names); err != nil || diff != "" {
		t.Errorf("ReadDir: %v (-want +got):\n%s", err, diff)
	}
}

func TestErrors(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	ctx := context.Background()
	if err := c.Mkdir(ctx, "dir", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateFile(ctx, "file", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.outside, filepath.Join(e.dir, "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"mkdir existing", c.Mkdir(ctx, "dir", 0o755), fs.ErrExist},
		{"create existing", c.CreateFile(ctx, "file", nil, 0o644), fs.ErrExist},
		{"mkdir over a file", c.Mkdir(ctx, "file", 0o755), fs.ErrExist},
		{"mkdir over a link", c.Mkdir(ctx, "link", 0o755), fs.ErrExist},
		{"create over a link", c.CreateFile(ctx, "link", nil, 0o644), fs.ErrExist},
		{"lstat missing", func() error { _, err := c.Lstat(ctx, "missing"); return err }(), fs.ErrNotExist},
		{"remove missing", c.Remove(ctx, "missing"), fs.ErrNotExist},
		{"mkdir under a file", c.Mkdir(ctx, "file/sub", 0o755), ErrNotDirectory},
		{"create under a file", c.CreateFile(ctx, "file/sub", nil, 0o644), ErrNotDirectory},
		{"read a directory", func() error { _, err := c.ReadFile(ctx, "dir", 10); return err }(), fs.ErrInvalid},
		{"absolute path", c.Mkdir(ctx, "/abs", 0o755), fs.ErrInvalid},
		{"dot dot", c.Mkdir(ctx, "dir/../../up", 0o755), fs.ErrInvalid},
		{"remove the root", c.Remove(ctx, "."), fs.ErrInvalid},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: %v, want an error wrapping %v", tt.name, tt.err, tt.want)
		}
	}
}

// TestStatusErrorIs: the statuses a caller acts on match what a local file
// system's errors match.
func TestStatusErrorIs(t *testing.T) {
	tests := []struct {
		status uint32
		target error
		want   bool
	}{
		{status: statusNoSpace, target: syscall.ENOSPC, want: true},
		{status: statusQuota, target: syscall.EDQUOT, want: true},
		{status: statusNoSpace, target: syscall.EDQUOT},
		{status: statusExist, target: syscall.ENOSPC},
		{status: statusNoEnt, target: fs.ErrNotExist, want: true},
		{status: statusAccess, target: fs.ErrPermission, want: true},
	}
	for _, tt := range tests {
		err := fmt.Errorf("cannot make it: %w", &StatusError{Op: "MKDIR", Path: "dir", Status: tt.status})
		if got := errors.Is(err, tt.target); got != tt.want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", err, tt.target, got, tt.want)
		}
	}
}

func TestRemoveRefusesANonEmptyDirectory(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	ctx := context.Background()
	if err := c.Mkdir(ctx, "dir", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateFile(ctx, "dir/f", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// knfsd answers NFS3ERR_NOTEMPTY, go-nfs NFS3ERR_IO: only failing is sure.
	if err := c.Remove(ctx, "dir"); err == nil {
		t.Error("a non-empty directory was removed")
	}
	if _, err := os.Stat(filepath.Join(e.dir, "dir", "f")); err != nil {
		t.Error(err)
	}
}

func TestMountOfAnotherPathFails(t *testing.T) {
	e := serve(t, nfsserver.Options{Path: "/export"})
	_, err := Dial(context.Background(), e.options(Options{Path: "/other"}))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Dial: %v, want not exist", err)
	}
	c := e.dial(t, Options{Path: "/export"})
	if _, err := c.Lstat(context.Background(), "."); err != nil {
		t.Error(err)
	}
}

func TestDialWithoutPortmapper(t *testing.T) {
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", "111"))
	if err == nil {
		_ = conn.Close()
		t.Skip("a portmapper runs on this machine")
	}
	_, err = Dial(context.Background(), Options{Server: "127.0.0.1", Path: "/"})
	if err == nil || !strings.Contains(err.Error(), "portmapper") {
		t.Errorf("Dial with no portmapper: %v, want an error naming it", err)
	}
}

func TestWriteAtAndReadHead(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	ctx := context.Background()
	large := strings.Repeat("x", ioChunk+5)
	if err := c.CreateFile(ctx, "f", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		offset uint64
		data   string
	}{{0, "first "}, {6, large}, {6 + uint64(len(large)), " last"}} {
		if err := c.WriteAt(ctx, "f", w.offset, []byte(w.data)); err != nil {
			t.Fatalf("WriteAt %d: %v", w.offset, err)
		}
	}
	content := "first " + large + " last"
	if diff := cmp.Diff([]string{". d---------", "f ---------- " + content}, tree(t, e.dir)); diff != "" {
		t.Errorf("export after the writes (-want +got):\n%s", diff)
	}
	if err := os.Symlink(filepath.Join(e.outside, "secret"), filepath.Join(e.dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(e.dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := map[string]struct {
		name    string
		limit   int
		want    string
		wantErr error
	}{
		"a prefix":             {name: "f", limit: 3, want: "fir"},
		"across chunks":        {name: "f", limit: ioChunk + 10, want: content[:ioChunk+10]},
		"all of it":            {name: "f", limit: 2 * ioChunk, want: content},
		"a link is not read":   {name: "link", limit: 10, wantErr: fs.ErrInvalid},
		"a directory":          {name: "dir", limit: 10, wantErr: fs.ErrInvalid},
		"a missing file":       {name: "missing", limit: 10, wantErr: fs.ErrNotExist},
		"a file through links": {name: "link/x", limit: 10, wantErr: ErrNotDirectory},
	}
	for name, tc := range tests {
		t.Run("ReadHead "+name, func(t *testing.T) {
			data, attr, err := c.ReadHead(ctx, tc.name, tc.limit)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, string(data)); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
			if err == nil && attr.Size != uint64(len(content)) {
				t.Errorf("size %d, want %d", attr.Size, len(content))
			}
		})
		t.Run("WriteAt "+name, func(t *testing.T) {
			if tc.wantErr == nil {
				t.Skip("a regular file")
			}
			if err := c.WriteAt(ctx, tc.name, 0, []byte("over")); !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
		})
	}
	if data, err := os.ReadFile(filepath.Join(e.outside, "secret")); err != nil || string(data) != "secret" {
		t.Errorf("the file outside is %q (%v), want it untouched", data, err)
	}
}

// TestRewriteFile: a file is emptied, written and given its mode; anything
// but a regular file is refused.
func TestRewriteFile(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	ctx := t.Context()
	if err := os.WriteFile(filepath.Join(e.dir, "record"), []byte("a longer old content"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("record", filepath.Join(e.dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(e.dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.RewriteFile(ctx, "record", []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hostFile{"new", 0o600}, readHostFile(t, filepath.Join(e.dir, "record"))); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	for _, name := range []string{"link", "dir"} {
		if err := c.RewriteFile(ctx, name, []byte("x"), 0o600); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("RewriteFile of %s: %v, want fs.ErrInvalid", name, err)
		}
	}
	if err := c.RewriteFile(ctx, "missing", []byte("x"), 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("RewriteFile of a missing file: %v, want fs.ErrNotExist", err)
	}
	if diff := cmp.Diff(hostFile{"new", 0o600}, readHostFile(t, filepath.Join(e.dir, "record"))); diff != "" {
		t.Errorf("record after the refusals (-want +got):\n%s", diff)
	}
}
