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
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/willscott/go-nfs-client/nfs"
)

// Protocol limits on what a server may send.
const (
	// maxHandleBytes is NFS3_FHSIZE (RFC 1813), also MOUNT's FHSIZE3.
	maxHandleBytes = 64
	// maxNameBytes is the longest name a READDIR entry may have: NAME_MAX
	// of Linux and most servers.
	maxNameBytes = 255
	// maxAuthBytes is MAX_AUTH_BYTES (RFC 5531), the longest verifier.
	maxAuthBytes = 400
)

// errShort is a reply that ends before what it announces.
var errShort = errors.New("reply ends early")

// decoder reads XDR (RFC 4506) from one reply held in memory. Each
// variable length is checked against its protocol limit and the bytes
// left before anything is allocated, so what a server announces costs
// nothing it did not send. The first error sticks and later reads return
// zeros, so a caller checks err once, after reading a whole structure.
type decoder struct {
	buf []byte
	err error
}

// fail records the first error.
func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// take returns the next n bytes, within the reply: no copy.
func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.buf) {
		d.fail(fmt.Errorf("%w: %d bytes announced, %d left", errShort, n, len(d.buf)))
		return nil
	}
	out := d.buf[:n:n]
	d.buf = d.buf[n:]
	return out
}

func (d *decoder) uint32() uint32 {
	b := d.take(4)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

func (d *decoder) uint64() uint64 {
	b := d.take(8)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// bool reads an XDR boolean: 0 or 1, nothing else.
func (d *decoder) bool() bool {
	switch v := d.uint32(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail(fmt.Errorf("boolean of value %d", v))
		return false
	}
}

// opaque reads variable-length opaque data of at most limit bytes, within
// the reply: callers keeping it copy it.
func (d *decoder) opaque(what string, limit int) []byte {
	n := d.uint32()
	if d.err != nil {
		return nil
	}
	if n > uint32(limit) { //nolint:gosec // limits are small constants
		d.fail(fmt.Errorf("%s of %d bytes, more than %d", what, n, limit))
		return nil
	}
	padded := d.take((int(n) + 3) &^ 3)
	if padded == nil {
		return nil
	}
	return padded[:n]
}

// handle reads a file handle, copied out of the reply.
func (d *decoder) handle() []byte {
	fh := d.opaque("file handle", maxHandleBytes)
	if d.err != nil {
		return nil
	}
	return append([]byte(nil), fh...)
}

// fattr reads fattr3.
func (d *decoder) fattr() nfs.Fattr {
	var f nfs.Fattr
	f.Type, f.FileMode, f.Nlink, f.UID, f.GID = d.uint32(), d.uint32(), d.uint32(), d.uint32(), d.uint32()
	f.Filesize, f.Used = d.uint64(), d.uint64()
	f.SpecData = [2]uint32{d.uint32(), d.uint32()}
	f.FSID, f.Fileid = d.uint64(), d.uint64()
	for _, t := range []*nfs.NFS3Time{&f.Atime, &f.Mtime, &f.Ctime} {
		t.Seconds, t.Nseconds = d.uint32(), d.uint32()
	}
	return f
}

// postOpAttr reads post_op_attr: attributes when the server gave them.
func (d *decoder) postOpAttr() (nfs.Fattr, bool) {
	if !d.bool() {
		return nfs.Fattr{}, false
	}
	return d.fattr(), true
}

// wccData reads wcc_data, which nothing here uses.
func (d *decoder) wccData() {
	const preOpAttrBytes = 8 + 8 + 8 // size, mtime, ctime
	if d.bool() {
		d.take(preOpAttrBytes)
	}
	d.postOpAttr()
}

// check returns the error of the reading so far, naming the reply.
func (d *decoder) check(op string) error {
	if d.err != nil {
		return fmt.Errorf("malformed %s reply: %w", op, d.err)
	}
	return nil
}
