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
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
)

func TestPlantedLinksAreNotFollowed(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	ctx := context.Background()
	if err := os.Symlink(e.outside, filepath.Join(e.dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "mine"), []byte("m"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := tree(t, e.outside)

	tests := []struct {
		name string
		err  error
	}{
		{"mkdir through", c.Mkdir(ctx, "link/dir", 0o755)},
		{"create through", c.CreateFile(ctx, "link/file", []byte("x"), 0o644)},
		{"read through", func() error { _, err := c.ReadFile(ctx, "link/secret", 100); return err }()},
		{"lstat through", func() error { _, err := c.Lstat(ctx, "link/secret"); return err }()},
		{"list through", func() error { _, err := c.ReadDir(ctx, "link"); return err }()},
		{"rename out of", c.Rename(ctx, "link/secret", "stolen")},
		{"rename into", c.Rename(ctx, "mine", "link/mine")},
		{"remove through", c.Remove(ctx, "link/secret")},
		{"chmod through", c.Chmod(ctx, "link/secret", 0o777)},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, ErrNotDirectory) || !errors.Is(tt.err, fs.ErrInvalid) {
			t.Errorf("%s: %v, want an error wrapping ErrNotDirectory", tt.name, tt.err)
		}
	}
	if _, err := c.ReadFile(ctx, "link", 100); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("ReadFile of the link: %v, want invalid", err)
	}
	attr, err := c.Lstat(ctx, "link")
	if err != nil || attr.Mode&fs.ModeSymlink == 0 {
		t.Errorf("Lstat of the link: %v, %v, want a symlink", attr.Mode, err)
	}
	// Removing a link removes the link, not its target.
	if err := c.Mkdir(ctx, "vol", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.outside, filepath.Join(e.dir, "vol", "link")); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, "vol/link"); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, "vol"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, tree(t, e.outside)); diff != "" {
		t.Errorf("the folder outside the export changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff([]string{". d---------", "link L---------", "mine ---------- m"}, tree(t, e.dir)); diff != "" {
		t.Errorf("the export (-want +got):\n%s", diff)
	}
}

func TestFSStatAnswersTheFolderFigures(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	got, err := c.FSStat(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(e.dir, &st); err != nil {
		t.Fatal(err)
	}
	bsize := uint64(st.Bsize) //nolint:gosec // a block size is positive
	want := FSStat{Total: st.Blocks * bsize, Free: st.Bfree * bsize, Available: st.Bavail * bsize}
	// Other writers on this machine move the free figures a little.
	const tolerance = 256 << 20
	near := cmp.Comparer(func(a, b uint64) bool { return max(a, b)-min(a, b) <= tolerance })
	if diff := cmp.Diff(want, got, near); diff != "" {
		t.Errorf("FSSTAT against statfs (-want +got):\n%s", diff)
	}
}

func TestServerThatStopsAndComesBack(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	ctx := context.Background()
	if err := c.Mkdir(ctx, "before", 0o755); err != nil {
		t.Fatal(err)
	}
	addr := e.server.Addr()
	if err := e.server.Stop(); err != nil {
		t.Fatal(err)
	}
	// The connection was closed, and nothing listens any more.
	for i := range 2 {
		if _, err := c.Lstat(ctx, "before"); err == nil {
			t.Fatalf("call %d succeeded while the server is down", i)
		}
	}
	server, err := nfsserver.Start(ctx, nfsserver.Options{Dir: e.dir, Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	e.server = server
	// The same client connects and mounts again: go-nfs forgot the root handle.
	if err := c.Mkdir(ctx, "before/after", 0o755); err != nil {
		t.Fatalf("after the server came back: %v", err)
	}
}

func TestRootSquashRefusesChown(t *testing.T) {
	tests := []struct {
		name       string
		rootSquash bool
		want       error
	}{
		{name: "root_squash", rootSquash: true, want: fs.ErrPermission},
		{name: "no_root_squash", rootSquash: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := serve(t, nfsserver.Options{RootSquash: tt.rootSquash})
			c := e.dial(t, Options{})
			ctx := context.Background()
			chowns := map[string]func(name string, uid, gid int) error{
				"by-path": func(name string, uid, gid int) error { return c.Chown(ctx, name, uid, gid) },
				"by-handle": func(name string, uid, gid int) error {
					h, err := c.Open(ctx, name)
					if err != nil {
						return err
					}
					return c.SetOwner(ctx, h, uid, gid)
				},
			}
			for way := range chowns {
				if err := c.Mkdir(ctx, way, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if !tt.rootSquash && os.Geteuid() != 0 {
				t.Skip("only a server running as root may give a file away")
			}
			uid, gid := 1234, 5678
			for way, chown := range chowns {
				err := chown(way, uid, gid)
				switch {
				case tt.want == nil && err != nil:
					t.Fatalf("%s: %v", way, err)
				case tt.want != nil && !errors.Is(err, tt.want):
					t.Fatalf("%s: %v, want an error wrapping %v", way, err, tt.want)
				case tt.want != nil && !strings.Contains(err.Error(), "root_squash"):
					t.Errorf("%s: %q does not name root_squash", way, err)
				}
				attr, err := c.Lstat(ctx, way)
				if err != nil {
					t.Fatal(err)
				}
				if tt.want == nil && (int(attr.UID) != uid || int(attr.GID) != gid) {
					t.Errorf("%s: owner %d:%d, want %d:%d", way, attr.UID, attr.GID, uid, gid)
				}
			}
		})
	}
}

func TestSecureExport(t *testing.T) {
	root := os.Geteuid() == 0
	tests := []struct {
		name       string
		sourcePort SourcePort
		refused    bool
	}{
		// Root binds a reserved port; others fall back and meet the refusal.
		{name: "reserved first", sourcePort: ReservedFirst, refused: !root},
		{name: "unreserved", sourcePort: Unreserved, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := serve(t, nfsserver.Options{Secure: true})
			c, err := Dial(context.Background(), e.options(Options{SourcePort: tt.sourcePort}))
			if !tt.refused {
				if err != nil {
					t.Fatalf("Dial from a reserved port: %v", err)
				}
				c.Close()
				return
			}
			var auth *AuthError
			if !errors.As(err, &auth) || !errors.Is(err, fs.ErrPermission) {
				t.Fatalf("Dial: %v, want an AuthError", err)
			}
			for _, advice := range []string{"AUTH_TOOWEAK", "net.ipv4.ip_unprivileged_port_start", "insecure"} {
				if !strings.Contains(err.Error(), advice) {
					t.Errorf("the refusal %q does not advise %s", err, advice)
				}
			}
		})
	}
}

// TestReservedPortsInTimeWait: the reserved ports of closed connections
// wait in TIME_WAIT for a minute, and there are only 512 of them; a client
// that opened many connections still reaches a secure export from one.
func TestReservedPortsInTimeWait(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("binding a reserved port needs root")
	}
	occupyReservedPorts(t)
	e := serve(t, nfsserver.Options{Secure: true})
	c, err := Dial(t.Context(), e.options(Options{SourcePort: ReservedFirst}))
	if err != nil {
		t.Fatalf("Dial with every reserved port in TIME_WAIT: %v", err)
	}
	c.Close()
}

// occupyReservedPorts leaves every reserved port that is free in TIME_WAIT:
// it connects from each to a listener of its own and closes its end first.
// It fails unless every reserved port ends up taken.
func occupyReservedPorts(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				_, _ = io.Copy(io.Discard, conn)
				_ = conn.Close()
			})
		}
	})
	for port := firstReservedPort; port < reservedPorts; port++ {
		d := net.Dialer{LocalAddr: &net.TCPAddr{Port: port}}
		conn, err := d.DialContext(t.Context(), "tcp", l.Addr().String())
		if errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EADDRNOTAVAIL) {
			continue // taken already
		}
		if err != nil {
			t.Fatalf("cannot take port %d: %v", port, err)
		}
		_ = conn.Close()
	}
	_ = l.Close()
	wg.Wait()
}

// silentServer returns a server that never answers.
func silentServer(t *testing.T) *nfsserver.Silent {
	t.Helper()
	s, err := nfsserver.StartSilent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestDeadServerFailsCalls(t *testing.T) {
	silent := silentServer(t)
	tests := []struct {
		name string
		opts Options
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"context deadline", Options{}, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}},
		{"client timeout", Options{Timeout: 100 * time.Millisecond}, func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			tt.opts.Server, tt.opts.Port, tt.opts.Path = silent.Host(), silent.Port(), "/"
			_, err := Dial(ctx, tt.opts)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Dial: %v, want a deadline error", err)
			}
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			name := fmt.Sprintf("vol%d", i)
			if errs[i] = c.Mkdir(ctx, name, 0o755); errs[i] != nil {
				return
			}
			errs[i] = c.CreateFile(ctx, name+"/owner", []byte(name), 0o644)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	names, err := c.ReadDir(ctx, ".")
	if err != nil || len(names) != len(errs) {
		t.Errorf("ReadDir: %v, %v, want %d volumes", names, err, len(errs))
	}
}

func TestClientMadeWhileTheServerIsDown(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	addr := e.server.Addr()
	if err := e.server.Stop(); err != nil {
		t.Fatal(err)
	}
	// New talks to nobody: it succeeds with the server down.
	c := New(e.options(Options{}))
	defer c.Close()
	ctx := context.Background()
	if err := c.Mkdir(ctx, "early", 0o755); err == nil {
		t.Fatal("Mkdir succeeded while the server is down")
	}
	server, err := nfsserver.Start(ctx, nfsserver.Options{Dir: e.dir, Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	e.server = server
	if err := c.Mkdir(ctx, "late", 0o755); err != nil {
		t.Fatalf("after the server came up: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "late")); err != nil {
		t.Error(err)
	}
}

func TestCloseCutsARunningCallShort(t *testing.T) {
	silent := silentServer(t)
	// No deadline but the client's own, far off: only Close can end the call.
	c := New(Options{Server: silent.Host(), Port: silent.Port(), Path: "/", Timeout: time.Hour})
	failed := make(chan error)
	go func() {
		_, err := c.Lstat(context.Background(), "x")
		failed <- err
	}()
	// The call is under way once the server has its connection; Close ends
	// it whether or not it got there.
	c.Close()
	if err := <-failed; err == nil {
		t.Error("the call succeeded on a server that never answers")
	}
	if _, err := c.Lstat(context.Background(), "x"); !errors.Is(err, ErrClosed) {
		t.Errorf("a call after Close: %v, want ErrClosed", err)
	}
}

// Real servers serve MOUNT on a port of its own, which the portmapper tells.
func TestPortmapperFindsMountAndNFS(t *testing.T) {
	e := serve(t, nfsserver.Options{Portmapper: true})
	opts := e.options(Options{})
	opts.Port = 0
	c := New(opts)
	defer c.Close()
	c.portmapper = e.server.PortmapperAddr()
	ctx := context.Background()
	if err := c.Mkdir(ctx, "found", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "found")); err != nil {
		t.Error(err)
	}
	if c.mntAddr == c.nfsAddr || c.nfsAddr != e.server.Addr() {
		t.Errorf("MOUNT at %s and NFS at %s, want MOUNT on a port of its own and NFS at %s", c.mntAddr, c.nfsAddr, e.server.Addr())
	}
}

// A port that does not serve the portmapper fails the call with the
// reason.
func TestPortmapperUnavailable(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	opts := e.options(Options{})
	opts.Port = 0
	c := New(opts)
	defer c.Close()
	// go-nfs answers the portmapper's program with PROG_UNAVAIL.
	c.portmapper = e.server.Addr()
	_, err := c.Lstat(context.Background(), ".")
	var refused *RPCError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "portmapper") {
		t.Errorf("Lstat with the portmapper asked of an NFS port: %v, want an RPC error naming the portmapper", err)
	}
}

// A failing server fails every call alike: the errors name no local port,
// which changes with every connection, since they end up in a status that
// must not be rewritten at every probe.
func TestErrorsOfADownServerDoNotChange(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	ctx := context.Background()
	if err := e.server.Stop(); err != nil {
		t.Fatal(err)
	}
	var messages []string
	for range 3 {
		_, err := c.Lstat(ctx, ".")
		if err == nil {
			t.Fatal("Lstat succeeded on a stopped server")
		}
		messages = append(messages, err.Error())
	}
	// The first call may meet the connection the server closed; the others
	// find nothing listening.
	if messages[1] != messages[2] {
		t.Errorf("two calls to a stopped server failed differently:\n%s\n%s", messages[1], messages[2])
	}
	if !strings.Contains(messages[2], e.server.Addr()) {
		t.Errorf("the error %q does not name the server %s", messages[2], e.server.Addr())
	}
	// The cleanup stops the server again.
	server, err := nfsserver.Start(ctx, nfsserver.Options{Dir: e.dir, Address: e.server.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	e.server = server
}
