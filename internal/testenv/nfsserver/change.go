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
	"fmt"
	"os"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
)

// boundChange applies SETATTR to files under dir. go-billy's bound osfs
// offers only Chmod, so go-nfs would answer NFS3ERR_NOTSUPP to chown and
// utimes; these resolve paths inside dir, as the bound osfs does, with
// filepath-securejoin, which go-billy uses itself.
type boundChange struct {
	dir string
}

// Chmod changes the mode of what name resolves to inside dir.
func (c boundChange) Chmod(name string, mode os.FileMode) error {
	path, err := securejoin.SecureJoin(c.dir, name)
	if err != nil {
		return fmt.Errorf("cannot resolve %q: %w", name, err)
	}
	return os.Chmod(path, mode)
}

// Lchown changes the owner of name itself, a link included.
func (c boundChange) Lchown(name string, uid, gid int) error {
	path, err := linkSafeFS{dir: c.dir}.entry(name)
	if err != nil {
		return err
	}
	return os.Lchown(path, uid, gid)
}

// Chown changes the owner of what name resolves to inside dir.
func (c boundChange) Chown(name string, uid, gid int) error {
	path, err := securejoin.SecureJoin(c.dir, name)
	if err != nil {
		return fmt.Errorf("cannot resolve %q: %w", name, err)
	}
	return os.Chown(path, uid, gid)
}

func (c boundChange) Chtimes(name string, atime, mtime time.Time) error {
	path, err := securejoin.SecureJoin(c.dir, name)
	if err != nil {
		return fmt.Errorf("cannot resolve %q: %w", name, err)
	}
	return os.Chtimes(path, atime, mtime)
}

// squashedChange is what root may change once squashed to nobody: not owners.
type squashedChange struct {
	boundChange
}

func (squashedChange) Chown(string, int, int) error  { return os.ErrPermission }
func (squashedChange) Lchown(string, int, int) error { return os.ErrPermission }
