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
	"fmt"
	"io/fs"

	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/backend/internal/nfsclient"
)

// treeDir is a directory of the export by its file handle, for
// dirvol.RemoveTree: each call is one or two procedures whatever the
// directory's depth, and a handle of at most 64 bytes is all it holds.
type treeDir struct {
	client *nfsclient.Client
	handle nfsclient.Handle
}

var _ dirvol.TreeDir[treeDir] = treeDir{}

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

// Close has nothing to release: a handle is no descriptor.
func (d treeDir) Close() error { return nil }
