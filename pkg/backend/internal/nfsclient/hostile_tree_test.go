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
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/willscott/go-nfs-client/nfs"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
)

// byHandle runs call with the handle of dir/file, looked up through the
// hostile server, which passes LOOKUP on.
func byHandle(name string, call func(ctx context.Context, c *Client, h Handle) error) func(ctx context.Context, c *Client) error {
	return func(ctx context.Context, c *Client) error {
		h, err := c.Open(ctx, name)
		if err != nil {
			return err
		}
		return call(ctx, c, h)
	}
}

// linkHandle makes the link dir/link and runs call with its handle.
func linkHandle(call func(ctx context.Context, c *Client, h Handle) error) func(ctx context.Context, c *Client) error {
	return byHandle("dir", func(ctx context.Context, c *Client, dir Handle) error {
		if err := c.Symlink(ctx, dir, "link", "file"); err != nil {
			return err
		}
		link, err := c.LookupIn(ctx, dir, "link")
		if err != nil {
			return err
		}
		return call(ctx, c, link)
	})
}

// readlinkReplyOf is a READLINK reply holding a target of n bytes that
// announces announced.
func readlinkReplyOf(xid uint32, announced uint32, n int) []byte {
	reply := nfsserver.Success(xid, statusOK, 0, announced)
	return nfsserver.Frame(append(reply, make([]byte, (n+3)&^3)...))
}

func treeCases() map[string]hostileCase {
	readAt := byHandle("dir/file", func(ctx context.Context, c *Client, f Handle) error {
		_, err := c.ReadAt(ctx, f, make([]byte, 100), 0)
		return err
	})
	readlink := linkHandle(func(ctx context.Context, c *Client, link Handle) error {
		_, err := c.Readlink(ctx, link)
		return err
	})
	listPage := byHandle("dir", func(ctx context.Context, c *Client, dir Handle) error {
		_, _, _, err := c.ReadDirPage(ctx, dir, DirCursor{}, 10)
		return err
	})
	return map[string]hostileCase{
		"READ by handle of more than asked": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Read, func(call nfsserver.Call) []byte {
				reply := nfsserver.Success(call.XID, statusOK, 0, 200, 1, 200)
				return nfsserver.Frame(append(reply, make([]byte, 200)...))
			}),
			call: readAt, want: "READ data of 200 bytes, more than 100",
		},
		"READ by handle of 4 GiB": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Read, func(call nfsserver.Call) []byte {
				return nfsserver.Frame(nfsserver.Success(call.XID, statusOK, 0, hugeLength, 0, hugeLength))
			}),
			call: readAt, want: "READ data of 4294967295 bytes",
		},
		"READ by handle of nothing, not at the end": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Read, func(call nfsserver.Call) []byte {
				return nfsserver.Frame(nfsserver.Success(call.XID, statusOK, 0, 0, 0, 0))
			}),
			call: readAt, want: "no data before the end",
		},
		"READLINK target of 4097 bytes": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Readlink, func(call nfsserver.Call) []byte {
				return readlinkReplyOf(call.XID, maxLinkBytes+1, maxLinkBytes+1)
			}),
			call: readlink, want: "link target of 4097 bytes, more than 4096",
		},
		"READLINK target of 4 GiB": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Readlink, func(call nfsserver.Call) []byte {
				return readlinkReplyOf(call.XID, hugeLength, 8)
			}),
			call: readlink, want: "link target of 4294967295 bytes",
		},
		"READLINK target holding a NUL": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Readlink, func(call nfsserver.Call) []byte {
				reply := nfsserver.Success(call.XID, statusOK, 0, 4)
				return nfsserver.Frame(append(reply, 'a', 0, 'b', 'c'))
			}),
			call: readlink, want: "NUL",
		},
		"READDIR page of dot entries only, again and again": {
			answer: func() nfsserver.Answer {
				var next uint64 = 1
				return answering(nfs.Nfs3Prog, procReadDir, func(call nfsserver.Call) []byte {
					entries := nfsserver.Words(1, 0, 1, 1, '.'<<24)
					entries = binary.BigEndian.AppendUint64(entries, next)
					next++
					return readDirPage(call.XID, entries, 0)
				})
			}(),
			call: listPage, want: "hold no name",
		},
		"READDIR page whose cookie does not move": {
			answer: answering(nfs.Nfs3Prog, procReadDir, func(call nfsserver.Call) []byte {
				entries := nfsserver.Words(1, 0, 1, 1, '.'<<24)
				return readDirPage(call.XID, binary.BigEndian.AppendUint64(entries, 0), 0)
			}),
			call: listPage, want: "does not move on",
		},
		"READDIR name holding a slash by handle": {
			answer: answering(nfs.Nfs3Prog, procReadDir, func(call nfsserver.Call) []byte {
				entry := append(nfsserver.Words(1, 0, 1, 4), "../x"...)
				return readDirPage(call.XID, binary.BigEndian.AppendUint64(entry, 1), 1)
			}),
			call: listPage, want: "is not a file name",
		},
	}
}

// A transfer, a link or a listing by handle fails on a reply beyond the
// protocol's bounds or its own, the heap bounded.
func TestHostileTreeReplies(t *testing.T) {
	for name, tc := range treeCases() {
		t.Run(name, func(t *testing.T) {
			tc.run(t)
		})
	}
}

// readDirCookie is the cookie a READDIR call asks from.
func readDirCookie(args []byte) uint64 {
	handle := binary.BigEndian.Uint32(args)
	return binary.BigEndian.Uint64(args[4+(handle+3)&^3:])
}

// TestReadDirPageOfAHostilePage: a page of more entries than asked costs
// the names asked, and the listing goes on from the last one taken.
func TestReadDirPageOfAHostilePage(t *testing.T) {
	const pageNames, limit = 800, 10
	var mu sync.Mutex
	var cookies []uint64
	answer := answering(nfs.Nfs3Prog, procReadDir, func(call nfsserver.Call) []byte {
		mu.Lock()
		defer mu.Unlock()
		cookie := readDirCookie(call.Args)
		cookies = append(cookies, cookie)
		return readDirPage(call.XID, dirEntries(cookie+1, pageNames, maxNameBytes), 0)
	})
	c := behindHostile(t, answer, 0)
	dir, err := c.Open(t.Context(), "dir")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var cursor DirCursor
	cost := measureHeap(func() {
		for range 3 {
			var page []DirEntry
			if page, cursor, _, err = c.ReadDirPage(t.Context(), dir, cursor, limit); err != nil {
				t.Fatal(err)
			}
			if len(page) != limit || page[limit-1].Next != cursor {
				t.Fatalf("%d names, the last going on at %v, want %d going on at %v", len(page), page[len(page)-1].Next, limit, cursor)
			}
			for _, e := range page {
				names = append(names, e.Name)
			}
		}
	})
	if cost.allocated > callHeapBound {
		t.Errorf("three pages allocated %d MiB, more than %d MiB", cost.allocated>>20, callHeapBound>>20)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]uint64{0, limit, 2 * limit}, cookies); diff != "" {
		t.Errorf("cookies asked (-want +got):\n%s", diff)
	}
	if len(names) != 3*limit || strings.Count(strings.Join(names, ""), "n") != 3*limit*maxNameBytes {
		t.Errorf("%d names listed, want %d of %d bytes", len(names), 3*limit, maxNameBytes)
	}
}

// writeReplyOf is a WRITE or COMMIT reply with the verifier v; a WRITE's
// says it wrote count bytes, with stability committed.
func writeReplyOf(xid uint32, count, committed uint32, v byte) []byte {
	reply := nfsserver.Success(xid, statusOK, 0, 0, count, committed)
	return nfsserver.Frame(append(reply, v, v, v, v, v, v, v, v))
}

// commitReplyOf is a COMMIT reply with the verifier v.
func commitReplyOf(xid uint32, v byte) []byte {
	reply := nfsserver.Success(xid, statusOK, 0, 0)
	return nfsserver.Frame(append(reply, v, v, v, v, v, v, v, v))
}

// TestWriteVerifier: a server whose write verifier changed between the
// UNSTABLE writes of a file and its COMMIT, or between two writes, makes
// the caller write the file again; FILE_SYNC writes need no verifier.
func TestWriteVerifier(t *testing.T) {
	const chunk = 10
	tests := map[string]struct {
		writes    []byte // each write's verifier
		committed uint32
		commit    byte
		// wantWriteErr is the write that fails, from 1; 0 for none.
		wantWriteErr int
		wantCommit   error
	}{
		"the same verifier":              {writes: []byte{1, 1}, committed: unstable, commit: 1},
		"a restart before the commit":    {writes: []byte{1, 1}, committed: unstable, commit: 2, wantCommit: ErrWriteVerifierChanged},
		"a restart between writes":       {writes: []byte{1, 2}, committed: unstable, commit: 2, wantWriteErr: 2},
		"FILE_SYNC writes and a restart": {writes: []byte{1, 2}, committed: fileSync, commit: 3},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			writes := 0
			answer := func(_ context.Context, call nfsserver.Call, w io.Writer) (bool, error) {
				if call.Program != nfs.Nfs3Prog {
					return false, nil
				}
				mu.Lock()
				defer mu.Unlock()
				switch call.Procedure {
				case nfs.NFSProc3Write:
					v := tt.writes[writes]
					writes++
					_, err := w.Write(writeReplyOf(call.XID, chunk, tt.committed, v))
					return true, err
				case nfs.NFSProc3Commit:
					_, err := w.Write(commitReplyOf(call.XID, tt.commit))
					return true, err
				}
				return false, nil
			}
			c := behindHostile(t, answer, 0)
			f, err := c.Open(t.Context(), "dir/file")
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.writes {
				err := c.WriteFileAt(t.Context(), f, make([]byte, chunk), int64(i*chunk))
				if wantErr := i+1 == tt.wantWriteErr; wantErr != errors.Is(err, ErrWriteVerifierChanged) {
					t.Fatalf("write %d: %v, want ErrWriteVerifierChanged: %v", i+1, err, wantErr)
				}
			}
			if err := c.Commit(t.Context(), f); !errors.Is(err, tt.wantCommit) {
				t.Errorf("Commit: %v, want %v", err, tt.wantCommit)
			}
		})
	}
}

// TestTransfersFollowFSInfo: READs and WRITEs ask for what FSINFO allows,
// within the client's bounds.
func TestTransfersFollowFSInfo(t *testing.T) {
	tests := map[string]struct {
		rtmax, wtmax        uint32
		wantRead, wantWrite int
	}{
		"small":          {rtmax: 8 << 10, wtmax: 16 << 10, wantRead: 8 << 10, wantWrite: 16 << 10},
		"huge":           {rtmax: 1 << 30, wtmax: 1 << 30, wantRead: maxTransfer, wantWrite: maxTransfer},
		"absurdly small": {rtmax: 1, wtmax: 0, wantRead: minTransfer, wantWrite: minTransfer},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			largest := map[uint32]int{}
			record := func(call nfsserver.Call) {
				if call.Procedure != nfs.NFSProc3Read && call.Procedure != nfs.NFSProc3Write {
					return
				}
				h := binary.BigEndian.Uint32(call.Args)
				count := int(binary.BigEndian.Uint32(call.Args[4+(h+3)&^3+8:]))
				mu.Lock()
				defer mu.Unlock()
				largest[call.Procedure] = max(largest[call.Procedure], count)
			}
			answer := func(_ context.Context, call nfsserver.Call, w io.Writer) (bool, error) {
				record(call)
				if call.Program != nfs.Nfs3Prog || call.Procedure != nfs.NFSProc3FSInfo {
					return false, nil
				}
				_, err := w.Write(nfsserver.Frame(nfsserver.Success(call.XID, statusOK, 0, tt.rtmax, tt.rtmax, 4096, tt.wtmax, tt.wtmax, 4096, 8192, 0, 0, 0, 1, 0)))
				return true, err
			}
			c := behindHostile(t, answer, 0)
			ctx := t.Context()
			dir, err := c.Open(ctx, "dir")
			if err != nil {
				t.Fatal(err)
			}
			f, err := c.CreateIn(ctx, dir, "big", 0o644)
			if err != nil {
				t.Fatal(err)
			}
			content := randomBytes(3 * maxTransfer)
			if err := c.WriteFileAt(ctx, f, content, 0); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(content))
			if _, err := c.ReadAt(ctx, f, got, 0); err != nil || string(got) != string(content) {
				t.Fatalf("ReadAt: %v, the content read back equal: %v", err, string(got) == string(content))
			}
			mu.Lock()
			defer mu.Unlock()
			want := map[uint32]int{nfs.NFSProc3Read: tt.wantRead, nfs.NFSProc3Write: tt.wantWrite}
			if diff := cmp.Diff(want, largest); diff != "" {
				t.Errorf("largest READ and WRITE (-want +got):\n%s", diff)
			}
		})
	}
}
