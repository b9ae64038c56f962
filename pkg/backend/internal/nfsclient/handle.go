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
	"io/fs"
	"strings"

	"github.com/willscott/go-nfs-client/nfs"
)

// Handle is a file of the export by the handle its server gave it. A call
// through a Handle walks no path: it costs the same whatever the file's
// depth, and acts on the same file after a rename of its path, as a
// descriptor does. A Handle of a removed file fails with a *StatusError.
type Handle struct {
	fh   []byte
	attr Attr
}

// Attr is what the server told of the file when it gave the handle.
func (h Handle) Attr() Attr { return h.attr }

// Open walks name from the export's root, as the calls by path do, and
// returns its handle.
func (c *Client) Open(ctx context.Context, name string) (Handle, error) {
	var h Handle
	err := c.do(ctx, func(ctx context.Context) error {
		f, err := c.walk(ctx, name)
		h = Handle(f)
		return err
	})
	return h, err
}

// checkElement refuses what is not one element of a path.
func checkElement(name string) error {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return fmt.Errorf("%q is not one element of a path: %w", name, fs.ErrInvalid)
	}
	return nil
}

// LookupIn looks up the element name in the directory dir, a link not
// followed.
func (c *Client) LookupIn(ctx context.Context, dir Handle, name string) (Handle, error) {
	if err := checkElement(name); err != nil {
		return Handle{}, err
	}
	var h Handle
	err := c.do(ctx, func(ctx context.Context) error {
		f, err := c.lookup(ctx, dir.fh, name)
		h = Handle(f)
		return err
	})
	return h, err
}

// ReadNamesIn lists at most limit names of the directory dir, "." and ".."
// left out, from the start of its listing: it stops reading pages once
// limit names came, so a directory of any size costs limit names and a
// page.
func (c *Client) ReadNamesIn(ctx context.Context, dir Handle, limit int) ([]string, error) {
	if limit < 1 {
		return nil, fmt.Errorf("cannot list %d names: %w", limit, fs.ErrInvalid)
	}
	var names []string
	err := c.do(ctx, func(ctx context.Context) error {
		var err error
		names, err = c.readDir(ctx, dir.fh, "a directory by handle", limit)
		return err
	})
	return names, err
}

// RemoveIn removes the file, link or empty directory name in dir; mode is
// its type, from LookupIn, which picks REMOVE or RMDIR.
func (c *Client) RemoveIn(ctx context.Context, dir Handle, name string, mode fs.FileMode) error {
	if err := checkElement(name); err != nil {
		return err
	}
	return c.do(ctx, func(ctx context.Context) error {
		return c.remove(ctx, dir.fh, name, name, mode)
	})
}

// RenameIn renames name in the directory from to newName in the directory
// to, replacing a file there as rename(2) does.
func (c *Client) RenameIn(ctx context.Context, from Handle, name string, to Handle, newName string) error {
	if err := checkElement(name); err != nil {
		return err
	}
	if err := checkElement(newName); err != nil {
		return err
	}
	return c.do(ctx, func(ctx context.Context) error {
		_, err := c.call(ctx, nfs.NFSProc3Rename, "RENAME", name+" to "+newName,
			nfs.Diropargs3{FH: from.fh, Filename: name}, nfs.Diropargs3{FH: to.fh, Filename: newName})
		return err
	})
}
