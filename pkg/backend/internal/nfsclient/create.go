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
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"

	"github.com/willscott/go-nfs-client/nfs"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/pkg/backend"
)

// CREATE's createmode3 and the size of its createverf3 (RFC 1813).
const (
	createGuarded       = uint32(1)
	createExclusive     = uint32(2)
	createVerifierBytes = 8
)

// createVerifier3 is the createverf3 of an EXCLUSIVE CREATE.
type createVerifier3 [createVerifierBytes]byte

// CreateFile makes the new file name with data and exactly perm; an
// existing name fails with fs.ErrExist (write a temporary name and Rename
// it over to replace a file). It is meant for small files.
//
// It is safe to retry. Where the server supports it, CREATE is EXCLUSIVE
// with a verifier derived from name, data and perm: a retry of the same
// file (a lost reply sent again on a new connection, or a later call by
// this process or another) is answered with success for the file the
// first try made, as long as that file was not written since, and a file
// of other data or mode fails with fs.ErrExist. A server that answers
// NFS3ERR_NOTSUPP to it (go-nfs) is asked GUARDED from then on. Either way
// CREATE carries no attributes: SETATTR sets the mode after it, so a
// server that cannot set a mode makes the file, fails that call and says
// so, with an error wrapping backend.ErrModeRefused, rather than failing
// the CREATE of a file it made. A file made that cannot be filled is
// removed again while the server answers.
func (c *Client) CreateFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	verifier := createVerifier(name, data, perm)
	return c.do(ctx, func(ctx context.Context) error {
		dir, base, err := c.parent(ctx, name)
		if err != nil {
			return err
		}
		f, err := c.create(ctx, dir.fh, base, name, verifier, c.createGuarded)
		if err != nil {
			return err
		}
		if err := c.fill(ctx, f, name, data, perm); err != nil {
			return c.unmake(ctx, dir.fh, base, name, err)
		}
		return nil
	})
}

// RewriteFile replaces the content of the existing regular file name with
// data and gives it exactly perm: how a caller reuses a file that an
// earlier CreateFile made and could not fill, as when the server made it
// and answered with an error. A link or anything else at name is refused.
func (c *Client) RewriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	return c.do(ctx, func(ctx context.Context) error {
		f, err := c.walk(ctx, name)
		if err != nil {
			return err
		}
		if !f.attr.Mode.IsRegular() {
			return fmt.Errorf("cannot rewrite %q: it is %s: %w", name, typeName(f.attr.Mode), fs.ErrInvalid)
		}
		return c.fill(ctx, made{file: f}, name, data, perm)
	})
}

// createVerifier is the createverf3 of an EXCLUSIVE CREATE of name with data
// and perm: the same for every try of that file, by any process, and
// different for another content, so that two callers creating one name for
// different files never both succeed.
func createVerifier(name string, data []byte, perm fs.FileMode) createVerifier3 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(binary.BigEndian.AppendUint32(nil, backend.UnixMode(perm)))
	h.Write(data)
	var verifier createVerifier3
	copy(verifier[:], h.Sum(nil))
	return verifier
}

// made is a file that CreateFile made, or one that RewriteFile reuses.
type made struct {
	file
	// verifierInTimes says that EXCLUSIVE made it: the server keeps the
	// verifier in its times (RFC 1813) until a SETATTR sets them.
	verifierInTimes bool
}

// create makes the file base in the directory dir, with no attributes,
// EXCLUSIVE unless the server does not support it.
func (c *Client) create(ctx context.Context, dir []byte, base, name string, verifier createVerifier3, guarded guardedCreate) (made, error) {
	if !c.guardedOnly {
		made, err := c.createExclusive(ctx, dir, base, name, verifier)
		var status *StatusError
		if !errors.As(err, &status) || status.Status != statusNotSupp {
			return made, err
		}
		c.guardedOnly = true
		klog.FromContext(ctx).V(2).Info("NFS server does not support exclusive CREATE, creating GUARDED from now on", "server", c.nfsAddr, "path", c.opts.Path)
	}
	return guarded(ctx, dir, base, name)
}

// guardedCreate makes the file base in the directory dir with a GUARDED
// CREATE carrying no attributes.
type guardedCreate func(ctx context.Context, dir []byte, base, name string) (made, error)

// createGuarded sends a GUARDED CREATE once: when its reply is lost, the
// call fails and the file may be made.
func (c *Client) createGuarded(ctx context.Context, dir []byte, base, name string) (made, error) {
	d, err := c.call(ctx, nfs.NFSProc3Create, "CREATE", name, nfs.Diropargs3{FH: dir, Filename: base}, createGuarded, nfs.Sattr3{})
	if err != nil {
		return made{}, c.taken(ctx, dir, name, err)
	}
	f, err := c.created(ctx, d, "CREATE", dir, name)
	return made{file: f}, err
}

// createGuardedAgain sends a GUARDED CREATE, and sends it again once on a
// new connection when its reply was lost: an empty regular file found
// there then is taken as the one the first made.
func (c *Client) createGuardedAgain(ctx context.Context, dir []byte, base, name string) (made, error) {
	d, again, err := c.callAgainIfLost(ctx, nfs.NFSProc3Create, "CREATE", name, nfs.Diropargs3{FH: dir, Filename: base}, createGuarded, nfs.Sattr3{})
	var f file
	switch {
	case err == nil:
		f, err = c.created(ctx, d, "CREATE", dir, name)
	case again:
		f, err = c.madeBefore(ctx, dir, name, err, func(_ context.Context, f file) bool {
			return f.attr.Mode.IsRegular() && f.attr.Size == 0
		})
	default:
		err = c.taken(ctx, dir, name, err)
	}
	return made{file: f}, err
}

// createExclusive sends an EXCLUSIVE CREATE, and sends it again once on a
// new connection when its reply was lost: the server may have made the
// file, and answers the same verifier with success for it.
func (c *Client) createExclusive(ctx context.Context, dir []byte, base, name string, verifier createVerifier3) (made, error) {
	d, _, err := c.callAgainIfLost(ctx, nfs.NFSProc3Create, "CREATE", name, nfs.Diropargs3{FH: dir, Filename: base}, createExclusive, verifier)
	if err != nil {
		return made{}, c.taken(ctx, dir, name, err)
	}
	f, err := c.created(ctx, d, "CREATE", dir, name)
	return made{file: f, verifierInTimes: true}, err
}

// callAgainIfLost makes a call that changes a directory, and makes it once
// more on a new connection when its reply was lost, saying so: the server
// may have run the first, and the answer to the second tells the caller
// whether it did.
func (c *Client) callAgainIfLost(ctx context.Context, proc uint32, op, name string, args ...any) (*decoder, bool, error) {
	d, err := c.call(ctx, proc, op, name, args...)
	if err == nil || !c.replyLost(ctx) {
		return d, false, err
	}
	klog.FromContext(ctx).V(2).Info("Reply to an NFS call lost, sending it again", "server", c.nfsAddr, "op", op, "path", name, "err", err)
	if rerr := c.reconnect(ctx); rerr != nil {
		return nil, false, fmt.Errorf("%w; and cannot connect again to retry: %w", err, rerr)
	}
	d, err = c.call(ctx, proc, op, name, args...)
	return d, true, err
}

// replyLost says the last call lost its connection with time left to retry.
func (c *Client) replyLost(ctx context.Context) bool {
	return c.conn != nil && c.conn.broken && ctx.Err() == nil
}

// reconnect replaces a broken connection; the root handle stays.
func (c *Client) reconnect(ctx context.Context) error {
	c.conn.close()
	c.conn = nil
	return c.ready(ctx)
}

// ownerWrite is the permission bit that lets a file's owner write it.
const ownerWrite fs.FileMode = 0o200

// fill leaves in f data alone, with exactly perm. One SETATTR empties a
// file that holds something (one an earlier try made and wrote part of),
// sets the mode before the data is written, so the data is never seen with
// the server's default mode, and replaces a verifier kept in the times by
// the server's time, as the Linux client does; a mode that does not let
// the owner write is set after, as a server checking permissions on WRITE
// (go-nfs, run unprivileged) would refuse the data.
func (c *Client) fill(ctx context.Context, f made, name string, data []byte, perm fs.FileMode) error {
	var attrs nfs.Sattr3
	if f.attr.Size != 0 {
		attrs.Size = nfs.SetSize{SetIt: true}
	}
	if f.verifierInTimes {
		attrs.Atime = nfs.SetTime{SetIt: nfs.SetToServerTime}
		attrs.Mtime = nfs.SetTime{SetIt: nfs.SetToServerTime}
	}
	modeFirst := perm&ownerWrite != 0
	if modeFirst && backend.UnixMode(f.attr.Mode) != backend.UnixMode(perm) {
		attrs.Mode = nfs.SetMode{SetIt: true, Mode: backend.UnixMode(perm)}
	}
	if attrs != (nfs.Sattr3{}) {
		err := c.setattr(ctx, f.fh, name, attrs)
		if attrs.Mode.SetIt {
			err = modeError(name, perm, err)
		}
		if err != nil {
			return err
		}
		if attrs.Mode.SetIt {
			f.attr.Mode = f.attr.Mode.Type() | perm
		}
	}
	if err := c.write(ctx, f.fh, name, 0, data); err != nil {
		return err
	}
	return c.setMode(ctx, f.file, name, perm)
}

// unmake removes the file base that CreateFile made and could not fill,
// returning err: no empty or partial file is left for a retry to meet. The
// file is this call's, or an earlier try's of the same name, data and mode
// that EXCLUSIVE answered for. Without a connection the file stays, and a
// retry meets it as fs.ErrExist.
func (c *Client) unmake(ctx context.Context, dir []byte, base, name string, err error) error {
	if c.conn == nil || c.conn.broken || ctx.Err() != nil {
		return err
	}
	if rerr := c.remove(ctx, dir, base, name, 0); rerr != nil {
		return fmt.Errorf("%w; and cannot remove the file made: %w", err, rerr)
	}
	return err
}
