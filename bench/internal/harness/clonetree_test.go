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

package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCloneTree: the tree of scenario 11 has its size, files of each size
// class spread over nested directories, and symlinks, one of them
// dangling; it is the same for the same size, cp -a copies it whole, and it
// moves between folders unchanged.
func TestCloneTree(t *testing.T) {
	const total = 3 << 20
	dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	var stats []treeStats
	var digests []map[string]string
	for _, dir := range dirs {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		st, err := buildCloneTree(dir, total)
		if err != nil {
			t.Fatal(err)
		}
		digest, err := treeDigest(dir)
		if err != nil {
			t.Fatal(err)
		}
		stats, digests = append(stats, st), append(digests, digest)
	}
	if diff := cmp.Diff(digests[0], digests[1]); diff != "" {
		t.Errorf("two trees of one size differ (-first +second):\n%s", diff)
	}
	st := stats[0]
	if st.bytes < total*99/100 || st.bytes > total {
		t.Errorf("%d bytes, want about %d", st.bytes, total)
	}
	kinds := map[string]int{}
	deepest := 0
	for name, entry := range digests[0] {
		deepest = max(deepest, strings.Count(name, "/"))
		switch {
		case strings.HasPrefix(entry, "link "):
			kinds["links"]++
		case strings.HasPrefix(entry, "d"):
			kinds["dirs"]++
		default:
			kinds["files"]++
		}
	}
	want := map[string]int{"links": st.symlinks, "dirs": st.dirs, "files": st.files}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("entries (-stats +tree):\n%s", diff)
	}
	if st.files < 20 || st.symlinks < 4 || deepest < 3 {
		t.Errorf("%d files, %d symlinks, %d levels deep: want many small files, links and nested directories", st.files, st.symlinks, deepest)
	}
	if digests[0]["d2/dangling"] != "link no-such-file" {
		t.Errorf("the dangling link is %q", digests[0]["d2/dangling"])
	}

	if seconds, err := timeCopy(t.Context(), dirs[0], filepath.Join(t.TempDir(), "copy")); err != nil || seconds <= 0 {
		t.Errorf("cp -a: %v seconds, %v", seconds, err)
	}
	moved := t.TempDir()
	if err := moveEntries(dirs[0], moved); err != nil {
		t.Fatal(err)
	}
	got, err := treeDigest(moved)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(digests[1], got); diff != "" {
		t.Errorf("the moved tree (-want +got):\n%s", diff)
	}
}
