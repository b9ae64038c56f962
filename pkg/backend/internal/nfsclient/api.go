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
	"math"

	"github.com/willscott/go-nfs-client/nfs"

	"github.com/provfleet/provfleet/pkg/backend"
)

// Every path below is slash-separated and relative to the export's root
// ("." is the root itself), as io/fs.ValidPath defines. No call follows a
// symlink: a link, or a file, where a directory is needed fails with an
// error wrapping ErrNotDirectory (and so fs.ErrInvalid).

// Lstat returns the attributes of name itself, a link not followed.
func (c *Client) Lstat(ctx context.Context, name string) (Attr, error) {
	var attr Attr
	err := c.do(ctx, func(ctx context.Context) error {
		f, err := c.walk(ctx, name)
		attr = f.attr
		return err
	})
	return attr, err
}

// Mkdir makes the directory name with exactly perm, whatever umask the
// server applies. An existing name fails with fs.ErrExist.
func (c *Client) Mkdir(ctx context.Context, name string, perm fs.FileMode) error {
	return c.do(ctx, func(ctx context.Context) error {
		dir, base, err := c.parent(ctx, name)
		if err != nil {
			return err
		}
		mode := nfs.Sattr3{Mode: nfs.SetMode{SetIt: true, Mode: backend.UnixMode(perm)}}
		d, err := c.call(ctx, nfs.NFSProc3Mkdir, "MKDIR", name, nfs.Diropargs3{FH: dir.fh, Filename: base}, mode)
		if err != nil {
			return c.taken(ctx, dir.fh, name, err)
		}
		made, err := c.created(ctx, d, "MKDIR", dir.fh, name)
		if err != nil {
			return err
		}
		return c.setMode(ctx, made, name, perm)
	})
}

// WriteAt writes data at offset into the existing regular file name, on
// the server's stable storage before it returns (FILE_SYNC writes, so no
// COMMIT is needed). A link or anything else at name is refused.
func (c *Client) WriteAt(ctx context.Context, name string, offset uint64, data []byte) error {
	return c.do(ctx, func(ctx context.Context) error {
		f, err := c.walk(ctx, name)
		if err != nil {
			return err
		}
		if !f.attr.Mode.IsRegular() {
			return fmt.Errorf("cannot write %q: it is %s: %w", name, typeName(f.attr.Mode), fs.ErrInvalid)
		}
		return c.write(ctx, f.fh, name, offset, data)
	})
}

// taken explains a refused MKDIR or CREATE by the name being taken, with
// an error wrapping fs.ErrExist: some servers answer NFS3ERR_ACCES there
// (go-nfs, for a file or a link in the way), where knfsd answers
// NFS3ERR_EXIST.
func (c *Client) taken(ctx context.Context, dir []byte, name string, err error) error {
	var status *StatusError
	if errors.Is(err, fs.ErrExist) || !errors.As(err, &status) {
		return err
	}
	if f, lerr := c.lookup(ctx, dir, name); lerr == nil {
		return fmt.Errorf("%q is taken by %s: %w: %w", name, typeName(f.attr.Mode), fs.ErrExist, err)
	}
	return err
}

// write writes data from start, each chunk FILE_SYNC.
func (c *Client) write(ctx context.Context, fh []byte, name string, start uint64, data []byte) error {
	return c.writeChunks(ctx, fh, name, start, data, chunking{size: ioChunk, how: fileSync}, func(w written) error {
		if w.committed != fileSync {
			return fmt.Errorf("cannot write %q: the server wrote with stability %d, not FILE_SYNC", name, w.committed)
		}
		return nil
	})
}

// WRITE's stable_how (RFC 1813).
const (
	unstable = uint32(0)
	fileSync = uint32(2) // on stable storage before the reply
)

// chunking is how writeChunks cuts and sends data: chunks of at most
// size bytes, each WRITE asking for stability how.
type chunking struct {
	size int
	how  uint32
}

// writeChunks writes data from start as chunking says, each reply passed
// to check. A server that writes part of a chunk is sent the rest; one
// that says it wrote more than it was sent, or nothing, fails the write.
func (c *Client) writeChunks(ctx context.Context, fh []byte, name string, start uint64, data []byte, cut chunking, check func(written) error) error {
	for offset := 0; offset < len(data); {
		chunk := data[offset:min(offset+cut.size, len(data))]
		d, err := c.call(ctx, nfs.NFSProc3Write, "WRITE", name, fh, start+uint64(offset), uint32(len(chunk)), cut.how, chunk) //nolint:gosec // chunks are small
		if err != nil {
			return err
		}
		w, err := writeReply(d, len(chunk))
		if err != nil {
			return fmt.Errorf("cannot write %q: %w", name, err)
		}
		if err := check(w); err != nil {
			return err
		}
		offset += w.count
	}
	return nil
}

// ReadFile returns the content of the regular file name, refusing one of
// more than limit bytes.
func (c *Client) ReadFile(ctx context.Context, name string, limit int) ([]byte, error) {
	data, _, err := c.readRegular(ctx, name, limit+1)
	if err == nil && len(data) > limit {
		return nil, fmt.Errorf("cannot read %q: more than %d bytes", name, limit)
	}
	return data, err
}

// ReadHead returns at most the first limit bytes of the regular file name,
// and its attributes.
func (c *Client) ReadHead(ctx context.Context, name string, limit int) ([]byte, Attr, error) {
	return c.readRegular(ctx, name, limit)
}

// readRegular reads at most limit bytes of the regular file name.
func (c *Client) readRegular(ctx context.Context, name string, limit int) ([]byte, Attr, error) {
	var data []byte
	var attr Attr
	err := c.do(ctx, func(ctx context.Context) error {
		f, err := c.walk(ctx, name)
		if err != nil {
			return err
		}
		if !f.attr.Mode.IsRegular() {
			return fmt.Errorf("cannot read %q: it is %s: %w", name, typeName(f.attr.Mode), fs.ErrInvalid)
		}
		attr = f.attr
		data, err = c.read(ctx, f.fh, name, limit)
		return err
	})
	return data, attr, err
}

// read reads from the start of fh until its end or limit bytes. A reply
// with more data than asked for, or with none before the end, fails it.
func (c *Client) read(ctx context.Context, fh []byte, name string, limit int) ([]byte, error) {
	var data []byte
	for len(data) < limit {
		asked := min(ioChunk, limit-len(data))
		d, err := c.call(ctx, nfs.NFSProc3Read, "READ", name, fh, uint64(len(data)), uint32(asked)) //nolint:gosec // at most a chunk
		if err != nil {
			return nil, err
		}
		chunk, eof, err := readReply(d, asked)
		if err != nil {
			return nil, fmt.Errorf("cannot read %q: %w", name, err)
		}
		data = append(data, chunk...)
		if eof {
			break
		}
		if len(chunk) == 0 {
			return nil, fmt.Errorf("cannot read %q: the server returned no data before the end of the file", name)
		}
	}
	return data, nil
}

// Rename moves from to to, replacing a file there as rename(2) does.
func (c *Client) Rename(ctx context.Context, from, to string) error {
	return c.do(ctx, func(ctx context.Context) error {
		fromDir, fromBase, err := c.parent(ctx, from)
		if err != nil {
			return err
		}
		toDir, toBase, err := c.parent(ctx, to)
		if err != nil {
			return err
		}
		_, err = c.call(ctx, nfs.NFSProc3Rename, "RENAME", from+" to "+to,
			nfs.Diropargs3{FH: fromDir.fh, Filename: fromBase}, nfs.Diropargs3{FH: toDir.fh, Filename: toBase})
		return err
	})
}

// Remove removes the file, link or empty directory name.
func (c *Client) Remove(ctx context.Context, name string) error {
	return c.do(ctx, func(ctx context.Context) error {
		dir, base, err := c.parent(ctx, name)
		if err != nil {
			return err
		}
		f, err := c.lookup(ctx, dir.fh, name)
		if err != nil {
			return err
		}
		return c.remove(ctx, dir.fh, base, name, f.attr.Mode)
	})
}

func (c *Client) remove(ctx context.Context, dir []byte, base, name string, mode fs.FileMode) error {
	proc, op := uint32(nfs.NFSProc3Remove), "REMOVE"
	if mode.IsDir() {
		proc, op = nfs.NFSProc3RmDir, "RMDIR"
	}
	_, err := c.call(ctx, proc, op, name, nfs.Diropargs3{FH: dir, Filename: base})
	return err
}

// ReadDir returns the names in the directory name, "." and ".." left out.
func (c *Client) ReadDir(ctx context.Context, name string) ([]string, error) {
	var names []string
	err := c.do(ctx, func(ctx context.Context) error {
		dir, err := c.dir(ctx, name)
		if err != nil {
			return err
		}
		names, err = c.readDir(ctx, dir.fh, name, 0)
		return err
	})
	return names, err
}

// Chmod sets the permission bits of name itself.
func (c *Client) Chmod(ctx context.Context, name string, perm fs.FileMode) error {
	return c.do(ctx, func(ctx context.Context) error {
		f, err := c.walk(ctx, name)
		if err != nil {
			return err
		}
		err = c.setattr(ctx, f.fh, name, nfs.Sattr3{Mode: nfs.SetMode{SetIt: true, Mode: backend.UnixMode(perm)}})
		return modeError(name, perm, err)
	})
}

// Chown sets the owner of name itself; a negative uid or gid leaves that
// one as it is, as with os.Chown. Under root_squash the server runs the call
// as nobody and refuses it: the error wraps fs.ErrPermission.
func (c *Client) Chown(ctx context.Context, name string, uid, gid int) error {
	attrs, err := ownerAttrs(name, uid, gid)
	if err != nil {
		return err
	}
	return c.do(ctx, func(ctx context.Context) error {
		f, err := c.walk(ctx, name)
		if err != nil {
			return err
		}
		return c.setOwner(ctx, f.fh, name, uid, gid, attrs)
	})
}

// SetOwner sets the owner of the file, directory or link by its handle, as
// Chown does by a path.
func (c *Client) SetOwner(ctx context.Context, file Handle, uid, gid int) error {
	const name = "a file by handle"
	attrs, err := ownerAttrs(name, uid, gid)
	if err != nil {
		return err
	}
	return c.do(ctx, func(ctx context.Context) error {
		return c.setOwner(ctx, file.fh, name, uid, gid, attrs)
	})
}

// ownerAttrs is the SETATTR of uid and gid; a negative one is left out.
func ownerAttrs(name string, uid, gid int) (nfs.Sattr3, error) {
	if uid > math.MaxUint32 || gid > math.MaxUint32 {
		return nfs.Sattr3{}, fmt.Errorf("cannot chown %q to %d:%d: %w", name, uid, gid, fs.ErrInvalid)
	}
	return nfs.Sattr3{
		UID: nfs.SetUID{SetIt: uid >= 0, UID: uint32(max(uid, 0))},
		GID: nfs.SetUID{SetIt: gid >= 0, UID: uint32(max(gid, 0))},
	}, nil
}

func (c *Client) setOwner(ctx context.Context, fh []byte, name string, uid, gid int, attrs nfs.Sattr3) error {
	err := c.setattr(ctx, fh, name, attrs)
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("cannot chown %q to %d:%d (an export with root_squash refuses it): %w", name, uid, gid, err)
	}
	return err
}

// FSStat is the space of the export's file system, in bytes.
type FSStat struct {
	Total     uint64
	Free      uint64
	Available uint64
}

// FSStat returns the export's space: Available is what an unprivileged
// user may still write.
func (c *Client) FSStat(ctx context.Context) (FSStat, error) {
	var stat FSStat
	err := c.do(ctx, func(ctx context.Context) error {
		d, err := c.call(ctx, procFSStat, "FSSTAT", ".", c.root)
		if err != nil {
			return err
		}
		stat, err = fsstatReply(d)
		return err
	})
	return stat, err
}
