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

	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/backend/internal/nfsclient"
)

// treeDir is a directory of the export by its file handle, for
// dirvol.RemoveTree and dirvol.CopyTree: each call is one or two
// procedures whatever the directory's depth, and a handle of at most 64
// bytes is all it holds, no descriptor.
type treeDir struct {
	client *nfsclient.Client
	handle nfsclient.Handle
}

var (
	_ dirvol.TreeDir[treeDir] = treeDir{}
	_ dirvol.CopyDir[treeDir] = treeDir{}
	_ dirvol.DescriptorFree   = treeDir{}
)

// HoldsNoDescriptor tells CopyTree to keep every directory of its walk:
// reopening one by name costs a LOOKUP per level.
func (treeDir) HoldsNoDescriptor() {}

func (d treeDir) lookup(ctx context.Context, name string) (nfsclient.Handle, error) {
	if err := dirvol.CheckName(name); err != nil {
		return nfsclient.Handle{}, err
	}
	return d.client.LookupIn(ctx, d.handle, name)
}

func (d treeDir) OpenDir(ctx context.Context, name string) (treeDir, error) {
	h, err := d.lookup(ctx, name)
	if err != nil {
		return treeDir{}, err
	}
	if !h.Attr().Mode.IsDir() {
		return treeDir{}, fmt.Errorf("%q is not a directory (%s)", name, h.Attr().Mode.Type())
	}
	return treeDir{client: d.client, handle: h}, nil
}

func (d treeDir) Lstat(ctx context.Context, name string) (fs.FileInfo, error) {
	h, err := d.lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	return fileInfo{name: name, attr: h.Attr()}, nil
}

func (d treeDir) ReadSomeNames(ctx context.Context, limit int) ([]string, error) {
	return d.client.ReadNamesIn(ctx, d.handle, limit)
}

func (d treeDir) Move(ctx context.Context, oldName string, to treeDir, newName string) error {
	if err := dirvol.CheckName(oldName); err != nil {
		return err
	}
	if err := dirvol.CheckName(newName); err != nil {
		return err
	}
	return d.client.RenameIn(ctx, d.handle, oldName, to.handle, newName)
}

func (d treeDir) Remove(ctx context.Context, name string) error {
	h, err := d.lookup(ctx, name)
	if err != nil {
		return err
	}
	return d.client.RemoveIn(ctx, d.handle, name, h.Attr().Mode)
}

// ReadPage lists a page of READDIR by the cookie and verifier of from. A
// position the server no longer honours (the directory changed) fails
// with an error wrapping dirvol.ErrListPosExpired and
// nfsclient.ErrCursorExpired.
func (d treeDir) ReadPage(ctx context.Context, from dirvol.ListPos, limit int) ([]dirvol.ListEntry, error) {
	page, _, _, err := d.client.ReadDirPage(ctx, d.handle, nfsclient.DirCursor(from), limit)
	if errors.Is(err, nfsclient.ErrCursorExpired) {
		return nil, fmt.Errorf("%w: %w", dirvol.ErrListPosExpired, err)
	}
	if err != nil {
		return nil, err
	}
	entries := make([]dirvol.ListEntry, len(page))
	for i, e := range page {
		entries[i] = dirvol.ListEntry{Name: e.Name, Next: dirvol.ListPos(e.Next)}
	}
	return entries, nil
}

func (d treeDir) OpenRead(ctx context.Context, name string) (dirvol.Reader, error) {
	h, err := d.lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	if !h.Attr().Mode.IsRegular() {
		return nil, fmt.Errorf("cannot read %q: it is no regular file (%s): %w", name, h.Attr().Mode.Type(), fs.ErrInvalid)
	}
	return reader{client: d.client, handle: h}, nil
}

func (d treeDir) Readlink(ctx context.Context, name string) (string, error) {
	h, err := d.lookup(ctx, name)
	if err != nil {
		return "", err
	}
	return d.client.Readlink(ctx, h)
}

func (d treeDir) Mkdir(ctx context.Context, name string, perm fs.FileMode) error {
	if err := dirvol.CheckName(name); err != nil {
		return err
	}
	_, err := d.client.MkdirIn(ctx, d.handle, name, perm)
	return err
}

// CreateFile creates the file by CREATE and writes data UNSTABLE: the
// file commits it before it is closed or its mode or owner changes. A
// file whose data was not written is removed.
func (d treeDir) CreateFile(ctx context.Context, name string, data []byte, perm fs.FileMode) (dirvol.File, error) {
	if err := dirvol.CheckName(name); err != nil {
		return nil, err
	}
	h, err := d.client.CreateIn(ctx, d.handle, name, perm)
	if err != nil {
		return nil, err
	}
	f := &handleFile{client: d.client, handle: h}
	if len(data) > 0 {
		if err := f.Write(ctx, data); err != nil {
			return nil, errors.Join(err, f.Close(), d.client.RemoveIn(ctx, d.handle, name, h.Attr().Mode))
		}
	}
	return f, nil
}

func (d treeDir) Symlink(ctx context.Context, target, name string) error {
	if err := dirvol.CheckName(name); err != nil {
		return err
	}
	return d.client.Symlink(ctx, d.handle, name, target)
}

func (d treeDir) Chmod(ctx context.Context, perm fs.FileMode) error {
	return d.client.SetMode(ctx, d.handle, perm)
}

func (d treeDir) Chown(ctx context.Context, uid, gid int) error {
	return d.client.SetOwner(ctx, d.handle, uid, gid)
}

// Close has nothing to release: a handle is no descriptor.
func (d treeDir) Close() error { return nil }

// reader reads a regular file by its handle.
type reader struct {
	client *nfsclient.Client
	handle nfsclient.Handle
}

func (r reader) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return r.client.ReadAt(ctx, r.handle, p, off)
}

// Close has nothing to release: a handle is no descriptor.
func (r reader) Close() error { return nil }

// handleFile is a file CreateFile made by handle, written UNSTABLE at the
// end of what was written. It commits what it wrote before it is closed or
// synced, and before its mode or owner changes: a mode without the
// owner's write bit, or another owner, may make the server refuse the
// COMMIT. A commit that finds the server's write verifier changed fails
// with an error wrapping nfsclient.ErrWriteVerifierChanged: the server
// restarted and may have lost the data, so the file is not complete.
type handleFile struct {
	client *nfsclient.Client
	handle nfsclient.Handle
	size   int64
	dirty  bool
}

func (f *handleFile) Write(ctx context.Context, data []byte) error {
	f.dirty = true
	if err := f.client.WriteFileAt(ctx, f.handle, data, f.size); err != nil {
		return err
	}
	f.size += int64(len(data))
	return nil
}

// commit commits what was written since the last commit.
func (f *handleFile) commit(ctx context.Context) error {
	if !f.dirty {
		return nil
	}
	// Once the server answered, the client keeps no verifier of the file,
	// whatever the answer: the error alone tells of lost data.
	f.dirty = false
	return f.client.Commit(ctx, f.handle)
}

func (f *handleFile) Chmod(ctx context.Context, perm fs.FileMode) error {
	if err := f.commit(ctx); err != nil {
		return err
	}
	return f.client.SetMode(ctx, f.handle, perm)
}

func (f *handleFile) Chown(ctx context.Context, uid, gid int) error {
	if err := f.commit(ctx); err != nil {
		return err
	}
	return f.client.SetOwner(ctx, f.handle, uid, gid)
}

func (f *handleFile) Sync(ctx context.Context) error { return f.commit(ctx) }

// Close commits what is left, with no context to bound it but the
// client's own timeouts.
func (f *handleFile) Close() error { return f.commit(context.Background()) }
