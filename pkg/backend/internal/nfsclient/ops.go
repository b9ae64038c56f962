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
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/xdr"

	"github.com/provfleet/provfleet/pkg/backend"
)

// NFSv3 procedures (RFC 1813) beyond those go-nfs-client names.
const (
	procReadDir = 16
	procFSStat  = 18
)

// Sizes of READ and WRITE chunks and READDIR replies: small files only.
const (
	ioChunk      = 32 << 10
	readDirBytes = 32 << 10
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
	r, err := c.call(ctx, nfs.NFSProc3GetAttr, "GETATTR", name, fh)
	if err != nil {
		return file{}, err
	}
	var attr nfs.Fattr
	if err := xdr.Read(r, &attr); err != nil {
		return file{}, fmt.Errorf("malformed GETATTR reply: %w", err)
	}
	return file{fh: fh, attr: attrOf(&attr)}, nil
}

func (c *Client) lookup(ctx context.Context, dir []byte, name string) (file, error) {
	r, err := c.call(ctx, nfs.NFSProc3Lookup, "LOOKUP", name, nfs.Diropargs3{FH: dir, Filename: path.Base(name)})
	if err != nil {
		return file{}, err
	}
	var res struct {
		FH   []byte
		Attr nfs.PostOpAttr
	}
	if err := xdr.Read(r, &res); err != nil {
		return file{}, fmt.Errorf("malformed LOOKUP reply: %w", err)
	}
	if !res.Attr.IsSet {
		return c.getattr(ctx, res.FH, name)
	}
	return file{fh: res.FH, attr: attrOf(&res.Attr.Attr)}, nil
}

// created reads the reply of CREATE and MKDIR: the new handle, when given.
func (c *Client) created(ctx context.Context, r io.Reader, dir []byte, name string) (file, error) {
	var res struct {
		FH   nfs.PostOpFH3
		Attr nfs.PostOpAttr
	}
	if err := xdr.Read(r, &res); err != nil {
		return file{}, fmt.Errorf("malformed reply creating %q: %w", name, err)
	}
	if !res.FH.IsSet || !res.Attr.IsSet {
		return c.lookup(ctx, dir, name)
	}
	return file{fh: res.FH.FH, attr: attrOf(&res.Attr.Attr)}, nil
}

// setMode sets exactly perm when the server applied a umask of its own.
func (c *Client) setMode(ctx context.Context, f file, name string, perm fs.FileMode) error {
	if backend.UnixMode(f.attr.Mode) == backend.UnixMode(perm) {
		return nil
	}
	return c.setattr(ctx, f.fh, name, nfs.Sattr3{Mode: nfs.SetMode{SetIt: true, Mode: backend.UnixMode(perm)}})
}

func (c *Client) setattr(ctx context.Context, fh []byte, name string, attr nfs.Sattr3) error {
	const noGuard = uint32(0)
	_, err := c.call(ctx, nfs.NFSProc3SetAttr, "SETATTR", name, fh, attr, noGuard)
	return err
}

// readDir lists a directory with READDIR, page by page.
func (c *Client) readDir(ctx context.Context, fh []byte, name string) ([]string, error) {
	var names []string
	var cookie uint64
	var verifier [nfs.NFS3_COOKIEVERFSIZE]byte
	for {
		r, err := c.call(ctx, procReadDir, "READDIR", name, fh, cookie, verifier, uint32(readDirBytes))
		if err != nil {
			return nil, err
		}
		var head struct {
			Attr     nfs.PostOpAttr
			Verifier [nfs.NFS3_COOKIEVERFSIZE]byte
		}
		if err := xdr.Read(r, &head); err != nil {
			return nil, fmt.Errorf("malformed READDIR reply: %w", err)
		}
		verifier = head.Verifier
		page, last, eof, err := readEntries(r)
		if err != nil {
			return nil, fmt.Errorf("malformed READDIR reply: %w", err)
		}
		names = append(names, page...)
		if eof || len(page) == 0 && last == cookie {
			return names, nil
		}
		cookie = last
	}
}

// readEntries reads READDIR's list of entries: their names but "." and
// "..", the last cookie, and whether the list is complete.
func readEntries(r io.Reader) ([]string, uint64, bool, error) {
	var names []string
	var cookie uint64
	for {
		var follows bool
		if err := xdr.Read(r, &follows); err != nil {
			return nil, 0, false, err
		}
		if !follows {
			break
		}
		var entry struct {
			FileID uint64
			Name   string
			Cookie uint64
		}
		if err := xdr.Read(r, &entry); err != nil {
			return nil, 0, false, err
		}
		cookie = entry.Cookie
		if entry.Name != "." && entry.Name != ".." {
			names = append(names, entry.Name)
		}
	}
	var eof bool
	err := xdr.Read(r, &eof)
	return names, cookie, eof, err
}
