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
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
)

// capturedReplies are the reply records a go-nfs server sends to a client
// doing every operation, the portmapper's and MOUNT's included.
func capturedReplies(tb testing.TB) [][]byte {
	tb.Helper()
	e := serve(tb, nfsserver.Options{Portmapper: true})
	var mu sync.Mutex
	var replies [][]byte
	record := func(_ nfsserver.Call, reply []byte) {
		mu.Lock()
		defer mu.Unlock()
		replies = append(replies, append([]byte(nil), reply...))
	}
	front := func(upstream string) *nfsserver.Hostile {
		h, err := nfsserver.StartHostile(context.Background(), nfsserver.HostileOptions{Upstream: upstream, Record: record})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			if err := h.Stop(); err != nil {
				tb.Error(err)
			}
		})
		return h
	}
	c := New(Options{Server: "127.0.0.1", Path: "/", SourcePort: Unreserved})
	defer c.Close()
	c.portmapper = front(e.server.PortmapperAddr()).Addr()
	// The portmapper's answers are replaced by the fronts of MOUNT and NFS.
	if err := c.resolvePorts(context.Background()); err != nil {
		tb.Fatal(err)
	}
	c.opts.Port = -1 // resolved: not asked again
	c.mntAddr, c.nfsAddr = front(c.mntAddr).Addr(), front(c.nfsAddr).Addr()
	everyOperation(tb, c)
	mu.Lock()
	defer mu.Unlock()
	return replies
}

// everyOperation runs each operation of c once, and some that fail.
func everyOperation(tb testing.TB, c *Client) {
	tb.Helper()
	ctx := context.Background()
	steps := []func() error{
		func() error { return c.Mkdir(ctx, "dir", 0o755) },
		func() error { return c.CreateFile(ctx, "dir/file", []byte(strings.Repeat("x", 100)), 0o644) },
		func() error { return c.WriteAt(ctx, "dir/file", 10, []byte("written")) },
		func() error { _, err := c.ReadFile(ctx, "dir/file", 1000); return err },
		func() error { _, err := c.ReadDir(ctx, "dir"); return err },
		func() error { _, err := c.Lstat(ctx, "."); return err },
		func() error { return c.Chmod(ctx, "dir", 0o700) },
		func() error { _, err := c.FSStat(ctx); return err },
		func() error { return c.Rename(ctx, "dir/file", "dir/renamed") },
		func() error { return c.Remove(ctx, "dir/renamed") },
		func() error { return handleOperations(ctx, c) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			tb.Fatalf("step %d: %v", i, err)
		}
	}
	if _, err := c.Lstat(ctx, "missing"); err == nil {
		tb.Fatal("Lstat of a missing name succeeded")
	}
}

// handleOperations runs each operation by handle once.
func handleOperations(ctx context.Context, c *Client) error {
	root, err := c.Open(ctx, ".")
	if err != nil {
		return err
	}
	dir, err := c.MkdirIn(ctx, root, "copy", 0o755)
	if err != nil {
		return err
	}
	f, err := c.CreateIn(ctx, dir, "file", 0o644)
	if err != nil {
		return err
	}
	if err := c.WriteFileAt(ctx, f, []byte("data"), 0); err != nil {
		return err
	}
	if err := c.Commit(ctx, f); err != nil {
		return err
	}
	if _, err := c.ReadAt(ctx, f, make([]byte, 10), 0); !errors.Is(err, io.EOF) {
		return fmt.Errorf("ReadAt past the end: %w", err)
	}
	if err := c.Symlink(ctx, dir, "link", "file"); err != nil {
		return err
	}
	link, err := c.LookupIn(ctx, dir, "link")
	if err != nil {
		return err
	}
	if _, err := c.Readlink(ctx, link); err != nil {
		return err
	}
	_, _, _, err = c.ReadDirPage(ctx, dir, DirCursor{}, 10)
	return err
}

// FuzzReplies decodes any record as the reply to each procedure the client
// reads: nothing panics, and what a decoder returns keeps the protocol's
// limits and fits in the record.
func FuzzReplies(f *testing.F) {
	for _, reply := range capturedReplies(f) {
		f.Add(reply)
	}
	f.Fuzz(func(t *testing.T, record []byte) {
		if len(record) < 4 {
			return
		}
		d, err := decodeReply(binary.BigEndian.Uint32(record), record)
		if err != nil {
			return
		}
		if d.uint32(); d.err != nil {
			return
		}
		for name, decode := range replyDecoders {
			body := *d
			size, err := decode(&body)
			if err == nil && size > len(record) {
				t.Errorf("%s: %d bytes out of a record of %d", name, size, len(record))
			}
		}
	})
}

// asked is the bytes a fuzzed READ or WRITE asked for.
const asked = 100

// replyDecoders decode a procedure's result, returning the bytes of what
// they return when it keeps the protocol's limits, and failing otherwise.
var replyDecoders = map[string]func(d *decoder) (int, error){
	"GETPORT": func(d *decoder) (int, error) { _, err := portReply(d); return 4, err },
	"MNT": func(d *decoder) (int, error) {
		fh, err := mountReply(d)
		return checkHandle(fh), err
	},
	"GETATTR": func(d *decoder) (int, error) { _, err := getattrReply(d); return 0, err },
	"LOOKUP": func(d *decoder) (int, error) {
		fh, _, err := lookupReply(d)
		return checkHandle(fh), err
	},
	"CREATE": func(d *decoder) (int, error) {
		fh, _, err := createdReply(d, "CREATE")
		return checkHandle(fh), err
	},
	"WRITE": func(d *decoder) (int, error) {
		w, err := writeReply(d, asked)
		if err == nil && (w.count < 1 || w.count > asked) {
			return 1 << 30, err
		}
		return 0, err
	},
	"READ": func(d *decoder) (int, error) {
		data, _, err := readReply(d, asked)
		if len(data) > asked {
			return 1 << 30, err
		}
		return len(data), err
	},
	"READDIR": func(d *decoder) (int, error) {
		page, err := readDirReply(d, asked)
		if len(page.names) > asked {
			return 1 << 30, err
		}
		size := 0
		for _, name := range page.names {
			if checkName(name) != nil || len(name) > maxNameBytes || name == "." || name == ".." {
				return 1 << 30, err
			}
			size += len(name)
		}
		return size, err
	},
	"FSSTAT": func(d *decoder) (int, error) { _, err := fsstatReply(d); return 0, err },
	"COMMIT": func(d *decoder) (int, error) { _, err := commitReply(d); return 0, err },
	"READLINK": func(d *decoder) (int, error) {
		target, err := readlinkReply(d)
		if checkTarget(target) != nil && err == nil {
			return 1 << 30, err
		}
		return len(target), err
	},
	"FSINFO": func(d *decoder) (int, error) {
		sizes, err := fsinfoReply(d)
		for _, size := range []int{sizes.read, sizes.write} {
			if err == nil && (size < minTransfer || size > maxTransfer) {
				return 1 << 30, err
			}
		}
		return 0, err
	},
}

// checkHandle is the size of a handle, or too much for any record when it
// is longer than NFS3_FHSIZE.
func checkHandle(fh []byte) int {
	if len(fh) > maxHandleBytes {
		return 1 << 30
	}
	return len(fh)
}
