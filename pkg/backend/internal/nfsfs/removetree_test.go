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
	"io/fs"
	"testing"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol/dirvoltest"
)

// serveMemory serves a tree in memory on loopback until the test ends, with
// the directory victim in it, and returns the tree and the export's root as
// a Dir.
func serveMemory(t *testing.T) (*nfsserver.Memory, dirvol.Dir) {
	t.Helper()
	memory := nfsserver.NewMemory()
	if err := memory.MkdirAll("victim", 0o755); err != nil {
		t.Fatal(err)
	}
	server, err := nfsserver.Start(context.Background(), nfsserver.Options{Memory: memory, Path: exportPath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := server.Stop(); err != nil {
			t.Error(err)
		}
	})
	base, err := New(dial(t, server), exportPath).OpenBase(t.Context(), exportPath, ".")
	if err != nil {
		t.Fatal(err)
	}
	return memory, base
}

// TestRemoveAllBounded: over NFS too, a volume of many files and a chain
// of directories whose path is far longer than a server takes are removed
// whole, with the open descriptors and the heap bounded meanwhile.
func TestRemoveAllBounded(t *testing.T) {
	tests := map[string]func(m *nfsserver.Memory) error{
		"a directory of many files": func(m *nfsserver.Memory) error {
			return m.MakeFiles("victim", "file-", dirvoltest.ManyFiles)
		},
		"a deep chain of directories": func(m *nfsserver.Memory) error {
			return m.MakeChain("victim", "level-of-a-deep-chain", dirvoltest.ChainDepth, "leaf")
		},
	}
	for name, build := range tests {
		t.Run(name, func(t *testing.T) {
			memory, base := serveMemory(t)
			if err := build(memory); err != nil {
				t.Fatal(err)
			}
			dirvoltest.CheckRemoval(t, func(ctx context.Context) error { return base.RemoveAll(ctx, "victim") })
			if _, err := memory.Lstat("victim"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the tree is still there after RemoveAll: %v", err)
			}
		})
	}
}

// TestRemoveAllAfterAVanishedEntry: an entry that vanishes between READDIR
// and LOOKUP is skipped, and the rest removed.
func TestRemoveAllAfterAVanishedEntry(t *testing.T) {
	memory, base := serveMemory(t)
	if err := memory.MakeFiles("victim", "file-", 3); err != nil {
		t.Fatal(err)
	}
	// Listed first: the names are sorted.
	if err := memory.ListVanished("victim", "a-vanished-file"); err != nil {
		t.Fatal(err)
	}
	if err := base.RemoveAll(t.Context(), "victim"); err != nil {
		t.Fatal(err)
	}
	if _, err := memory.Lstat("victim"); !errors.Is(err, fs.ErrNotExist) {
		count, _ := memory.Count("victim")
		t.Fatalf("RemoveAll reported success with %d entries left in the directory: %v", count, err)
	}
}
