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
	"errors"
	"fmt"
	"io/fs"

	"github.com/willscott/go-nfs-client/nfs"

	"github.com/provfleet/provfleet/pkg/backend"
)

// The calls below make a tree by handles: each acts in a directory it was
// given and returns the handle of what it made, so a copy of a chain of
// any depth never walks a path. Each is safe to send again after a lost
// reply.

// MkdirIn makes the directory name in dir with exactly perm and returns
// its handle. A MKDIR whose reply was lost is sent again on a new
// connection; an empty directory found there then is taken as the one the
// first made. Any other existing name fails with fs.ErrExist.
func (c *Client) MkdirIn(ctx context.Context, dir Handle, name string, perm fs.FileMode) (Handle, error) {
	if err := checkElement(name); err != nil {
		return Handle{}, err
	}
	var h Handle
	err := c.do(ctx, func(ctx context.Context) error {
		mode := nfs.Sattr3{Mode: nfs.SetMode{SetIt: true, Mode: backend.UnixMode(perm)}}
		d, again, err := c.callAgainIfLost(ctx, nfs.NFSProc3Mkdir, "MKDIR", name, nfs.Diropargs3{FH: dir.fh, Filename: name}, mode)
		var f file
		switch {
		case err == nil:
			f, err = c.created(ctx, d, "MKDIR", dir.fh, name)
		case again:
			f, err = c.madeBefore(ctx, dir.fh, name, err, c.emptyDir)
		default:
			err = c.taken(ctx, dir.fh, name, err)
		}
		if err != nil {
			return err
		}
		if err := c.setMode(ctx, f, name, perm); err != nil {
			return err
		}
		f.attr.Mode = fs.ModeDir | perm
		h = Handle(f)
		return nil
	})
	return h, err
}

// madeBefore tells a call sent again after a lost reply, refused as
// taken, from one the first try carried out: the name holds what the first
// would have made (ours says so), or err stands.
func (c *Client) madeBefore(ctx context.Context, dir []byte, name string, err error, ours func(context.Context, file) bool) (file, error) {
	err = c.taken(ctx, dir, name, err)
	if !errors.Is(err, fs.ErrExist) {
		return file{}, err
	}
	f, lerr := c.lookup(ctx, dir, name)
	if lerr != nil || !ours(ctx, f) {
		return file{}, err
	}
	return f, nil
}

// emptyDir says f is a directory with no entry.
func (c *Client) emptyDir(ctx context.Context, f file) bool {
	if !f.attr.Mode.IsDir() {
		return false
	}
	names, err := c.readDir(ctx, f.fh, "a directory made before", 1)
	return err == nil && len(names) == 0
}

// CreateIn makes the empty regular file name in dir with exactly perm and
// returns its handle, for WriteFileAt and Commit. It creates as CreateFile
// does, with a verifier of dir, name and perm: where the server supports
// EXCLUSIVE, a CREATE whose reply was lost is sent again and answered with
// the file the first made; a server that does not (go-nfs) is asked
// GUARDED, sent again after a lost reply too, and an empty file found
// there then is taken as the one the first made. Any other existing name
// fails with fs.ErrExist. A server that checks permissions on WRITE
// refuses data for a file whose mode does not let its owner write: make it
// with the owner's write bit, and set perm with SetMode once written.
func (c *Client) CreateIn(ctx context.Context, dir Handle, name string, perm fs.FileMode) (Handle, error) {
	if err := checkElement(name); err != nil {
		return Handle{}, err
	}
	// The directory's handle stands for the data, which the caller writes
	// later: another directory's file of the same name is another file.
	verifier := createVerifier(name, dir.fh, perm)
	var h Handle
	err := c.do(ctx, func(ctx context.Context) error {
		f, err := c.create(ctx, dir.fh, name, name, verifier, c.createGuardedAgain)
		if err != nil {
			return err
		}
		if err := c.fill(ctx, f, name, nil, perm); err != nil {
			return c.unmake(ctx, dir.fh, name, name, err)
		}
		f.attr.Mode, f.attr.Size = perm, 0
		h = Handle(f.file)
		return nil
	})
	return h, err
}

// SetMode sets the permission bits of the file, directory or special file
// by its handle; a link has none of its own.
func (c *Client) SetMode(ctx context.Context, file Handle, perm fs.FileMode) error {
	if file.attr.Mode&fs.ModeSymlink != 0 {
		return fmt.Errorf("cannot set the mode of a symlink: %w", fs.ErrInvalid)
	}
	return c.do(ctx, func(ctx context.Context) error {
		err := c.setattr(ctx, file.fh, "a file by handle", nfs.Sattr3{Mode: nfs.SetMode{SetIt: true, Mode: backend.UnixMode(perm)}})
		return modeError("a file by handle", perm, err)
	})
}

// Symlink makes the symlink name in dir pointing to target, stored as it
// is: the target is never resolved, by this client or, in SYMLINK, by the
// server. A target no local link can hold (empty, longer than 4096 bytes,
// holding a NUL) is refused. A SYMLINK whose reply was lost is sent again
// on a new connection; a link to the same target found there then is
// taken as the one the first made. Any other existing name fails with
// fs.ErrExist.
func (c *Client) Symlink(ctx context.Context, dir Handle, name, target string) error {
	if err := checkElement(name); err != nil {
		return err
	}
	if err := checkTarget(target); err != nil {
		return fmt.Errorf("cannot make the symlink %q: %w: %w", name, err, fs.ErrInvalid)
	}
	return c.do(ctx, func(ctx context.Context) error {
		d, again, err := c.callAgainIfLost(ctx, nfs.NFSProc3Symlink, "SYMLINK", name, nfs.Diropargs3{FH: dir.fh, Filename: name}, nfs.Sattr3{}, target)
		switch {
		case err == nil:
			_, _, err = createdReply(d, "SYMLINK")
			return err
		case again:
			_, err = c.madeBefore(ctx, dir.fh, name, err, func(ctx context.Context, f file) bool {
				got, err := c.readlink(ctx, f)
				return err == nil && got == target
			})
			return err
		}
		return c.taken(ctx, dir.fh, name, err)
	})
}

// Readlink returns the target of the symlink, as stored: at most 4096
// bytes, longer refused as a malformed reply.
func (c *Client) Readlink(ctx context.Context, link Handle) (string, error) {
	var target string
	err := c.do(ctx, func(ctx context.Context) error {
		var err error
		target, err = c.readlink(ctx, file(link))
		return err
	})
	return target, err
}

func (c *Client) readlink(ctx context.Context, link file) (string, error) {
	if link.attr.Mode&fs.ModeSymlink == 0 {
		return "", fmt.Errorf("cannot read a link that is %s: %w", typeName(link.attr.Mode), fs.ErrInvalid)
	}
	d, err := c.call(ctx, nfs.NFSProc3Readlink, "READLINK", "a link by handle", link.fh)
	if err != nil {
		return "", err
	}
	return readlinkReply(d)
}
