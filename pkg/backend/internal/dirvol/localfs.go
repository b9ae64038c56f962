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

package dirvol

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// LocalFS is the host's file system, reached through os.Root so that no
// operation leaves the base directory, symlinks included.
type LocalFS struct{}

var _ Filesystem = LocalFS{}

// OpenBase opens base through root, following symlinks that stay inside
// root: hostpath resolves its path with them once, and a base replaced by
// a symlink leading out of root is refused at the moment of use.
func (LocalFS) OpenBase(_ context.Context, root, base string) (Dir, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("%w: root %q is not absolute", backend.ErrInvalidSpec, root)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot open %q: %w", backend.ErrUnavailable, root, err)
	}
	defer r.Close()
	b, err := r.OpenRoot(base)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: cannot open %q in %q: %w", backend.ErrUnavailable, base, root, err)
	case err != nil:
		return nil, fmt.Errorf("%w: cannot open %q in %q: %w", backend.ErrInvalidSpec, base, root, err)
	}
	return &localDir{root: b}, nil
}

// localDir is a Dir over an os.Root, which refuses symlinks out of it; the
// methods below refuse the symlinks os.Root would follow inside it too.
type localDir struct {
	root *os.Root
}

// OpenDir compares what it opened with what it checked, so a swap in
// between is caught.
func (d *localDir) OpenDir(ctx context.Context, name string) (Dir, error) {
	checked, err := d.Lstat(ctx, name)
	if err != nil {
		return nil, err
	}
	if !checked.IsDir() {
		return nil, fmt.Errorf("%q is not a directory (%s)", name, checked.Mode().Type())
	}
	next, err := d.root.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	opened, err := next.Stat(".")
	if err != nil {
		next.Close()
		return nil, err
	}
	if !os.SameFile(checked, opened) {
		next.Close()
		return nil, fmt.Errorf("%q changed while being opened", name)
	}
	return &localDir{root: next}, nil
}

func (d *localDir) Lstat(_ context.Context, name string) (fs.FileInfo, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	return d.root.Lstat(name)
}

func (d *localDir) Mkdir(_ context.Context, name string, perm fs.FileMode) error {
	if err := CheckName(name); err != nil {
		return err
	}
	return d.root.Mkdir(name, perm)
}

// CreateFile relies on O_EXCL, which fails on a symlink rather than follow
// it. A file it made and could not write is removed again.
func (d *localDir) CreateFile(_ context.Context, name string, data []byte, perm fs.FileMode) (File, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(data); err != nil {
		return nil, errors.Join(err, f.Close(), d.root.Remove(name))
	}
	return localFile{f: f}, nil
}

// RewriteFile compares what it opened with what it checked, as ReadFile
// does, so a file swapped for a link in between is not written through.
func (d *localDir) RewriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	checked, err := d.Lstat(ctx, name)
	if err != nil {
		return err
	}
	if !checked.Mode().IsRegular() {
		return fmt.Errorf("cannot rewrite %q: not a regular file (%s): %w", name, checked.Mode().Type(), fs.ErrInvalid)
	}
	f, err := d.root.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	opened, err := f.Stat()
	if err == nil && !os.SameFile(checked, opened) {
		err = fmt.Errorf("%q changed while being opened", name)
	}
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// ReadFile compares what it opened with what it checked, so a swap in
// between is caught.
func (d *localDir) ReadFile(ctx context.Context, name string, limit int64) ([]byte, fs.FileInfo, error) {
	checked, err := d.Lstat(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if !checked.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%q is not a regular file (%s)", name, checked.Mode().Type())
	}
	f, err := d.root.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !os.SameFile(checked, opened) {
		return nil, nil, fmt.Errorf("%q changed while being opened", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read %q: %w", name, err)
	}
	return data, opened, nil
}

func (d *localDir) ReadNames(context.Context) ([]string, error) {
	f, err := d.root.Open(".")
	if err != nil {
		return nil, err
	}
	names, err := f.Readdirnames(-1)
	if err := errors.Join(err, f.Close()); err != nil {
		return nil, err
	}
	return names, nil
}

// ReadSomeNames reads from a descriptor of its own, so each call lists
// from the start.
func (d *localDir) ReadSomeNames(_ context.Context, limit int) ([]string, error) {
	if limit < 1 {
		return nil, fmt.Errorf("cannot list %d names: %w", limit, fs.ErrInvalid)
	}
	f, err := d.root.Open(".")
	if err != nil {
		return nil, err
	}
	names, err := f.Readdirnames(limit)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if err := errors.Join(err, f.Close()); err != nil {
		return nil, err
	}
	return names, nil
}

// direntBuffer is what one getdents(2) of ReadPage reads: a few dozen
// entries of the longest names, whatever the directory holds.
const direntBuffer = 16 << 10

// ReadPage reads with getdents(2) from a descriptor of its own, positioned
// at from: a directory offset (d_off), which the kernel keeps valid across
// descriptors (seekdir(3)). Names past limit in the last read are dropped
// and read again by the next call.
func (d *localDir) ReadPage(_ context.Context, from ListPos, limit int) ([]ListEntry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("cannot list %d names: %w", limit, fs.ErrInvalid)
	}
	f, err := d.root.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fd := int(f.Fd())
	if _, err := unix.Seek(fd, int64(from.Cookie), io.SeekStart); err != nil { //nolint:gosec // an offset the kernel gave
		return nil, &os.PathError{Op: "lseek", Path: d.root.Name(), Err: err}
	}
	buf := make([]byte, direntBuffer)
	var entries []ListEntry
	for len(entries) < limit {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, &os.PathError{Op: "getdents", Path: d.root.Name(), Err: err}
		}
		if n == 0 {
			break
		}
		entries = appendDirents(entries, buf[:n], limit)
	}
	return entries, nil
}

// appendDirents appends the linux_dirent64 records of buf to entries, up
// to limit, less "." and "..".
func appendDirents(entries []ListEntry, buf []byte, limit int) []ListEntry {
	const nameOffset = 19 // d_ino, d_off, d_reclen, d_type
	for len(buf) >= nameOffset && len(entries) < limit {
		reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
		if reclen < nameOffset || reclen > len(buf) {
			break
		}
		name := buf[nameOffset:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		next := ListPos{Cookie: binary.NativeEndian.Uint64(buf[8:16])}
		if s := string(name); s != "." && s != ".." {
			entries = append(entries, ListEntry{Name: s, Next: next})
		}
		buf = buf[reclen:]
	}
	return entries
}

// OpenRead opens without blocking, so a file swapped for a FIFO after
// the check does not hang the caller, and compares what it opened with
// what it checked, as ReadFile does.
func (d *localDir) OpenRead(ctx context.Context, name string) (Reader, error) {
	checked, err := d.Lstat(ctx, name)
	if err != nil {
		return nil, err
	}
	if !checked.Mode().IsRegular() {
		return nil, fmt.Errorf("%q is not a regular file (%s)", name, checked.Mode().Type())
	}
	f, err := d.root.OpenFile(name, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	opened, err := f.Stat()
	if err == nil && !os.SameFile(checked, opened) {
		err = fmt.Errorf("%q changed while being opened", name)
	}
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return localReader{f: f}, nil
}

func (d *localDir) Readlink(_ context.Context, name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	target, err := d.root.Readlink(name)
	if err != nil {
		return "", err
	}
	if len(target) > MaxLinkTarget {
		return "", fmt.Errorf("the target of symlink %q is longer than %d bytes", name, MaxLinkTarget)
	}
	return target, nil
}

func (d *localDir) Symlink(_ context.Context, target, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	return d.root.Symlink(target, name)
}

func (d *localDir) Rename(_ context.Context, oldName, newName string) error {
	if err := errors.Join(CheckName(oldName), CheckName(newName)); err != nil {
		return err
	}
	return d.root.Rename(oldName, newName)
}

// Move renames through the descriptors of both directories, which os.Root
// cannot do, so neither name can be redirected by a symlink.
func (d *localDir) Move(_ context.Context, oldName string, to Dir, newName string) error {
	if err := errors.Join(CheckName(oldName), CheckName(newName)); err != nil {
		return err
	}
	target, ok := to.(*localDir)
	if !ok {
		return fmt.Errorf("cannot move %q to a directory of another file system", oldName)
	}
	from, err := d.root.Open(".")
	if err != nil {
		return err
	}
	defer from.Close()
	into, err := target.root.Open(".")
	if err != nil {
		return err
	}
	defer into.Close()
	if err := unix.Renameat(int(from.Fd()), oldName, int(into.Fd()), newName); err != nil {
		return &os.LinkError{Op: "renameat", Old: oldName, New: newName, Err: err}
	}
	return nil
}

func (d *localDir) Remove(_ context.Context, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	return d.root.Remove(name)
}

// CopyTo copies with CopyTree over localDirs, whose descriptors it bounds.
func (d *localDir) CopyTo(ctx context.Context, into Dir, limit int64, owner Owner) (Copied, error) {
	return CopyTree[Dir](ctx, d, into, limit, owner)
}

// RemoveAll walks with RemoveTree: os.Root.RemoveAll holds a descriptor
// per level of the tree, so a deep one runs out of them.
func (d *localDir) RemoveAll(ctx context.Context, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	return RemoveTree[Dir](ctx, d, name)
}

func (d *localDir) Chmod(_ context.Context, perm fs.FileMode) error {
	return d.root.Chmod(".", perm)
}

func (d *localDir) Chown(_ context.Context, uid, gid int) error {
	return d.root.Lchown(".", uid, gid)
}

// Space asks the directory itself, by its descriptor, so it reports the file
// system mounted there now.
func (d *localDir) Space(context.Context) (provisioning.Space, error) {
	f, err := d.root.Open(".")
	if err != nil {
		return provisioning.Space{}, err
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return provisioning.Space{}, &os.PathError{Op: "fstatfs", Path: d.root.Name(), Err: err}
	}
	bsize := uint64(st.Bsize) //nolint:gosec // a block size is positive
	return NewSpace(st.Bavail*bsize, st.Blocks*bsize), nil
}

func (d *localDir) Sync(context.Context) error {
	f, err := d.root.Open(".")
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

func (d *localDir) Close() error {
	return d.root.Close()
}

type localFile struct {
	f *os.File
}

func (f localFile) Write(_ context.Context, data []byte) error {
	_, err := f.f.Write(data)
	return err
}

func (f localFile) Chmod(_ context.Context, perm fs.FileMode) error { return f.f.Chmod(perm) }

func (f localFile) Chown(_ context.Context, uid, gid int) error { return f.f.Chown(uid, gid) }

func (f localFile) Sync(context.Context) error { return f.f.Sync() }

func (f localFile) Close() error { return f.f.Close() }

type localReader struct {
	f *os.File
}

func (r localReader) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return r.f.ReadAt(p, off)
}

func (r localReader) Close() error { return r.f.Close() }
