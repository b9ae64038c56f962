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

package nfsserver

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	billy "github.com/go-git/go-billy/v5"
	"github.com/google/go-cmp/cmp"
	nfs "github.com/willscott/go-nfs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// exported returns the file system the handler serves for a mount of "/".
func exported(t *testing.T, opts Options) (nfs.Handler, billy.Filesystem) {
	t.Helper()
	h := newHandler(opts)
	status, served, _ := h.Mount(context.Background(), nil, nfs.MountRequest{Dirpath: []byte("/")})
	if status != nfs.MountStatusOk {
		t.Fatalf("mount of / answered %d", status)
	}
	return h, served
}

func TestBoundFileSystemKeepsLinksInside(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "export")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	_, served := exported(t, Options{Dir: dir})

	if _, err := served.Open("link/secret"); err == nil {
		t.Error("a file outside the export was opened through a link")
	}
	// The bound osfs reads the link's target as a path under the export:
	// what is created through it lands inside, if anywhere.
	if f, err := served.Create("link/planted"); err == nil {
		_ = f.Close()
	}
	_ = served.MkdirAll("link/dir", 0o755)
	_ = served.Rename("link", "link/moved")
	_ = served.Remove("link/secret")
	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("the folder outside the export holds %d entries, want only its secret", len(entries))
	}
}

func TestCreateAndMkdirDoNotFollowLinks(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "export")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The bound osfs would read this target as dir/<root>/outside and
	// create it there, parents included.
	if err := os.Symlink(filepath.Join(root, "outside"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	_, served := exported(t, Options{Dir: dir})
	if f, err := served.Create("link"); err == nil {
		_ = f.Close()
		t.Error("Create over a link succeeded")
	}
	if err := served.MkdirAll("link", 0o755); err == nil {
		t.Error("MkdirAll over a link succeeded")
	}
	f, err := served.Create("new")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := served.MkdirAll("sub", 0o755); err != nil {
		t.Fatal(err)
	}
	var got []string
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, path)
		got = append(got, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{".", "export", "export/link", "export/new", "export/sub"}, got); diff != "" {
		t.Errorf("host tree (-want +got):\n%s", diff)
	}
}

func TestRemoveAndRenameActOnLinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "target"), []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Absolute, as a user of another volume would plant it: the bound osfs
	// reads it as dir/<dir>/target, so point there too.
	inner := filepath.Join(dir, dir)
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inner, "target"), []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{"a", "b"} {
		if err := os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	_, served := exported(t, Options{Dir: dir})
	if err := served.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if err := served.Rename("b", "c"); err != nil {
		t.Fatal(err)
	}
	if err := served.Remove("/"); err == nil {
		t.Error("the export's root was removed")
	}
	for _, name := range []string{"target", filepath.Join(dir, "target")} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("a link's target was touched: %v", err)
		}
	}
	if target, err := os.Readlink(filepath.Join(dir, "c")); err != nil || target != filepath.Join(dir, "target") {
		t.Errorf("the link was not renamed: %q, %v", target, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link was not removed: %v", err)
	}
}

func TestFSStatAnswersTheFolderFigures(t *testing.T) {
	dir := t.TempDir()
	h, served := exported(t, Options{Dir: dir})
	var got nfs.FSStat
	if err := h.FSStat(context.Background(), served, &got); err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	bsize := uint64(st.Bsize) //nolint:gosec // a block size is positive
	if got.TotalSize != st.Blocks*bsize {
		t.Errorf("total %d bytes, statfs says %d", got.TotalSize, st.Blocks*bsize)
	}
	if got.TotalSize == 1<<62 || got.AvailableSize > got.TotalSize || got.FreeSize > got.TotalSize {
		t.Errorf("figures are not the folder's: %+v", got)
	}
}

func TestRootSquashRefusesOwnerChanges(t *testing.T) {
	tests := []struct {
		name       string
		rootSquash bool
		wantErr    error
	}{
		{name: "squashed", rootSquash: true, wantErr: fs.ErrPermission},
		{name: "not squashed", rootSquash: false, wantErr: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			h, served := exported(t, Options{Dir: dir, RootSquash: tt.rootSquash})
			// Owning the file already: allowed unprivileged, refused when squashed.
			err := h.Change(served).Lchown("f", os.Getuid(), os.Getgid())
			if !errors.Is(err, tt.wantErr) && (tt.wantErr != nil || err != nil) {
				t.Errorf("Lchown: %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestMountRefusesOtherPaths(t *testing.T) {
	h := newHandler(Options{Dir: t.TempDir(), Path: "/export"})
	tests := []struct {
		path string
		want nfs.MountStatus
	}{
		{path: "/export", want: nfs.MountStatusOk},
		{path: "/", want: nfs.MountStatusErrNoEnt},
		{path: "/export/sub", want: nfs.MountStatusErrNoEnt},
	}
	for _, tt := range tests {
		got, _, _ := h.Mount(context.Background(), nil, nfs.MountRequest{Dirpath: []byte(tt.path)})
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("mount %s (-want +got):\n%s", tt.path, diff)
		}
	}
}

// nullCall sends the NULL procedure of MOUNT on conn and returns the
// reply's words after the xid.
func nullCall(t *testing.T, conn net.Conn) []uint32 {
	t.Helper()
	defer func() { _ = conn.Close() }()
	// xid, CALL, rpcvers 2, MOUNT 100005, v3, NULL, AUTH_NULL cred and verifier.
	call := []uint32{lastFragment | 10*4, 7, 0, 2, 100005, 3, 0, 0, 0, 0, 0}
	if err := binary.Write(conn, binary.BigEndian, call); err != nil {
		t.Fatal(err)
	}
	var marker uint32
	if err := binary.Read(conn, binary.BigEndian, &marker); err != nil {
		t.Fatal(err)
	}
	reply := make([]uint32, (marker&^lastFragment)/4)
	if err := binary.Read(conn, binary.BigEndian, reply); err != nil {
		t.Fatal(err)
	}
	if reply[0] != 7 {
		t.Fatalf("reply to xid %d, want 7", reply[0])
	}
	return reply[1:]
}

// dialReserved connects from a free reserved port: one a previous run
// used may still be in TIME_WAIT.
func dialReserved(t *testing.T, addr string) net.Conn {
	t.Helper()
	// SO_REUSEADDR binds a port in TIME_WAIT again, as the client does: other
	// packages' tests may leave every reserved port so.
	reuse := func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1) })
	}
	for port := reservedPorts - 1; port >= reservedPorts/2; port-- {
		d := net.Dialer{LocalAddr: &net.TCPAddr{Port: port}, Control: reuse}
		conn, err := d.Dial("tcp", addr)
		if err == nil {
			return conn
		}
		if !errors.Is(err, syscall.EADDRINUSE) && !errors.Is(err, syscall.EADDRNOTAVAIL) {
			t.Fatal(err)
		}
	}
	t.Fatal("no free reserved port")
	return nil
}

func TestSecureRefusesUnreservedPorts(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{Dir: t.TempDir(), Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	}()

	denied := []uint32{rpcReply, rpcMsgDenied, rpcAuthError, rpcAuthTooWeak}
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(denied, nullCall(t, conn)); diff != "" {
		t.Errorf("call from an unreserved port (-want +got):\n%s", diff)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: cannot bind a reserved port to check that it is accepted")
		return
	}
	// Accepted: REPLY, MSG_ACCEPTED, AUTH_NULL verifier, SUCCESS.
	accepted := []uint32{rpcReply, 0, 0, 0, 0}
	if diff := cmp.Diff(accepted, nullCall(t, dialReserved(t, s.Addr()))); diff != "" {
		t.Errorf("call from a reserved port (-want +got):\n%s", diff)
	}
}

func TestStopEndsConnections(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	// The server closed its side: a read ends instead of waiting.
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("the connection is still served after Stop")
	}
	if _, err := net.Dial("tcp", s.Addr()); err == nil {
		t.Error("the server still accepts after Stop")
	}
}

func TestStartRefusesAMissingFolder(t *testing.T) {
	_, err := Start(context.Background(), Options{Dir: filepath.Join(t.TempDir(), "missing")})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Start: %v, want not exist", err)
	}
}

// nfs3ErrStale is what go-nfs answers for a handle it does not know.
const nfs3ErrStale = 70

// TestRestart: a server restarted behind a Hostile one serves its Memory
// on the same addresses again; handles of before are stale, and a client
// that mounts again finds what it made.
func TestRestart(t *testing.T) {
	_, server, hostile := fronted(t, Options{Memory: NewMemory(), Portmapper: true}, func(string) Answer { return nil })
	addr, portmapper := server.Addr(), server.PortmapperAddr()
	c := dialRaw(t, hostile.Addr())
	root := c.mount(t)
	if status, _ := c.call(t, nfsProgram, nfsProcMkdir, mkdirArgs(root, "kept")); status != nfs3OK {
		t.Fatalf("MKDIR answered %d", status)
	}
	if err := server.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if server.Addr() != addr || server.PortmapperAddr() != portmapper {
		t.Errorf("restarted on %s and %s, want %s and %s", server.Addr(), server.PortmapperAddr(), addr, portmapper)
	}
	c = dialRaw(t, hostile.Addr())
	if status, _ := c.call(t, nfsProgram, nfsProcGetAttr, root); status != nfs3ErrStale {
		t.Errorf("GETATTR of a handle of before answered %d, want NFS3ERR_STALE", status)
	}
	root = c.mount(t)
	if status, _ := c.call(t, nfsProgram, nfsProcLookup, append(append([]byte(nil), root...), opaqueOf("kept")...)); status != nfs3OK {
		t.Errorf("LOOKUP of what was made before the restart answered %d", status)
	}
}
