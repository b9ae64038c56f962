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

package nfsfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"syscall"
	"time"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/backend/internal/nfsclient"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// FS is the export a Client mounted, as a dirvol.Filesystem.
type FS struct {
	client *nfsclient.Client
	export string
}

var _ dirvol.Filesystem = (*FS)(nil)

// New returns the Filesystem of client, which mounted export (the path of
// server:path). The caller keeps closing the client.
func New(client *nfsclient.Client, export string) *FS {
	return &FS{client: client, export: path.Clean(export)}
}

// OpenBase opens base, relative to the export, when root is the export's
// path: a Store's root is the export, which bounds every path.
func (f *FS) OpenBase(ctx context.Context, root, base string) (dirvol.Dir, error) {
	if path.Clean(root) != f.export {
		return nil, fmt.Errorf("%w: root %q is not the export %q", backend.ErrInvalidSpec, root, f.export)
	}
	attr, err := f.client.Lstat(ctx, base)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: cannot open %q in export %q: %w", backend.ErrUnavailable, base, root, err)
	case errors.Is(err, fs.ErrInvalid):
		return nil, fmt.Errorf("%w: cannot open %q in export %q: %w", backend.ErrInvalidSpec, base, root, err)
	case err != nil:
		return nil, fmt.Errorf("%w: cannot open %q in export %q: %w", backend.ErrUnavailable, base, root, err)
	case !attr.Mode.IsDir():
		return nil, fmt.Errorf("%w: %q in export %q is not a directory (%s)", backend.ErrInvalidSpec, base, root, attr.Mode.Type())
	}
	return &dir{client: f.client, path: path.Clean(base)}, nil
}

// dir is a directory of the export, by its path from the export's root.
type dir struct {
	client *nfsclient.Client
	path   string
}

// join returns the path of name in d, refusing what is not one name.
func (d *dir) join(name string) (string, error) {
	if err := dirvol.CheckName(name); err != nil {
		return "", err
	}
	return path.Join(d.path, name), nil
}

func (d *dir) OpenDir(ctx context.Context, name string) (dirvol.Dir, error) {
	info, err := d.Lstat(ctx, name)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%q is not a directory (%s)", name, info.Mode().Type())
	}
	return &dir{client: d.client, path: path.Join(d.path, name)}, nil
}

func (d *dir) Lstat(ctx context.Context, name string) (fs.FileInfo, error) {
	p, err := d.join(name)
	if err != nil {
		return nil, err
	}
	attr, err := d.client.Lstat(ctx, p)
	if err != nil {
		return nil, err
	}
	return fileInfo{name: name, attr: attr}, nil
}

func (d *dir) Mkdir(ctx context.Context, name string, perm fs.FileMode) error {
	p, err := d.join(name)
	if err != nil {
		return err
	}
	return d.client.Mkdir(ctx, p, perm)
}

// CreateFile creates the file with its data in one nfsclient call, whose
// EXCLUSIVE CREATE tells a retry of the same file by them.
func (d *dir) CreateFile(ctx context.Context, name string, data []byte, perm fs.FileMode) (dirvol.File, error) {
	p, err := d.join(name)
	if err != nil {
		return nil, err
	}
	if err := d.client.CreateFile(ctx, p, data, perm); err != nil {
		return nil, err
	}
	return &file{client: d.client, path: p, size: uint64(len(data))}, nil
}

// RewriteFile writes FILE_SYNC: durable once it returns.
func (d *dir) RewriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	p, err := d.join(name)
	if err != nil {
		return err
	}
	return d.client.RewriteFile(ctx, p, data, perm)
}

func (d *dir) ReadFile(ctx context.Context, name string, limit int64) ([]byte, fs.FileInfo, error) {
	p, err := d.join(name)
	if err != nil {
		return nil, nil, err
	}
	if limit < 0 {
		return nil, nil, fmt.Errorf("cannot read %q: negative limit %d: %w", name, limit, fs.ErrInvalid)
	}
	data, attr, err := d.client.ReadHead(ctx, p, int(limit))
	if err != nil {
		return nil, nil, err
	}
	return data, fileInfo{name: name, attr: attr}, nil
}

func (d *dir) ReadNames(ctx context.Context) ([]string, error) {
	return d.client.ReadDir(ctx, d.path)
}

func (d *dir) ReadSomeNames(ctx context.Context, limit int) ([]string, error) {
	h, err := d.client.Open(ctx, d.path)
	if err != nil {
		return nil, err
	}
	return d.client.ReadNamesIn(ctx, h, limit)
}

// tree opens the directory by its handle, walking its path once.
func (d *dir) tree(ctx context.Context) (treeDir, error) {
	h, err := d.client.Open(ctx, d.path)
	if err != nil {
		return treeDir{}, err
	}
	if !h.Attr().Mode.IsDir() {
		return treeDir{}, fmt.Errorf("%q is not a directory (%s): %w", d.path, h.Attr().Mode.Type(), nfsclient.ErrNotDirectory)
	}
	return treeDir{client: d.client, handle: h}, nil
}

func (d *dir) ReadPage(ctx context.Context, from dirvol.ListPos, limit int) ([]dirvol.ListEntry, error) {
	t, err := d.tree(ctx)
	if err != nil {
		return nil, err
	}
	return t.ReadPage(ctx, from, limit)
}

func (d *dir) OpenRead(ctx context.Context, name string) (dirvol.Reader, error) {
	t, err := d.tree(ctx)
	if err != nil {
		return nil, err
	}
	return t.OpenRead(ctx, name)
}

func (d *dir) Readlink(ctx context.Context, name string) (string, error) {
	t, err := d.tree(ctx)
	if err != nil {
		return "", err
	}
	return t.Readlink(ctx, name)
}

func (d *dir) Symlink(ctx context.Context, target, name string) error {
	t, err := d.tree(ctx)
	if err != nil {
		return err
	}
	return t.Symlink(ctx, target, name)
}

// CopyTo walks with dirvol.CopyTree by file handles, as RemoveAll does:
// by paths, each call would walk its path again from the export's root.
// Files are written UNSTABLE and committed before they are closed, so a
// server that restarts during the copy fails it rather than leave a file
// short.
func (d *dir) CopyTo(ctx context.Context, into dirvol.Dir, limit int64, owner dirvol.Owner) (dirvol.Copied, error) {
	target, ok := into.(*dir)
	if !ok || target.client != d.client {
		return dirvol.Copied{}, fmt.Errorf("cannot copy into a directory of another file system: %w", syscall.EXDEV)
	}
	src, err := d.tree(ctx)
	if err != nil {
		return dirvol.Copied{}, err
	}
	dst, err := target.tree(ctx)
	if err != nil {
		return dirvol.Copied{}, err
	}
	return dirvol.CopyTree(ctx, src, dst, limit, owner)
}

func (d *dir) Rename(ctx context.Context, oldName, newName string) error {
	return d.Move(ctx, oldName, d, newName)
}

// Move is one RENAME, so only between directories of one client: another
// client may reach another server.
func (d *dir) Move(ctx context.Context, oldName string, to dirvol.Dir, newName string) error {
	from, err := d.join(oldName)
	if err != nil {
		return err
	}
	target, ok := to.(*dir)
	if !ok || target.client != d.client {
		return fmt.Errorf("cannot move %q to a directory of another file system: %w", oldName, syscall.EXDEV)
	}
	into, err := target.join(newName)
	if err != nil {
		return err
	}
	return d.client.Rename(ctx, from, into)
}

func (d *dir) Remove(ctx context.Context, name string) error {
	p, err := d.join(name)
	if err != nil {
		return err
	}
	return d.client.Remove(ctx, p)
}

// RemoveAll walks with dirvol.RemoveTree by file handles: by paths, each
// call would walk its path again from the export's root, and a tree's
// removal would cost its depth squared.
func (d *dir) RemoveAll(ctx context.Context, name string) error {
	if err := dirvol.CheckName(name); err != nil {
		return err
	}
	t, err := d.tree(ctx)
	if err != nil {
		return err
	}
	return dirvol.RemoveTree(ctx, t, name)
}

func (d *dir) Chmod(ctx context.Context, perm fs.FileMode) error {
	return d.client.Chmod(ctx, d.path, perm)
}

// Chown sets the owner of the directory itself; -1 leaves uid or gid as it
// is.
func (d *dir) Chown(ctx context.Context, uid, gid int) error {
	return d.client.Chown(ctx, d.path, uid, gid)
}

// Space is the FSSTAT of the export, whose file system holds every
// directory of it.
func (d *dir) Space(ctx context.Context) (provisioning.Space, error) {
	stat, err := d.client.FSStat(ctx)
	if err != nil {
		return provisioning.Space{}, err
	}
	return dirvol.NewSpace(stat.Available, stat.Total), nil
}

// Sync has nothing to do: the server committed each change to the
// directory before answering it (see the package doc).
func (d *dir) Sync(context.Context) error { return nil }

// Close has nothing to release: a dir holds no handle.
func (d *dir) Close() error { return nil }

// file is a file CreateFile made, written at the end of what was written.
type file struct {
	client *nfsclient.Client
	path   string
	size   uint64
}

// Write walks the path again, refusing what is no longer a regular file.
func (f *file) Write(ctx context.Context, data []byte) error {
	if err := f.client.WriteAt(ctx, f.path, f.size, data); err != nil {
		return err
	}
	f.size += uint64(len(data))
	return nil
}

func (f *file) Chmod(ctx context.Context, perm fs.FileMode) error {
	return f.client.Chmod(ctx, f.path, perm)
}

func (f *file) Chown(ctx context.Context, uid, gid int) error {
	return f.client.Chown(ctx, f.path, uid, gid)
}

// Sync has nothing to do: every write was FILE_SYNC.
func (f *file) Sync(context.Context) error { return nil }

func (f *file) Close() error { return nil }

// fileInfo is an nfsclient.Attr as an fs.FileInfo; Sys returns the Attr.
type fileInfo struct {
	name string
	attr nfsclient.Attr
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return int64(i.attr.Size) } //nolint:gosec // sizes fit
func (i fileInfo) Mode() fs.FileMode  { return i.attr.Mode }
func (i fileInfo) ModTime() time.Time { return i.attr.ModTime }
func (i fileInfo) IsDir() bool        { return i.attr.Mode.IsDir() }
func (i fileInfo) Sys() any           { return i.attr }
