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
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/willscott/go-nfs-client/nfs"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol/dirvoltest"
	"github.com/provfleet/provfleet/pkg/backend/internal/nfsclient"
)

// Sizes of the trees the copy tests copy over NFS: pages of a listing,
// and a chain far deeper than the window of directories a copy by
// descriptors keeps open, quick under the race detector. The test server
// keeps each handle's path, so a chain as deep as a copy goes would cost
// its heap the depth squared.
const (
	copyFiles = 500
	copyDepth = 300
)

// copyVictim copies victim into the new directory copy of base.
func copyVictim(ctx context.Context, base dirvol.Dir) (dirvol.Copied, error) {
	if err := base.Mkdir(ctx, "copy", 0o700); err != nil {
		return dirvol.Copied{}, err
	}
	from, err := base.OpenDir(ctx, "victim")
	if err != nil {
		return dirvol.Copied{}, err
	}
	defer from.Close()
	into, err := base.OpenDir(ctx, "copy")
	if err != nil {
		return dirvol.Copied{}, err
	}
	defer into.Close()
	return from.CopyTo(ctx, into, 1<<30, dirvol.NoOwner)
}

// TestCopyToBounded: over NFS, a directory of many files and a deep chain
// of directories are copied whole by file handles, with the open
// descriptors and the heap bounded meanwhile.
func TestCopyToBounded(t *testing.T) {
	const level = "level-of-a-deep-chain"
	tests := map[string]struct {
		build func(m *nfsserver.Memory) error
		check func(m *nfsserver.Memory) error
		want  dirvol.Copied
	}{
		"a directory of many files": {
			build: func(m *nfsserver.Memory) error { return m.MakeFiles("victim", "file-", copyFiles) },
			check: func(m *nfsserver.Memory) error {
				count, err := m.Count("copy")
				if err == nil && count != copyFiles {
					err = fmt.Errorf("the copy holds %d entries, want %d files", count, copyFiles)
				}
				return err
			},
			want: dirvol.Copied{Files: copyFiles},
		},
		"a deep chain of directories": {
			build: func(m *nfsserver.Memory) error { return m.MakeChain("victim", level, copyDepth, "leaf") },
			check: func(m *nfsserver.Memory) error {
				_, err := m.Lstat(path.Join("copy", strings.Repeat(level+"/", copyDepth), "leaf"))
				return err
			},
			want: dirvol.Copied{Dirs: copyDepth, Files: 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			memory, base := serveMemory(t)
			if err := tc.build(memory); err != nil {
				t.Fatal(err)
			}
			var copied dirvol.Copied
			dirvoltest.CheckRemoval(t, func(ctx context.Context) error {
				var err error
				copied, err = copyVictim(ctx, base)
				return err
			})
			if copied.Dirs != tc.want.Dirs || copied.Files != tc.want.Files {
				t.Errorf("copied %d directories and %d files, want %d and %d", copied.Dirs, copied.Files, tc.want.Dirs, tc.want.Files)
			}
			if err := tc.check(memory); err != nil {
				t.Errorf("the copy is not whole: %v", err)
			}
		})
	}
}

// TestCopyToWriteVerifierChanged: a server whose write verifier changes
// between the UNSTABLE writes of a file, or between them and the COMMIT,
// as after a restart that lost them, fails the copy rather than let it end
// with a file short of its data.
func TestCopyToWriteVerifierChanged(t *testing.T) {
	// WRITE and COMMIT replies, answered without writing: status OK, no
	// attributes before or after, then a WRITE's count and stability.
	const statusOK, unstable = 0, 0
	verifier := func(v byte) []byte { return []byte{v, v, v, v, v, v, v, v} }
	tests := map[string]func(writes int) byte{
		"between writes":            func(writes int) byte { return byte(writes) }, //nolint:gosec // a few writes
		"between writes and COMMIT": func(int) byte { return 1 },
	}
	for name, writeVerifier := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			backendtest.WriteFile(t, filepath.Join(dir, "victim", "file"), strings.Repeat("data ", 100_000))
			upstream := start(t, dir)
			var mu sync.Mutex
			writes := 0
			hostile, err := nfsserver.StartHostile(t.Context(), nfsserver.HostileOptions{
				Upstream: upstream.Addr(),
				Answer: func(_ context.Context, call nfsserver.Call, w io.Writer) (bool, error) {
					var reply []byte
					switch {
					case call.Program != nfs.Nfs3Prog:
						return false, nil
					case call.Procedure == nfs.NFSProc3Write:
						mu.Lock()
						writes++
						v := writeVerifier(writes)
						mu.Unlock()
						// WRITE3args: the handle, the offset, then the count.
						at := 4 + (binary.BigEndian.Uint32(call.Args)+3)&^3 + 8
						count := binary.BigEndian.Uint32(call.Args[at:])
						reply = append(nfsserver.Success(call.XID, statusOK, 0, 0, count, unstable), verifier(v)...)
					case call.Procedure == nfs.NFSProc3Commit:
						reply = append(nfsserver.Success(call.XID, statusOK, 0, 0), verifier(2)...)
					default:
						return false, nil
					}
					_, err := w.Write(nfsserver.Frame(reply))
					return true, err
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := hostile.Stop(); err != nil {
					t.Error(err)
				}
			})
			client, err := nfsclient.Dial(t.Context(), nfsclient.Options{Server: hostile.Host(), Path: exportPath, Port: hostile.Port(), SourcePort: nfsclient.Unreserved})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(client.Close)
			base, err := New(client, exportPath).OpenBase(t.Context(), exportPath, ".")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := copyVictim(t.Context(), base); !errors.Is(err, nfsclient.ErrWriteVerifierChanged) {
				t.Fatalf("copy: %v, want an error wrapping %v", err, nfsclient.ErrWriteVerifierChanged)
			}
		})
	}
}

// TestReadPageExpired: a position the server no longer honours, as one of
// a listing of the directory before it changed, fails with
// dirvol.ErrListPosExpired, so that a copy lists the directory again.
func TestReadPageExpired(t *testing.T) {
	dir := t.TempDir()
	backendtest.WriteFile(t, filepath.Join(dir, "a"), "")
	backendtest.WriteFile(t, filepath.Join(dir, "b"), "")
	base, err := New(serve(t, dir), exportPath).OpenBase(t.Context(), exportPath, ".")
	if err != nil {
		t.Fatal(err)
	}
	page, err := base.ReadPage(t.Context(), dirvol.ListPos{}, 1)
	if err != nil || len(page) != 1 {
		t.Fatalf("first page: %v, %v", page, err)
	}
	stale := page[0].Next
	stale.Verifier[0]++
	if _, err := base.ReadPage(t.Context(), stale, 1); !errors.Is(err, dirvol.ErrListPosExpired) {
		t.Errorf("a page from a position of another listing: %v, want an error wrapping %v", err, dirvol.ErrListPosExpired)
	}
}
