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
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Words of CREATE and LOOKUP (RFC 1813) that a CreateScript reads and
// writes.
const (
	nfsProcLookup   = 3
	nfsProcCreate   = 8
	nfs3OK          = 0
	nfs3ErrIO       = 5
	nfs3ErrExist    = 17
	createUnchecked = 0
	createGuarded   = 1
	createExclusive = 2
	// fattrBytes is the size of fattr3; the file's type is its first word,
	// its size the two after the type, mode, nlink, uid and gid, and its
	// mtime the two after the size, used, rdev, fsid, fileid and atime.
	fattrBytes       = 84
	fattrSizeOffset  = 20
	fattrMtimeOffset = 68
	regularFile      = 1
)

// upstreamTimeout bounds one exchange with the server of a CreateScript or
// a Faults.
const upstreamTimeout = 10 * time.Second

// errReplyLost ends a connection whose reply a CreateScript drops.
var errReplyLost = errors.New("reply lost on purpose")

// Create is a CREATE that a CreateScript saw.
type Create struct {
	// Name is the name created in its directory.
	Name string
	// How is createmode3: 0 UNCHECKED, 1 GUARDED, 2 EXCLUSIVE.
	How uint32
	// Verifier is an EXCLUSIVE CREATE's createverf3.
	Verifier [8]byte
	// SetsMode says that an UNCHECKED or GUARDED CREATE carries a mode.
	SetsMode bool
}

// CreateScript is a Hostile server's Answer that scripts how the server
// behind it answers CREATE, for tests of creates that must be safe to
// retry; it passes every other call on. Its Upstream is the Hostile
// server's: it reaches the server on connections of its own, one per
// exchange. Safe for concurrent use.
type CreateScript struct {
	// Upstream is the host:port of the server behind the Hostile one.
	Upstream string
	// Exclusive carries out EXCLUSIVE CREATEs, which go-nfs answers with
	// NFS3ERR_NOTSUPP, as RFC 1813 says and knfsd does: the file is made
	// GUARDED without attributes and its verifier kept, and a CREATE of a
	// name that exists with the verifier that made it, while the file is as
	// made (empty, its mtime unchanged), is answered with success for that
	// file, as a retry is. Without it, EXCLUSIVE CREATEs are passed on.
	Exclusive bool
	// LoseReplies is how many successful replies to CREATEs are lost, from
	// the first: the connection is closed instead, the file made.
	LoseReplies int
	// FailCreate, when set, picks the names whose UNCHECKED or GUARDED
	// CREATEs are carried out and then answered with NFS3ERR_IO, as go-nfs
	// answers one whose attributes it cannot set on the file it made.
	FailCreate func(name string) bool

	mu sync.Mutex
	// made holds the files EXCLUSIVE made, by their diropargs.
	made map[string]exclusiveFile
	lost int
	seen []Create
}

// exclusiveFile is a file an EXCLUSIVE CREATE made: its verifier, and its
// mtime as made, which a SETATTR of its times or a WRITE changes.
type exclusiveFile struct {
	verifier [8]byte
	mtime    string
}

// Creates returns the CREATEs the script saw, in order.
func (s *CreateScript) Creates() []Create {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Create(nil), s.seen...)
}

// Answer is the Hostile server's Answer.
func (s *CreateScript) Answer(ctx context.Context, call Call, client io.Writer) (bool, error) {
	if call.Program != nfsProgram || call.Procedure != nfsProcCreate {
		return false, nil
	}
	create, diropargs, ok := parseCreate(call.Args)
	if !ok {
		// The server refuses what does not parse.
		return false, nil
	}
	s.saw(create)
	args := call.Args
	if create.How == createExclusive {
		if !s.Exclusive {
			return false, nil
		}
		args = append(append([]byte(nil), diropargs...), Words(createGuarded, 0, 0, 0, 0, 0, 0)...)
	}
	reply, err := exchange(ctx, s.Upstream, call, call.Procedure, args)
	if err != nil {
		return true, err
	}
	made := replyStatus(reply) == nfs3OK
	switch {
	case create.How == createExclusive && made:
		s.keep(diropargs, exclusiveFile{verifier: create.Verifier, mtime: createdMtime(reply)})
	case create.How == createExclusive && replyStatus(reply) == nfs3ErrExist:
		if reply, err = s.retried(ctx, call, diropargs, create.Verifier); err != nil {
			return true, err
		}
	case made && s.FailCreate != nil && s.FailCreate(create.Name):
		reply = Success(call.XID, nfs3ErrIO, 0, 0)
	}
	if replyStatus(reply) == nfs3OK && s.loseReply() {
		return true, errReplyLost
	}
	_, err = client.Write(Frame(reply))
	return true, err
}

func (s *CreateScript) saw(create Create) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, create)
}

func (s *CreateScript) keep(diropargs []byte, f exclusiveFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.made == nil {
		s.made = map[string]exclusiveFile{}
	}
	s.made[string(diropargs)] = f
}

func (s *CreateScript) madeBy(diropargs []byte, verifier [8]byte) (exclusiveFile, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.made[string(diropargs)]
	return f, ok && f.verifier == verifier
}

// loseReply says whether to lose a successful reply to a CREATE.
func (s *CreateScript) loseReply() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost >= s.LoseReplies {
		return false
	}
	s.lost++
	return true
}

// retried answers an EXCLUSIVE CREATE of an existing name that its
// verifier made with success for that file, found with LOOKUP, while the
// file is as made; any other is answered NFS3ERR_EXIST, as knfsd answers it.
func (s *CreateScript) retried(ctx context.Context, call Call, diropargs []byte, verifier [8]byte) ([]byte, error) {
	exist := Success(call.XID, nfs3ErrExist, 0, 0)
	kept, ok := s.madeBy(diropargs, verifier)
	if !ok {
		return exist, nil
	}
	reply, err := exchange(ctx, s.Upstream, call, nfsProcLookup, diropargs)
	if err != nil {
		return nil, err
	}
	handle, attrs, ok := lookupResult(reply)
	if !ok || len(attrs) != 4+fattrBytes {
		return exist, nil
	}
	fattr := attrs[4:]
	if binary.BigEndian.Uint32(fattr) != regularFile || binary.BigEndian.Uint64(fattr[fattrSizeOffset:]) != 0 ||
		string(fattr[fattrMtimeOffset:fattrMtimeOffset+8]) != kept.mtime {
		return exist, nil
	}
	out := Success(call.XID, nfs3OK, 1)
	out = append(out, handle...)
	out = append(out, attrs...)
	return append(out, Words(0, 0)...), nil // dir_wcc: no attributes
}

// exchange sends procedure proc of call's program with args to the
// server at upstream, on a connection of its own, with call's xid and no
// credentials, and returns its reply.
func exchange(ctx context.Context, upstream string, call Call, proc uint32, args []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, upstreamTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", upstream)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the server: %w", err)
	}
	defer func() { _ = conn.Close() }()
	defer context.AfterFunc(ctx, func() { _ = conn.Close() })()
	const rpcVersion, authNull = 2, 0
	record := Words(call.XID, rpcCall, rpcVersion, call.Program, call.Version, proc, authNull, 0, authNull, 0)
	if _, err := conn.Write(Frame(append(record, args...))); err != nil {
		return nil, fmt.Errorf("cannot send to the server: %w", err)
	}
	reply, err := readRecord(bufio.NewReader(conn), maxCallBytes)
	if err != nil {
		return nil, fmt.Errorf("cannot read the server's reply: %w", err)
	}
	return reply, nil
}

// xdrReader reads XDR words and opaques from a buffer; ok turns false for
// good at the first read past its end.
type xdrReader struct {
	buf []byte
	ok  bool
}

func (r *xdrReader) word() uint32 {
	if !r.ok || len(r.buf) < 4 {
		r.ok = false
		return 0
	}
	w := binary.BigEndian.Uint32(r.buf)
	r.buf = r.buf[4:]
	return w
}

// opaque returns a variable-length opaque as it is encoded: its length,
// its bytes and their padding.
func (r *xdrReader) opaque() []byte {
	start := r.buf
	n := r.word()
	padded := (int(n) + 3) &^ 3
	if !r.ok || padded > len(r.buf) || n > maxCallBytes {
		r.ok = false
		return nil
	}
	r.buf = r.buf[padded:]
	return start[:4+padded]
}

// take returns the next n bytes.
func (r *xdrReader) take(n int) []byte {
	if !r.ok || n > len(r.buf) {
		r.ok = false
		return nil
	}
	out := r.buf[:n]
	r.buf = r.buf[n:]
	return out
}

// parseCreate reads CREATE3args: the directory's handle and the name
// (diropargs, as encoded, which LOOKUP takes too), the mode and what
// follows it.
func parseCreate(args []byte) (Create, []byte, bool) {
	r := &xdrReader{buf: args, ok: true}
	r.opaque()
	name := r.opaque()
	diropargs := args[:len(args)-len(r.buf)]
	create := Create{How: r.word()}
	if create.How == createExclusive {
		copy(create.Verifier[:], r.take(8))
	} else {
		create.SetsMode = r.word() == 1
	}
	if !r.ok {
		return Create{}, nil, false
	}
	create.Name = string(name[4 : 4+binary.BigEndian.Uint32(name)])
	return create, diropargs, true
}

// resultOf returns the procedure's result of an accepted, successful RPC
// reply: what follows the header and the verifier.
func resultOf(reply []byte) *xdrReader {
	r := &xdrReader{buf: reply, ok: true}
	r.word() // xid
	if r.word() != rpcReply || r.word() != rpcMsgAccepted {
		r.ok = false
	}
	r.word() // the verifier's flavor
	r.opaque()
	if r.word() != rpcSuccess {
		r.ok = false
	}
	return r
}

// replyStatus is the NFS status of a reply, or NFS3ERR_IO for one that is
// not an accepted, successful RPC reply.
func replyStatus(reply []byte) uint32 {
	r := resultOf(reply)
	status := r.word()
	if !r.ok {
		return nfs3ErrIO
	}
	return status
}

// createdMtime reads the new file's mtime from CREATE3resok, as bytes;
// empty when the reply gives no attributes.
func createdMtime(reply []byte) string {
	r := resultOf(reply)
	r.word() // status
	if r.word() == 1 {
		r.opaque()
	}
	if r.word() != 1 {
		return ""
	}
	fattr := r.take(fattrBytes)
	if !r.ok {
		return ""
	}
	return string(fattr[fattrMtimeOffset : fattrMtimeOffset+8])
}

// lookupResult reads LOOKUP3resok: the handle and the file's
// post_op_attr, both as encoded.
func lookupResult(reply []byte) ([]byte, []byte, bool) {
	r := resultOf(reply)
	if r.word() != nfs3OK {
		return nil, nil, false
	}
	handle := r.opaque()
	attrs := r.buf
	if r.word() == 1 {
		r.take(fattrBytes)
	}
	attrs = attrs[:len(attrs)-len(r.buf)]
	return handle, attrs, r.ok
}
