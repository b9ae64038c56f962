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
	"io"
	"maps"
	"math/rand/v2"
	"sync"
)

// NFSv3 procedures and statuses (RFC 1813) that Faults answers.
const (
	nfsProcSetAttr = 2
	nfsProcWrite   = 7
	nfsProcMkdir   = 9
	nfsProcSymlink = 10
	nfsProcMknod   = 11
	nfsProcRemove  = 12
	nfsProcRmdir   = 13
	nfsProcRename  = 14
	nfsProcLink    = 15
	nfsProcCommit  = 21
	nfs3ErrNoSpc   = 28
	nfs3ErrROFS    = 30
)

// failureWords is the size in words of the failure body of each NFSv3
// procedure that changes the file system, all of it "attributes absent":
// a wcc_data (pre_op_attr and post_op_attr) for most, RENAME's two (from
// and to), LINK's post_op_attr of the file and then its wcc_data.
var failureWords = map[uint32]int{
	nfsProcSetAttr: 2,
	nfsProcWrite:   2,
	nfsProcCreate:  2,
	nfsProcMkdir:   2,
	nfsProcSymlink: 2,
	nfsProcMknod:   2,
	nfsProcRemove:  2,
	nfsProcRmdir:   2,
	nfsProcRename:  4,
	nfsProcLink:    3,
	nfsProcCommit:  2,
}

// The faults a Faults injects, as Injected counts them.
const (
	FaultIO       = "NFS3ERR_IO"
	FaultNoSpace  = "NFS3ERR_NOSPC"
	FaultReadOnly = "NFS3ERR_ROFS"
	// FaultDropped passes the call on and drops the server's reply, whatever
	// it was: the client's connection is closed, and it never learns the
	// outcome.
	FaultDropped = "dropped"
)

// faultReply is a fault and the status a call is answered with instead of
// passing it on (none for FaultDropped).
type faultReply struct {
	kind   string
	status uint32
}

// faultReplies are what a draw picks from, in order.
var faultReplies = []faultReply{
	{FaultIO, nfs3ErrIO},
	{FaultNoSpace, nfs3ErrNoSpc},
	{FaultReadOnly, nfs3ErrROFS},
	{FaultDropped, 0},
}

// Faults is a Hostile server's Answer that fails a share of the calls that
// change the file system (CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR,
// RENAME, LINK, WRITE, SETATTR, COMMIT), for chaos runs; it passes every
// other call on. Each such call draws whether it fails and how, from a
// generator seeded by Seed, so the n-th of them draws the same on every run
// with that seed. Safe for concurrent use.
type Faults struct {
	// Upstream is the host:port of the server behind the Hostile one, which
	// a dropped call reaches on a connection of its own, without
	// credentials (a server with Options.Secure refuses it).
	Upstream string
	Seed     uint64
	// Rate is the share of those calls that fail, from 0 to 1.
	Rate float64

	mu       sync.Mutex
	rand     *rand.Rand
	injected map[string]int
}

// Answer is the Hostile server's Answer.
func (f *Faults) Answer(ctx context.Context, call Call, client io.Writer) (bool, error) {
	words, ok := failureWords[call.Procedure]
	if call.Program != nfsProgram || call.Version != 3 || !ok {
		return false, nil
	}
	fault, ok := f.draw()
	switch {
	case !ok:
		return false, nil
	case fault.kind == FaultDropped:
		if _, err := exchange(ctx, f.Upstream, call, call.Procedure, call.Args); err != nil {
			return true, err
		}
		return true, errReplyLost
	}
	_, err := client.Write(Frame(Success(call.XID, append([]uint32{fault.status}, make([]uint32, words)...)...)))
	return true, err
}

// draw picks the fault of the next call, if any, and counts it. Each draw
// takes two numbers, so the n-th is the same whatever came before.
func (f *Faults) draw() (faultReply, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rand == nil {
		f.rand = rand.New(rand.NewPCG(f.Seed, f.Seed)) //nolint:gosec // reproducible faults, not secrets
		f.injected = map[string]int{}
	}
	hit := f.rand.Float64() < f.Rate
	fault := faultReplies[f.rand.IntN(len(faultReplies))]
	if hit {
		f.injected[fault.kind]++
	}
	return fault, hit
}

// Injected counts the faults injected so far, by kind.
func (f *Faults) Injected() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	maps.Copy(out, f.injected)
	return out
}
