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
	"errors"
	"fmt"
	"strings"

	"github.com/willscott/go-nfs-client/nfs"
)

// The decoders of the replies this client reads, each from a decoder
// positioned after the procedure's status. They keep nothing of the reply
// but copies of what they return.

// decodeReply checks the RPC header of the reply to call xid and returns
// the decoder of the procedure's result.
func decodeReply(xid uint32, record []byte) (*decoder, error) {
	d := &decoder{buf: record}
	gotXid, msgType, stat := d.uint32(), d.uint32(), d.uint32()
	if d.err != nil || gotXid != xid || msgType != msgReply {
		return nil, fmt.Errorf("malformed RPC reply to call %d", xid)
	}
	if stat == replyDenied {
		return nil, decodeDenied(d)
	}
	if stat != replyAccepted {
		return nil, fmt.Errorf("malformed RPC reply to call %d: reply status %d", xid, stat)
	}
	d.uint32() // the verifier's flavor
	d.opaque("verifier", maxAuthBytes)
	accept := d.uint32()
	if err := d.check("RPC"); err != nil {
		return nil, err
	}
	if accept != acceptSuccess {
		return nil, &RPCError{AcceptStat: accept}
	}
	return d, nil
}

func decodeDenied(d *decoder) error {
	stat, detail := d.uint32(), d.uint32()
	if err := d.check("RPC denial"); err != nil {
		return err
	}
	if stat == rejectAuth {
		return &AuthError{Stat: detail}
	}
	return &RPCError{Mismatch: true}
}

// mountReply reads the root handle of a MNT reply; the flavors that
// follow are not used.
func mountReply(d *decoder) ([]byte, error) {
	fh := d.handle()
	return fh, d.check("MNT")
}

// portReply reads the port of a portmapper GETPORT reply.
func portReply(d *decoder) (uint32, error) {
	port := d.uint32()
	return port, d.check("GETPORT")
}

func getattrReply(d *decoder) (Attr, error) {
	attr := d.fattr()
	return attrOf(&attr), d.check("GETATTR")
}

// lookupReply reads the handle LOOKUP found, and its attributes when the
// server gave them.
func lookupReply(d *decoder) ([]byte, *Attr, error) {
	fh := d.handle()
	fattr, ok := d.postOpAttr()
	if err := d.check("LOOKUP"); err != nil {
		return nil, nil, err
	}
	if !ok {
		return fh, nil, nil
	}
	attr := attrOf(&fattr)
	return fh, &attr, nil
}

// createdReply reads the reply of CREATE and MKDIR: the new file's handle
// and attributes, nil when the server did not give them.
func createdReply(d *decoder, op string) ([]byte, *Attr, error) {
	var fh []byte
	if d.bool() {
		fh = d.handle()
	}
	fattr, ok := d.postOpAttr()
	if err := d.check(op); err != nil {
		return nil, nil, err
	}
	if fh == nil || !ok {
		return nil, nil, nil
	}
	attr := attrOf(&fattr)
	return fh, &attr, nil
}

// writeVerifierBytes is NFS3_WRITEVERFSIZE (RFC 1813).
const writeVerifierBytes = 8

// writeVerifier is a server's writeverf3: it changes when the server
// restarts, and with it what it had not written to stable storage.
type writeVerifier [writeVerifierBytes]byte

// written is what a WRITE reply says: how many of the sent bytes it
// wrote, how durably, and the server's verifier.
type written struct {
	count     int
	committed uint32
	verifier  writeVerifier
}

// writeReply reads how many bytes WRITE wrote, which must be some of the
// sent ones, how durably, and the verifier.
func writeReply(d *decoder, sent int) (written, error) {
	d.wccData()
	count, committed := d.uint32(), d.uint32()
	var w written
	copy(w.verifier[:], d.take(writeVerifierBytes))
	if err := d.check("WRITE"); err != nil {
		return written{}, err
	}
	if count == 0 || int64(count) > int64(sent) {
		return written{}, fmt.Errorf("malformed WRITE reply: %d bytes written of %d sent", count, sent)
	}
	w.count, w.committed = int(count), committed
	return w, nil
}

// commitReply reads the verifier of a COMMIT reply.
func commitReply(d *decoder) (writeVerifier, error) {
	d.wccData()
	var v writeVerifier
	copy(v[:], d.take(writeVerifierBytes))
	return v, d.check("COMMIT")
}

// readReply reads the data READ returned, at most the asked bytes, within
// the reply (callers keeping it copy it), and whether the file ends there.
func readReply(d *decoder, asked int) ([]byte, bool, error) {
	d.postOpAttr()
	count, eof := d.uint32(), d.bool()
	data := d.opaque("READ data", asked)
	if err := d.check("READ"); err != nil {
		return nil, false, err
	}
	if int(count) != len(data) {
		return nil, false, fmt.Errorf("malformed READ reply: count %d for %d bytes of data", count, len(data))
	}
	return data, eof, nil
}

// maxLinkBytes bounds a symlink's target: PATH_MAX of Linux.
const maxLinkBytes = 4096

// readlinkReply reads the target of READLINK, a copy: at most
// maxLinkBytes, neither empty nor holding a NUL, as no local link can.
func readlinkReply(d *decoder) (string, error) {
	d.postOpAttr()
	target := d.opaque("link target", maxLinkBytes)
	if err := d.check("READLINK"); err != nil {
		return "", err
	}
	if err := checkTarget(string(target)); err != nil {
		return "", fmt.Errorf("malformed READLINK reply: %w", err)
	}
	return string(target), nil
}

// checkTarget refuses a link target no local link can have.
func checkTarget(target string) error {
	switch {
	case target == "":
		return errors.New("empty link target")
	case len(target) > maxLinkBytes:
		return fmt.Errorf("link target of %d bytes, more than %d", len(target), maxLinkBytes)
	case strings.Contains(target, "\x00"):
		return errors.New("link target holding a NUL byte")
	}
	return nil
}

// transferSizes are the largest READ and WRITE a server takes, from
// FSINFO's rtmax and wtmax.
type transferSizes struct {
	read, write int
}

// fsinfoReply reads rtmax and wtmax of FSINFO, each brought within
// [minTransfer, maxTransfer]: more than a server takes only costs a short
// transfer, which the callers complete, and a server's word cannot make
// a reply larger than a record or a transfer byte by byte.
func fsinfoReply(d *decoder) (transferSizes, error) {
	d.postOpAttr()
	rtmax := d.uint32()
	d.uint32() // rtpref
	d.uint32() // rtmult
	wtmax := d.uint32()
	if err := d.check("FSINFO"); err != nil {
		return transferSizes{}, err
	}
	clamp := func(size uint32) int { return int(min(max(size, minTransfer), maxTransfer)) }
	return transferSizes{read: clamp(rtmax), write: clamp(wtmax)}, nil
}

// dirPage is one READDIR reply, or as much of it as was taken.
type dirPage struct {
	names []string
	// cookies holds the cookie of each name: where a listing goes on
	// after it.
	cookies []uint64
	// entries counts the entries taken, "." and ".." included.
	entries int
	// last is the cookie of the last entry taken: where the listing
	// goes on.
	last     uint64
	verifier [nfs.NFS3_COOKIEVERFSIZE]byte
	// eof says the listing is complete: the reply said so, and every
	// entry in it was taken.
	eof bool
}

// readDirReply reads one page of a directory's entries, at most limit
// names of them: their names but "." and "..", each a single path
// element, the cookie of the last entry taken and whether the listing is
// complete.
func readDirReply(d *decoder, limit int) (dirPage, error) {
	var page dirPage
	d.postOpAttr()
	copy(page.verifier[:], d.take(nfs.NFS3_COOKIEVERFSIZE))
	for len(page.names) < limit && d.err == nil && d.bool() {
		d.uint64() // file id
		name := d.opaque("name", maxNameBytes)
		page.last = d.uint64()
		if d.err != nil {
			break
		}
		page.entries++
		if n := string(name); n != "." && n != ".." {
			if err := checkName(n); err != nil {
				return dirPage{}, fmt.Errorf("malformed READDIR reply: %w", err)
			}
			page.names = append(page.names, n)
			page.cookies = append(page.cookies, page.last)
		}
	}
	if len(page.names) < limit {
		page.eof = d.bool()
	}
	return page, d.check("READDIR")
}

// checkName refuses a listed name that is not one path element.
func checkName(name string) error {
	if name == "" || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("entry %q is not a file name", name)
	}
	return nil
}

// fsstatReply reads the space figures of FSSTAT; the file counts and
// times that follow are not used.
func fsstatReply(d *decoder) (FSStat, error) {
	d.postOpAttr()
	stat := FSStat{Total: d.uint64(), Free: d.uint64(), Available: d.uint64()}
	return stat, d.check("FSSTAT")
}
