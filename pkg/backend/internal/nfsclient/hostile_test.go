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
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/willscott/go-nfs-client/nfs"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
)

// The heap a call may grow by whatever a server sends: a reply record and
// what it decodes to, a few times over as buffers grow. A listing may
// keep maxListingBytes of names besides.
const (
	callHeapBound    = 16 << 20
	listingHeapBound = callHeapBound + 2*maxListingBytes
)

// Lengths a hostile reply announces: 4 GiB less a byte, and 2 GiB less
// 4 bytes, below the 2 GiB that go-xdr refuses by itself.
const (
	hugeLength   = 0xffffffff
	bigLength    = 1<<31 - 4
	bigLengthMsg = "2147483644 bytes"
)

// behindHostile serves a folder holding a directory "dir" with a file
// "dir/file" behind a Hostile server that answers as answer says, and
// returns a client of it that has not connected yet.
func behindHostile(t *testing.T, answer nfsserver.Answer, timeout time.Duration) *Client {
	t.Helper()
	e := serve(t, nfsserver.Options{})
	if err := os.Mkdir(filepath.Join(e.dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "dir", "file"), []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := front(t, e, answer)
	// Unreserved: the many connections a hostile server ends would keep the
	// few reserved ports in TIME_WAIT, away from the tests that need one.
	c := New(Options{Server: h.Host(), Port: h.Port(), Path: "/", Timeout: timeout, SourcePort: Unreserved})
	t.Cleanup(c.Close)
	return c
}

// front starts a Hostile server in front of e's that answers as answer
// says, until the test ends.
func front(t *testing.T, e *export, answer nfsserver.Answer) *nfsserver.Hostile {
	t.Helper()
	h, err := nfsserver.StartHostile(t.Context(), nfsserver.HostileOptions{Upstream: e.server.Addr(), Answer: answer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Stop(); err != nil {
			t.Error(err)
		}
	})
	return h
}

// answering answers the calls of one procedure of prog with what reply
// returns, and passes the others on.
func answering(prog, proc uint32, reply func(call nfsserver.Call) []byte) nfsserver.Answer {
	return func(_ context.Context, call nfsserver.Call, w io.Writer) (bool, error) {
		if call.Program != prog || call.Procedure != proc {
			return false, nil
		}
		_, err := w.Write(reply(call))
		return true, err
	}
}

// heap is what a call cost the heap.
type heap struct {
	// grown is how much the heap the process holds from the system grew.
	grown int64
	// allocated is all the call allocated, garbage included: a bound on
	// the peak of its heap.
	allocated int64
}

func measureHeap(f func()) heap {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return heap{
		grown:     int64(after.HeapSys) - int64(before.HeapSys),       //nolint:gosec // heaps are far below 2^63
		allocated: int64(after.TotalAlloc) - int64(before.TotalAlloc), //nolint:gosec // as are allocations
	}
}

// Entries of READDIR pages a hostile server makes up.
func dirEntries(first uint64, count int, nameLen int) []byte {
	var out []byte
	for i := range count {
		cookie := first + uint64(i)
		out = append(out, nfsserver.Words(1, 0, uint32(i))...)
		name := strings.Repeat("n", nameLen)
		out = append(out, nfsserver.Words(uint32(len(name)))...) //nolint:gosec // small
		out = append(out, name...)
		out = append(out, make([]byte, (4-len(name)%4)%4)...)
		out = binary.BigEndian.AppendUint64(out, cookie)
	}
	return out
}

// readDirPage is a whole READDIR reply: no attributes, a zero verifier,
// the entries and eof.
func readDirPage(xid uint32, entries []byte, eof uint32) []byte {
	reply := nfsserver.Success(xid, statusOK, 0, 0, 0)
	reply = append(reply, entries...)
	return nfsserver.Frame(append(reply, nfsserver.Words(0, eof)...))
}

type hostileCase struct {
	answer nfsserver.Answer
	call   func(ctx context.Context, c *Client) error
	bound  int64
	// timeout is the client's; DefaultTimeout when 0.
	timeout time.Duration
	// churns is a server sending until the deadline: what the call
	// allocates is garbage churned as long as it lasts, and only the
	// heap's growth is bounded.
	churns bool
	// want is what the error says, besides being one.
	want string
}

func hugeLengthCases() map[string]hostileCase {
	lstat := func(ctx context.Context, c *Client) error { _, err := c.Lstat(ctx, "dir/file"); return err }
	return map[string]hostileCase{
		"verifier of 4 GiB in a 20-byte reply": {
			answer: answering(nfs.MountProg, nfs.MountProc3MNT, func(call nfsserver.Call) []byte {
				return nfsserver.Frame(nfsserver.Words(call.XID, 1, 0, 0, hugeLength))
			}),
			call: lstat, want: "verifier of 4294967295 bytes",
		},
		"MNT handle of 4 GiB": {
			answer: answering(nfs.MountProg, nfs.MountProc3MNT, func(call nfsserver.Call) []byte {
				return nfsserver.Frame(nfsserver.Success(call.XID, 0, hugeLength))
			}),
			call: lstat, want: "file handle of 4294967295 bytes",
		},
		"MNT handle of 65 bytes": {
			answer: answering(nfs.MountProg, nfs.MountProc3MNT, func(call nfsserver.Call) []byte {
				return nfsserver.Frame(append(nfsserver.Success(call.XID, 0, 65), make([]byte, 68)...))
			}),
			call: lstat, want: "file handle of 65 bytes",
		},
		"LOOKUP handle of 4 GiB": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Lookup, func(call nfsserver.Call) []byte {
				return nfsserver.Frame(nfsserver.Success(call.XID, statusOK, hugeLength))
			}),
			call: lstat, want: "file handle of 4294967295 bytes",
		},
		"READDIR name of 4 GiB": {
			answer: answering(nfs.Nfs3Prog, procReadDir, func(call nfsserver.Call) []byte {
				return nfsserver.Frame(nfsserver.Success(call.XID, statusOK, 0, 0, 0, 1, 0, 1, hugeLength))
			}),
			call: func(ctx context.Context, c *Client) error { _, err := c.ReadDir(ctx, "dir"); return err },
			want: "name of 4294967295 bytes",
		},
		"verifier of 2 GiB": {
			answer: answering(nfs.MountProg, nfs.MountProc3MNT, func(call nfsserver.Call) []byte {
				return nfsserver.Frame(nfsserver.Words(call.XID, 1, 0, 0, bigLength))
			}),
			call: lstat, want: "verifier of " + bigLengthMsg,
		},
		"LOOKUP handle of 2 GiB": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Lookup, func(call nfsserver.Call) []byte {
				return nfsserver.Frame(nfsserver.Success(call.XID, statusOK, bigLength))
			}),
			call: lstat, want: "file handle of " + bigLengthMsg,
		},
		"READDIR name of 2 GiB": {
			answer: answering(nfs.Nfs3Prog, procReadDir, func(call nfsserver.Call) []byte {
				return nfsserver.Frame(nfsserver.Success(call.XID, statusOK, 0, 0, 0, 1, 0, 1, bigLength))
			}),
			call: func(ctx context.Context, c *Client) error { _, err := c.ReadDir(ctx, "dir"); return err },
			want: "name of " + bigLengthMsg,
		},
		"READ data of 4 GiB": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Read, func(call nfsserver.Call) []byte {
				return nfsserver.Frame(nfsserver.Success(call.XID, statusOK, 0, hugeLength, 0, hugeLength))
			}),
			call: func(ctx context.Context, c *Client) error { _, err := c.ReadFile(ctx, "dir/file", 100); return err },
			want: "READ data of 4294967295 bytes",
		},
	}
}

// A length a server announces costs nothing it did not send: each reply
// fails its call with the heap grown by no more than a call may.
func TestHostileReplies(t *testing.T) {
	for name, tc := range hugeLengthCases() {
		t.Run(name, func(t *testing.T) {
			tc.run(t)
		})
	}
}

func (tc hostileCase) run(t *testing.T) {
	t.Helper()
	c := behindHostile(t, tc.answer, tc.timeout)
	bound := tc.bound
	if bound == 0 {
		bound = callHeapBound
	}
	var err error
	cost := measureHeap(func() { err = tc.call(t.Context(), c) })
	t.Logf("%v; the heap grew by %d KiB, %d KiB allocated", err, cost.grown>>10, cost.allocated>>10)
	if err == nil || !strings.Contains(err.Error(), tc.want) {
		t.Errorf("call: %v, want an error saying %q", err, tc.want)
	}
	if cost.grown > bound {
		t.Errorf("the heap grew by %d MiB, more than %d MiB", cost.grown>>20, bound>>20)
	}
	if !tc.churns && cost.allocated > bound {
		t.Errorf("the call allocated %d MiB, more than %d MiB", cost.allocated>>20, bound>>20)
	}
}

func listingCases() map[string]hostileCase {
	readDir := func(ctx context.Context, c *Client) error { _, err := c.ReadDir(ctx, "dir"); return err }
	var next uint64 = 1
	// Pages of 800 names of 255 bytes fit a record.
	const pageNames, nameLen = 800, maxNameBytes
	return map[string]hostileCase{
		"READDIR that never ends": {
			answer: answering(nfs.Nfs3Prog, procReadDir, func(call nfsserver.Call) []byte {
				page := readDirPage(call.XID, dirEntries(next, pageNames, nameLen), 0)
				next += pageNames
				return page
			}),
			call: readDir, bound: listingHeapBound, want: "more than", churns: true,
		},
		"READDIR of dot entries that never ends": {
			answer: answering(nfs.Nfs3Prog, procReadDir, func(call nfsserver.Call) []byte {
				var entries []byte
				for range pageNames {
					entries = append(entries, nfsserver.Words(1, 0, 1, 1, '.'<<24)...)
					entries = binary.BigEndian.AppendUint64(entries, next)
					next++
				}
				return readDirPage(call.XID, entries, 0)
			}),
			call: readDir, bound: listingHeapBound, want: "more than", churns: true,
		},
		"READDIR whose cookie repeats": {
			answer: answering(nfs.Nfs3Prog, procReadDir, func(call nfsserver.Call) []byte {
				return readDirPage(call.XID, dirEntries(7, 1, 8), 0)
			}),
			call: readDir, want: "does not move on",
		},
		"READDIR going back to its first cookie": {
			answer: answering(nfs.Nfs3Prog, procReadDir, func(call nfsserver.Call) []byte {
				return readDirPage(call.XID, dirEntries(0, 1, 8), 0)
			}),
			call: readDir, want: "does not move on",
		},
		"READDIR with no entries and no end": {
			answer: answering(nfs.Nfs3Prog, procReadDir, func(call nfsserver.Call) []byte {
				return readDirPage(call.XID, nil, 0)
			}),
			call: readDir, want: "does not move on",
		},
		"READDIR name holding a slash": {
			answer: answering(nfs.Nfs3Prog, procReadDir, func(call nfsserver.Call) []byte {
				entry := append(nfsserver.Words(1, 0, 1, 4), "../x"...)
				return readDirPage(call.XID, binary.BigEndian.AppendUint64(entry, 1), 1)
			}),
			call: readDir, want: "is not a file name",
		},
	}
}

// A listing ends, in an error when the server never ends it.
func TestHostileListings(t *testing.T) {
	for name, tc := range listingCases() {
		t.Run(name, func(t *testing.T) {
			tc.run(t)
		})
	}
}

// transferCases are WRITE and READ replies that disagree with the call.
func transferCases() map[string]hostileCase {
	writeReply := func(count uint32) func(call nfsserver.Call) []byte {
		return func(call nfsserver.Call) []byte {
			const fileSync = 2
			return nfsserver.Frame(nfsserver.Success(call.XID, statusOK, 0, 0, count, fileSync, 0, 0))
		}
	}
	write := func(ctx context.Context, c *Client) error {
		return c.WriteAt(ctx, "dir/file", 0, make([]byte, 3*ioChunk))
	}
	return map[string]hostileCase{
		"WRITE count of three chunks for one": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Write, writeReply(3*ioChunk)),
			call:   write, want: "98304 bytes written of 32768 sent",
		},
		"WRITE count of one more than sent": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Write, writeReply(ioChunk+1)),
			call:   write, want: "32769 bytes written of 32768 sent",
		},
		"WRITE of nothing": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Write, writeReply(0)),
			call:   write, want: "0 bytes written",
		},
		"READ of more than asked": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Read, func(call nfsserver.Call) []byte {
				reply := nfsserver.Success(call.XID, statusOK, 0, 200, 1, 200)
				return nfsserver.Frame(append(reply, make([]byte, 200)...))
			}),
			call: func(ctx context.Context, c *Client) error { _, err := c.ReadFile(ctx, "dir/file", 100); return err },
			want: "READ data of 200 bytes, more than 101",
		},
		"READ count that is not its data's": {
			answer: answering(nfs.Nfs3Prog, nfs.NFSProc3Read, func(call nfsserver.Call) []byte {
				reply := nfsserver.Success(call.XID, statusOK, 0, 50, 1, 4)
				return nfsserver.Frame(append(reply, "data"...))
			}),
			call: func(ctx context.Context, c *Client) error { _, err := c.ReadFile(ctx, "dir/file", 100); return err },
			want: "count 50 for 4 bytes",
		},
	}
}

// A WRITE or READ whose count is not what was asked for fails.
func TestHostileTransfers(t *testing.T) {
	for name, tc := range transferCases() {
		t.Run(name, func(t *testing.T) {
			tc.run(t)
		})
	}
}

// endless answers LOOKUP with the chunks next returns, written until the
// client stops reading or the server stops, every interval.
func endless(interval time.Duration, next func(call nfsserver.Call) []byte) nfsserver.Answer {
	return func(ctx context.Context, call nfsserver.Call, w io.Writer) (bool, error) {
		if call.Program != nfs.Nfs3Prog || call.Procedure != nfs.NFSProc3Lookup {
			return false, nil
		}
		for {
			if _, err := w.Write(next(call)); err != nil {
				return true, err
			}
			select {
			case <-ctx.Done():
				return true, ctx.Err()
			case <-time.After(interval):
			}
		}
	}
}

func floodCases() map[string]hostileCase {
	lstat := func(ctx context.Context, c *Client) error { _, err := c.Lstat(ctx, "dir/file"); return err }
	const deadline = "deadline exceeded"
	chunk := make([]byte, 64<<10)
	return map[string]hostileCase{
		"reply trickling a byte at a time": {
			answer: func() nfsserver.Answer {
				sent := 0
				return endless(10*time.Millisecond, func(call nfsserver.Call) []byte {
					sent++
					if sent == 1 {
						// A record announcing 200 KiB, then one byte at a time.
						return nfsserver.Words(lastFragment|200<<10, call.XID)
					}
					return []byte{0}
				})
			}(),
			call: lstat, timeout: time.Second, want: deadline, churns: true,
		},
		// The client has one call outstanding on a connection, so a reply
		// to any other is the server's invention: reading them until the
		// deadline would spend a core on each side for as long.
		"flood of replies to other calls": {
			answer: endless(0, func(call nfsserver.Call) []byte {
				return nfsserver.Frame(append(nfsserver.Success(call.XID+1, statusOK), chunk...))
			}),
			call: lstat, want: "replies to calls not made",
		},
		"flood of fragments, none the last": {
			answer: endless(0, func(nfsserver.Call) []byte {
				return append(nfsserver.Words(uint32(len(chunk))), chunk...) //nolint:gosec // small
			}),
			call: lstat, want: "record of more than",
		},
		"flood of empty fragments": {
			answer: endless(0, func(nfsserver.Call) []byte { return nfsserver.Words(0, 0, 0, 0) }),
			call:   lstat, want: "fragments in one record",
		},
		"fragment announcing 2 GiB": {
			answer: endless(time.Hour, func(call nfsserver.Call) []byte {
				return nfsserver.Words(lastFragment|(1<<31-1), call.XID)
			}),
			call: lstat, want: "record of more than",
		},
	}
}

// A server that trickles or floods fails the call by its deadline, or
// sooner, its replies bounded.
func TestHostileFloodsAndTrickles(t *testing.T) {
	for name, tc := range floodCases() {
		t.Run(name, func(t *testing.T) {
			tc.run(t)
		})
	}
}

// The worst replies one after the other, on one client that reconnects
// and mounts again after each: every call fails, by its deadline at the
// latest, and the heap stays bounded.
func TestWorstReplies(t *testing.T) {
	var worst nfsserver.WorstReplies
	c := behindHostile(t, worst.Answer, time.Second)
	calls := 0
	cost := measureHeap(func() {
		for worst.Rounds() < 2 {
			calls++
			if _, err := c.ReadDir(t.Context(), "dir"); err == nil {
				t.Fatal("ReadDir succeeded against the worst replies")
			}
		}
	})
	t.Logf("%d calls failed; the heap grew by %d KiB", calls, cost.grown>>10)
	if cost.grown > callHeapBound {
		t.Errorf("the heap grew by %d MiB, more than %d MiB", cost.grown>>20, callHeapBound>>20)
	}
}
