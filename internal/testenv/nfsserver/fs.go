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

package nfsserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	securejoin "github.com/cyphar/filepath-securejoin"
	billy "github.com/go-git/go-billy/v5"
)

// errRoot refuses to remove or rename the served folder itself.
var errRoot = errors.New("the export's root cannot be removed or renamed")

// linkSafeFS is the bound osfs with Remove and Rename acting on a link
// itself, and Create, MkdirAll and Symlink never following one: the bound
// osfs resolves the last element too, so removing a link would remove what
// it points to (re-rooted in the folder), and creating over one, a link
// included, would create its target, unlike a real server.
type linkSafeFS struct {
	billy.Filesystem
	dir string
}

// entry resolves the parent of name inside dir, leaving the last element.
func (f linkSafeFS) entry(name string) (string, error) {
	clean := filepath.Clean("/" + name)
	if clean == "/" {
		return "", errRoot
	}
	parent, err := securejoin.SecureJoin(f.dir, filepath.Dir(clean))
	if err != nil {
		return "", fmt.Errorf("cannot resolve %q: %w", name, err)
	}
	return filepath.Join(parent, filepath.Base(clean)), nil
}

func (f linkSafeFS) Remove(name string) error {
	path, err := f.entry(name)
	if err != nil {
		return err
	}
	return os.Remove(path)
}

func (f linkSafeFS) Rename(from, to string) error {
	src, err := f.entry(from)
	if err != nil {
		return err
	}
	dst, err := f.entry(to)
	if err != nil {
		return err
	}
	return os.Rename(src, dst)
}

// Create opens name for writing as go-nfs's CREATE wants it, but fails on a
// link in the way, as knfsd does, instead of creating its target. The file
// is made without following a link, then opened through the bound osfs,
// whose files go-nfs expects; the test server has no one swapping names in
// between.
func (f linkSafeFS) Create(name string) (billy.File, error) {
	path, err := f.entry(name)
	if err != nil {
		return nil, err
	}
	made, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o666)
	if err != nil {
		return nil, err
	}
	if err := made.Close(); err != nil {
		return nil, err
	}
	return f.OpenFile(name, os.O_RDWR, 0)
}

// MkdirAll makes the one directory go-nfs's MKDIR asks for, whose parent
// exists, and fails on anything in the way, a link included.
func (f linkSafeFS) MkdirAll(name string, perm os.FileMode) error {
	path, err := f.entry(name)
	if err != nil {
		return err
	}
	return os.Mkdir(path, perm)
}

// Symlink makes the link name holding target as it is, and fails on
// anything in the way, a dangling link included.
func (f linkSafeFS) Symlink(target, name string) error {
	path, err := f.entry(name)
	if err != nil {
		return err
	}
	return os.Symlink(target, path)
}
