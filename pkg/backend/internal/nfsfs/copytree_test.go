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
	"path"
	"strings"
	"testing"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol/dirvoltest"
)

// Sizes of the trees the copy tests copy over NFS: pages of a listing,
// and a chain far deeper than the window of directories a copy by
// descriptors keeps open, quick under the race detector. The test server
// keeps each handle's path, so a chain as deep as a copy goes would cost
// its heap the depth squared.
const (
	copyFiles = 500
	copyDepth = 300
)

// copyVictim copies victim into the new directory copy of base.
func copyVictim(ctx context.Context, base dirvol.Dir) (dirvol.Copied, error) {
	if err := base.Mkdir(ctx, "copy", 0o700); err != nil {
		return dirvol.Copied{}, err
	}
	from, err := base.OpenDir(ctx, "victim")
	if err != nil {
		return dirvol.Copied{}, err
	}
	defer from.Close()
	into, err := base.OpenDir(ctx, "copy")
	if err != nil {
		return dirvol.Copied{}, err
	}
	defer into.Close()
	return from.CopyTo(ctx, into, 1<<30, dirvol.NoOwner)
}

// TestCopyToBounded: over NFS, a directory of many files and a deep chain
// of directories are copied whole by file handles, with the open
// descriptors and the heap bounded meanwhile.
func TestCopyToBounded(t *testing.T) {
	const level = "level-of-a-deep-chain"
	tests := map[string]struct {
		build func(m *nfsserver.Memory) error
		check func(m *nfsserver.Memory) error
		want  dirvol.Copied
	}{
		"a directory of many files": {
			build: func(m *nfsserver.Memory) error { return m.MakeFiles("victim", "file-", copyFiles) },
			check: func(m *nfsserver.Memory) error {
				count, err := m.Count("copy")
				if err == nil && count != copyFiles {
					err = fmt.Errorf("the copy holds %d entries, want %d files", count, copyFiles)
				}
				return err
			},
			want: dirvol.Copied{Files: copyFiles},
		},
		"a deep chain of directories": {
			build: func(m *nfsserver.Memory) error { return m.MakeChain("victim", level, copyDepth, "leaf") },
			check: func(m *nfsserver.Memory) error {
				_, err := m.Lstat(path.Join("copy", strings.Repeat(level+"/", copyDepth), "leaf"))
				return err
			},
			want: dirvol.Copied{Dirs: copyDepth, Files: 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			memory, base := serveMemory(t)
			if err := tc.build(memory); err != nil {
				t.Fatal(err)
			}
			var copied dirvol.Copied
			dirvoltest.CheckRemoval(t, func(ctx context.Context) error {
				var err error
				copied, err = copyVictim(ctx, base)
				return err
			})
			if copied.Dirs != tc.want.Dirs || copied.Files != tc.want.Files {
				t.Errorf("copied %d directories and %d files, want %d and %d", copied.Dirs, copied.Files, tc.want.Dirs, tc.want.Files)
			}
			if err := tc.check(memory); err != nil {
				t.Errorf("the copy is not whole: %v", err)
			}
		})
	}
}
