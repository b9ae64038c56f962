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

	securejoin "github.com/cyphar/filepath-securejoin"
	billy "github.com/go-git/go-billy/v5"
)

// errRoot refuses to remove or rename the served folder itself.
var errRoot = errors.New("the export's root cannot be removed or renamed")

// linkSafeFS is the bound osfs with Remove and Rename acting on a link
// itself: the bound osfs resolves the last element too, so removing a link
// would remove what it points to (re-rooted in the folder), unlike a real
// server.
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
