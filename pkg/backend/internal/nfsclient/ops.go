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
	"path"
	"strings"
	"time"

	"github.com/willscott/go-nfs-client/nfs"

	"github.com/provfleet/provfleet/pkg/backend"
)

// NFSv3 procedures (RFC 1813) beyond those go-nfs-client names.
const (
	procReadDir = 16
	procFSStat  = 18
)

// Sizes of READ and WRITE chunks of the calls by path (small files only)
// and of READDIR replies.
const (
	ioChunk      = 32 << 10
	readDirBytes = 32 << 10
)

// Bounds of the READ and WRITE chunks of the calls by handle, whatever
// FSINFO says: maxTransfer keeps a READ reply well within a record, and
// is what a server that does not answer FSINFO is sent.
const (
	minTransfer = 4 << 10
	maxTransfer = 64 << 10
)

// Attr is what LOOKUP and GETATTR tell of a file, a link not followed.
type Attr struct {
	// Mode has the type bits (fs.ModeDir, fs.ModeSymlink, ...) and the
	// permission bits.
	Mode fs.FileMode
	UID  uint32
	GID  uint32
	Size uint64
	// FileID tells files apart within the export, as an inode number
	// does: what os.SameFile compares.
	FileID  uint64
	ModTime time.Time
}

func attrOf(f *nfs.Fattr) Attr {
	return Attr{
		Mode:    fileType(f.Type) | backend.FileModeOf(f.FileMode),
		UID:     f.UID,
		GID:     f.GID,
		Size:    f.Filesize,
		FileID:  f.Fileid,
		ModTime: f.ModTime(),
	}
}

func fileType(t uint32) fs.FileMode {
	switch t {
	case nfs.NF3Reg:
		return 0
	case nfs.NF3Dir:
		return fs.ModeDir
	case nfs.NF3Lnk:
		return fs.ModeSymlink
	case nfs.NF3Blk:
		return fs.ModeDevice
	case nfs.NF3Chr:
		return fs.ModeDevice | fs.ModeCharDevice
	case nfs.NF3Sock:
		return fs.ModeSocket
	case nfs.NF3FIFO:
		return fs.ModeNamedPipe
	}
	return fs.ModeIrregular
}

// file is a looked-up file: its handle and attributes.
type file struct {
	fh   []byte
	attr Attr
}

// checkPath refuses what is not a slash-separated path inside the export:
// absolute paths and ".." elements are errors, "." is the export's root.
func checkPath(name string) error {
	if !fs.ValidPath(name) {
		return fmt.Errorf("%q is not a path inside the export: %w", name, fs.ErrInvalid)
	}
	return nil
}

// walk looks up name element by element from the root, each one but the
// last required to be a directory; the last is not followed either.
func (c *Client) walk(ctx context.Context, name string) (file, error) {
	if err := checkPath(name); err != nil {
		return file{}, err
	}
	if name == "." {
		return c.getattr(ctx, c.root, name)
	}
	cur := file{fh: c.root, attr: Attr{Mode: fs.ModeDir}}
	walked := "."
	for _, elem := range strings.Split(name, "/") {
		if !cur.attr.Mode.IsDir() {
			return file{}, fmt.Errorf("cannot look up %q: %q is %s: %w", name, walked, typeName(cur.attr.Mode), ErrNotDirectory)
		}
		walked = path.Join(walked, elem)
		var err error
		if cur, err = c.lookup(ctx, cur.fh, walked); err != nil {
			return file{}, err
		}
	}
	return cur, nil
}

// dir looks up name and requires a directory.
func (c *Client) dir(ctx context.Context, name string) (file, error) {
	f, err := c.walk(ctx, name)
	if err == nil && !f.attr.Mode.IsDir() {
		err = fmt.Errorf("%q is %s: %w", name, typeName(f.attr.Mode), ErrNotDirectory)
	}
	return f, err
}

// parent looks up the directory holding name, and name's last element.
func (c *Client) parent(ctx context.Context, name string) (file, string, error) {
	if err := checkPath(name); err != nil {
		return file{}, "", err
	}
	if name == "." {
		return file{}, "", fmt.Errorf("the export's root has no parent: %w", fs.ErrInvalid)
	}
	dir, err := c.dir(ctx, path.Dir(name))
	return dir, path.Base(name), err
}

func typeName(mode fs.FileMode) string {
	switch {
	case mode.IsRegular():
		return "a file"
	case mode&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "of type " + mode.Type().String()
}

func (c *Client) getattr(ctx context.Context, fh []byte, name string) (file, error) {
	d, err := c.call(ctx, nfs.NFSProc3GetAttr, "GETATTR", name, fh)
	if err != nil {
		return file{}, err
	}
	attr, err := getattrReply(d)
	return file{fh: fh, attr: attr}, err
}

func (c *Client) lookup(ctx context.Context, dir []byte, name string) (file, error) {
	d, err := c.call(ctx, nfs.NFSProc3Lookup, "LOOKUP", name, nfs.Diropargs3{FH: dir, Filename: path.Base(name)})
	if err != nil {
		return file{}, err
	}
	fh, attr, err := lookupReply(d)
	switch {
	case err != nil:
		return file{}, err
	case attr == nil:
		return c.getattr(ctx, fh, name)
	}
	return file{fh: fh, attr: *attr}, nil
}

// created reads the reply of CREATE and MKDIR: the new handle, when given.
func (c *Client) created(ctx context.Context, d *decoder, op string, dir []byte, name string) (file, error) {
	fh, attr, err := createdReply(d, op)
	switch {
	case err != nil:
		return file{}, err
	case attr == nil:
		return c.lookup(ctx, dir, name)
	}
	return file{fh: fh, attr: *attr}, nil
}

// setMode sets exactly perm when the server applied a umask of its own.
func (c *Client) setMode(ctx context.Context, f file, name string, perm fs.FileMode) error {
	if backend.UnixMode(f.attr.Mode) == backend.UnixMode(perm) {
		return nil
	}
	err := c.setattr(ctx, f.fh, name, nfs.Sattr3{Mode: nfs.SetMode{SetIt: true, Mode: backend.UnixMode(perm)}})
	return modeError(name, perm, err)
}

// modeError says that the server refuses to set a mode, where SETATTR of
// one failed so: NFS3ERR_NOTSUPP from a server that cannot (go-nfs over a
// file system without chmod), NFS3ERR_PERM or NFS3ERR_ACCES from one that
// will not. The error wraps backend.ErrModeRefused, which no retry
// changes; other errors are returned as they are.
func modeError(name string, perm fs.FileMode, err error) error {
	var status *StatusError
	if !errors.As(err, &status) {
		return err
	}
	switch status.Status {
	case statusNotSupp, statusPerm, statusAccess:
		return fmt.Errorf("cannot set the mode of %q to %s: %w: %w", name, backend.FormatMode(perm), backend.ErrModeRefused, err)
	}
	return err
}

func (c *Client) setattr(ctx context.Context, fh []byte, name string, attr nfs.Sattr3) error {
	const noGuard = uint32(0)
	_, err := c.call(ctx, nfs.NFSProc3SetAttr, "SETATTR", name, fh, attr, noGuard)
	return err
}

// Bounds of one directory's listing: a server that never ends a listing
// fails it once it has sent this many entries ("." and ".." included) or
// bytes of names.
const (
	maxListingEntries = 1 << 18
	maxListingBytes   = 16 << 20
)

// readDir lists a directory with READDIR, page by page, and stops once
// limit names came (0: the whole listing). A page that does not move the
// listing on (no entry, or a cookie sent before, while not at its end)
// fails it, as does a listing beyond its bounds.
func (c *Client) readDir(ctx context.Context, fh []byte, name string, limit int) ([]string, error) {
	var names []string
	var entries, nameBytes int
	var cookie uint64
	var verifier [nfs.NFS3_COOKIEVERFSIZE]byte
	sent := map[uint64]bool{}
	for {
		sent[cookie] = true
		d, err := c.call(ctx, procReadDir, "READDIR", name, fh, cookie, verifier, uint32(readDirBytes))
		if err != nil {
			return nil, err
		}
		page, err := readDirReply(d, math.MaxInt)
		if err != nil {
			return nil, err
		}
		names = append(names, page.names...)
		entries += page.entries
		for _, n := range page.names {
			nameBytes += len(n)
		}
		switch {
		case limit > 0 && len(names) >= limit:
			return names[:limit], nil
		case entries > maxListingEntries || nameBytes > maxListingBytes:
			return nil, fmt.Errorf("cannot list %q: more than %d entries or %d bytes of names", name, maxListingEntries, maxListingBytes)
		case page.eof:
			return names, nil
		case page.entries == 0 || sent[page.last]:
			return nil, fmt.Errorf("cannot list %q: the server's READDIR does not move on from cookie %d", name, cookie)
		}
		cookie, verifier = page.last, page.verifier
	}
}
