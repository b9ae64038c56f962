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
	"sync/atomic"
	"time"
)

// Words of the worst replies: the NFS program and its READDIR procedure,
// a length of 4 GiB less a byte, and FILE_SYNC.
const (
	nfsProcReadDir = 16
	hugeLength     = 0xffffffff
	fileSync       = 2
)

// worstAttacks is how many attacks WorstReplies takes turns with.
const worstAttacks = 6

// WorstReplies is a Hostile server's Answer that takes over every call,
// answering each with the next of its attacks in turn: a verifier of
// 4 GiB; a MNT or LOOKUP handle of 4 GiB; a READDIR page of one new entry
// that never ends (a name of 4 GiB to any other call); a WRITE count of
// 4 GiB; a reply of 200 KiB trickled a byte a second; a flood of replies
// of 64 KiB to other calls. The last two go on until the client hangs up.
type WorstReplies struct {
	calls atomic.Uint64
}

// Answer is the Hostile server's Answer.
func (w *WorstReplies) Answer(ctx context.Context, call Call, client io.Writer) (bool, error) {
	n := w.calls.Add(1)
	var err error
	switch n % worstAttacks {
	case 1:
		_, err = client.Write(Frame(Words(call.XID, rpcReply, rpcMsgAccepted, 0, hugeLength)))
	case 2:
		_, err = client.Write(Frame(Success(call.XID, 0, hugeLength)))
	case 3:
		_, err = client.Write(Frame(endlessPage(call, uint32(n)))) //nolint:gosec // wraps harmlessly
	case 4:
		_, err = client.Write(Frame(Success(call.XID, 0, 0, 0, hugeLength, fileSync, 0, 0)))
	case 5:
		err = trickle(ctx, call, client)
	default:
		err = flood(call, client)
	}
	return true, err
}

// Rounds is how many times every attack has been sent, at least.
func (w *WorstReplies) Rounds() uint64 { return w.calls.Load() / worstAttacks }

// endlessPage is a READDIR page of one entry, its cookie n, that is not
// the last; any other call gets a READDIR entry whose name is of 4 GiB.
func endlessPage(call Call, n uint32) []byte {
	const name = 0x6e6e6e6e // "nnnn"
	if call.Program == nfsProgram && call.Procedure == nfsProcReadDir {
		return Success(call.XID, 0, 0, 0, 0, 1, 0, n, 4, name, 0, n, 0, 0)
	}
	return Success(call.XID, 0, 0, 0, 0, 1, 0, 1, hugeLength)
}

// trickle announces a reply of 200 KiB and sends a byte of it a second.
func trickle(ctx context.Context, call Call, client io.Writer) error {
	if _, err := client.Write(Words(lastFragment|200<<10, call.XID)); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if _, err := client.Write([]byte{0}); err != nil {
			return err
		}
	}
}

// flood sends replies of 64 KiB to another call.
func flood(call Call, client io.Writer) error {
	record := Frame(append(Success(call.XID+1, 0), make([]byte, 64<<10)...))
	for {
		if _, err := client.Write(record); err != nil {
			return err
		}
	}
}
