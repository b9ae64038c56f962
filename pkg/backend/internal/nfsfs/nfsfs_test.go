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

package nfsfs

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol/dirvoltest"
	"github.com/provfleet/provfleet/pkg/backend/internal/nfsclient"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// exportPath is the path the test server exports its folder as.
const exportPath = "/export"

// serve serves the host folder dir on loopback until the test ends, and
// returns a client that mounted it.
func serve(t testing.TB, dir string) *nfsclient.Client {
	t.Helper()
	return dial(t, start(t, dir))
}

// start serves the host folder dir on loopback until the test ends.
func start(t testing.TB, dir string) *nfsserver.Server {
	t.Helper()
	server, err := nfsserver.Start(context.Background(), nfsserver.Options{Dir: dir, Path: exportPath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := server.Stop(); err != nil {
			t.Error(err)
		}
	})
	return server
}

// dial returns a client that mounted the export of server, until the test
// ends.
func dial(t testing.TB, server *nfsserver.Server) *nfsclient.Client {
	t.Helper()
	host, _, err := net.SplitHostPort(server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	client, err := nfsclient.Dial(context.Background(), nfsclient.Options{
		Server: host, Path: exportPath, Port: server.Port(), SourcePort: nfsclient.Unreserved,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// The go-nfs server keeps permission bits only; the client's encoding of
// the others, backend.UnixMode, is tested in pkg/backend.
func TestFilesystem(t *testing.T) {
	dirvoltest.TestFilesystem(t, func(t *testing.T, dir string) (dirvol.Filesystem, string, string) {
		t.Helper()
		return New(serve(t, dir), exportPath), exportPath, "."
	}, backendtest.SpecialModeBits)
}

func TestRelease(t *testing.T) {
	dirvoltest.TestRelease(t, func(t *testing.T, dir string) (dirvol.Filesystem, string, string) {
		t.Helper()
		return New(serve(t, dir), exportPath), exportPath, "."
	})
}

func TestOpenBaseRefusals(t *testing.T) {
	fsys := New(serve(t, t.TempDir()), exportPath)
	tests := map[string]struct {
		root, base string
		want       error
	}{
		"another root":      {root: "/elsewhere", base: ".", want: backend.ErrInvalidSpec},
		"a base leaving":    {root: exportPath, base: "../x", want: backend.ErrInvalidSpec},
		"an absolute base":  {root: exportPath, base: "/x", want: backend.ErrInvalidSpec},
		"the export's root": {root: exportPath + "/", base: "."},
		"a missing base":    {root: exportPath, base: "missing", want: backend.ErrUnavailable},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, err := fsys.OpenBase(t.Context(), tc.root, tc.base)
			if err == nil {
				d.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want one wrapping %v", err, tc.want)
			}
		})
	}
}

func TestMoveAcrossClients(t *testing.T) {
	dir := t.TempDir()
	one, other := New(serve(t, dir), exportPath), New(serve(t, dir), exportPath)
	from, err := one.OpenBase(t.Context(), exportPath, ".")
	if err != nil {
		t.Fatal(err)
	}
	to, err := other.OpenBase(t.Context(), exportPath, ".")
	if err != nil {
		t.Fatal(err)
	}
	f, err := from.CreateFile(t.Context(), "file", nil, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := from.Move(t.Context(), "file", to, "moved"); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("error %v, want one wrapping EXDEV", err)
	}
	if _, err := from.Lstat(t.Context(), "file"); err != nil {
		t.Errorf("the file did not stay: %v", err)
	}
	if _, err := from.Lstat(t.Context(), "moved"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("moved: %v, want fs.ErrNotExist", err)
	}
}

func TestOpenBaseOfAStoppedServer(t *testing.T) {
	server, err := nfsserver.Start(context.Background(), nfsserver.Options{Dir: t.TempDir(), Path: exportPath})
	if err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceValue(server.Stop)
	t.Cleanup(func() { _ = stop() })
	fsys := New(dial(t, server), exportPath)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	d, err := fsys.OpenBase(t.Context(), exportPath, ".")
	if err == nil {
		d.Close()
	}
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("error %v, want one wrapping %v", err, backend.ErrUnavailable)
	}
}
