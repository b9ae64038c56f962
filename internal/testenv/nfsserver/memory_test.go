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
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMemoryFollowsRename2: Rename and Remove keep rename(2)'s and
// rmdir(2)'s rules, which a removal's walk relies on.
func TestMemoryFollowsRename2(t *testing.T) {
	tests := map[string]struct {
		op   func(m *Memory) error
		want error
	}{
		"rename a file over a file": {op: func(m *Memory) error { return m.Rename("a/file", "b/file") }},
		"rename a directory over an empty one": {op: func(m *Memory) error {
			return errors.Join(m.MkdirAll("b/empty", 0o755), m.Rename("a/sub", "b/empty"))
		}},
		"rename a directory over a full one": {op: func(m *Memory) error { return m.Rename("a/sub", "b") }, want: syscall.ENOTEMPTY},
		"rename a directory below itself":    {op: func(m *Memory) error { return m.Rename("a", "a/sub/a") }, want: syscall.EINVAL},
		"rename a directory over a file":     {op: func(m *Memory) error { return m.Rename("a/sub", "b/file") }, want: syscall.ENOTDIR},
		"remove a full directory":            {op: func(m *Memory) error { return m.Remove("a") }, want: syscall.ENOTEMPTY},
		"remove a missing name":              {op: func(m *Memory) error { return m.Remove("a/missing") }, want: fs.ErrNotExist},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := NewMemory()
			for _, dir := range []string{"a/sub", "b"} {
				if err := m.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, file := range []string{"a/file", "a/sub/inner", "b/file"} {
				f, err := m.Create(file)
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			err := tc.op(m)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// TestMemoryBuildsDeepTrees: a chain deeper than any host path is built,
// looked up and counted, and a vanished entry is listed once.
func TestMemoryBuildsDeepTrees(t *testing.T) {
	m := NewMemory()
	if err := m.MkdirAll("top", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.MakeChain("top", "level", 5000, "leaf"); err != nil {
		t.Fatal(err)
	}
	if err := m.MakeFiles("top", "file-", 3); err != nil {
		t.Fatal(err)
	}
	deep := "top/" + strings.Repeat("level/", 5000) + "leaf"
	if info, err := m.Lstat(deep); err != nil || !info.Mode().IsRegular() {
		t.Fatalf("cannot find the chain's leaf: %v", err)
	}
	if count, err := m.Count("top"); err != nil || count != 5004 {
		t.Fatalf("%d entries below top (%v), want 5004", count, err)
	}
	if err := m.ListVanished("top", "gone"); err != nil {
		t.Fatal(err)
	}
	var listings [][]string
	for range 2 {
		infos, err := m.ReadDir("top")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, info := range infos {
			if info.Name() == "gone" {
				names = append(names, info.Name())
			}
		}
		listings = append(listings, names)
	}
	if diff := cmp.Diff([][]string{{"gone"}, nil}, listings); diff != "" {
		t.Fatalf("listings of the vanished entry (-want +got):\n%s", diff)
	}
	if _, err := m.Lstat("top/gone"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the vanished entry is there: %v", err)
	}
}
