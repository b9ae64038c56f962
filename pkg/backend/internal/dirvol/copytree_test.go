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

package dirvol_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol/dirvoltest"
)

// describeTree describes every entry below dir by its path: a directory's
// mode, a file's mode and the hash of its content, a link's target.
func describeTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			tree[rel] = fmt.Sprintf("dir %v", info.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid))
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			tree[rel] = fmt.Sprintf("file %v %d %s", info.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid), len(data), hex.EncodeToString(sum[:4]))
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			tree[rel] = "link " + target
		default:
			tree[rel] = "special " + info.Mode().Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// writeFile writes size bytes of a pattern, with mode exactly.
func writeFile(t *testing.T, p string, size int, mode fs.FileMode) {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte((i*7 + size) % 256) //nolint:gosec // in range
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func mkdirMode(t *testing.T, p string, mode fs.FileMode) {
	t.Helper()
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// openCopyDirs opens root and the directories src and dst below it, closed
// when the test ends.
func openCopyDirs(t *testing.T, root, src, dst string) (base, from, into dirvol.Dir) {
	t.Helper()
	base, err := dirvol.LocalFS{}.OpenBase(t.Context(), root, ".")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	if from, err = base.OpenDir(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { from.Close() })
	if into, err = base.OpenDir(t.Context(), dst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { into.Close() })
	return base, from, into
}

// sparseFile builds a source holding the sparse file "sparse" of size bytes.
func sparseFile(size int64) func(t *testing.T, src, _ string) {
	return func(t *testing.T, src, _ string) {
		t.Helper()
		f, err := os.Create(filepath.Join(src, "sparse"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
	}
}

// copyBetween opens src and dst below root and copies src into dst.
func copyBetween(ctx context.Context, t *testing.T, root, src, dst string, limit int64) (dirvol.Copied, error) {
	t.Helper()
	_, from, into := openCopyDirs(t, root, src, dst)
	return dirvol.CopyTree(ctx, from, into, limit, dirvol.NoOwner)
}

// TestCopyTree: what a source holds is copied as the rules say, and what
// cannot be is refused.
func TestCopyTree(t *testing.T) {
	tests := map[string]struct {
		build func(t *testing.T, src, outside string)
		limit int64
		// want describes the copy; nil: the source's own description.
		want        map[string]string
		wantCopied  dirvol.Copied
		wantErr     error
		requireRoot bool
	}{
		"subfolders and files of several sizes": {
			build: func(t *testing.T, src, _ string) {
				t.Helper()
				mkdirMode(t, filepath.Join(src, "a"), 0o755)
				mkdirMode(t, filepath.Join(src, "a", "b"), 0o750)
				mkdirMode(t, filepath.Join(src, "a", "b", "c"), 0o1777)
				mkdirMode(t, filepath.Join(src, "read-only"), 0o555)
				writeFile(t, filepath.Join(src, "empty"), 0, 0o644)
				writeFile(t, filepath.Join(src, "a", "small"), 100, 0o600)
				writeFile(t, filepath.Join(src, "a", "b", "two-chunks"), 2<<20+3, 0o640)
				writeFile(t, filepath.Join(src, "a", "b", "c", "exec"), 4096, 0o755)
			},
			limit:      10 << 20,
			wantCopied: dirvol.Copied{Dirs: 4, Files: 4, Bytes: 100 + 2<<20 + 3 + 4096},
		},
		"links, absolute and relative, inside and outside, are copied as links": {
			build: func(t *testing.T, src, outside string) {
				t.Helper()
				writeFile(t, filepath.Join(outside, "secret"), 10, 0o600)
				writeFile(t, filepath.Join(src, "file"), 10, 0o644)
				for name, target := range map[string]string{
					"abs-out": filepath.Join(outside, "secret"), "rel-out": "../outside/secret",
					"rel-in": "file", "abs-root": "/", "dangling": "nowhere/at/all", "loop": "loop",
				} {
					if err := os.Symlink(target, filepath.Join(src, name)); err != nil {
						t.Fatal(err)
					}
				}
			},
			limit:      100,
			wantCopied: dirvol.Copied{Files: 1, Links: 6, Bytes: 10},
		},
		"setuid and setgid are dropped": {
			build: func(t *testing.T, src, _ string) {
				t.Helper()
				writeFile(t, filepath.Join(src, "suid"), 1, 0o4755)
				mkdirMode(t, filepath.Join(src, "sgid"), 0o2775)
			},
			limit: 10,
			want: map[string]string{
				"suid": "file -rwxr-xr-x 1 " + hashOf(1), "sgid": "dir -rwxrwxr-x",
			},
			wantCopied: dirvol.Copied{Dirs: 1, Files: 1, Bytes: 1},
		},
		"FIFOs and sockets are skipped": {
			build: func(t *testing.T, src, _ string) {
				t.Helper()
				if err := unix.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
					t.Fatal(err)
				}
				fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer unix.Close(fd)
				if err := unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(src, "sock")}); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(src, "file"), 3, 0o644)
			},
			limit:      10,
			want:       map[string]string{"file": "file -rw-r--r-- 3 " + hashOf(3)},
			wantCopied: dirvol.Copied{Files: 1, Bytes: 3, Skipped: 2, SkippedNames: []string{"fifo", "sock"}},
		},
		"devices are skipped": {
			requireRoot: true,
			build: func(t *testing.T, src, _ string) {
				t.Helper()
				if err := unix.Mknod(filepath.Join(src, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil { //nolint:gosec // a small device number
					t.Fatal(err)
				}
				if err := unix.Mknod(filepath.Join(src, "disk"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))); err != nil { //nolint:gosec // a small device number
					t.Fatal(err)
				}
			},
			limit:      10,
			want:       map[string]string{},
			wantCopied: dirvol.Copied{Skipped: 2, SkippedNames: []string{"disk", "null"}},
		},
		"more data than the volume's size": {
			build: func(t *testing.T, src, _ string) {
				t.Helper()
				writeFile(t, filepath.Join(src, "one"), 600, 0o644)
				writeFile(t, filepath.Join(src, "two"), 600, 0o644)
			},
			limit:   1000,
			wantErr: dirvol.ErrTooLarge,
		},
		"a sparse file larger than the volume's size, never read": {
			build:   sparseFile(1 << 40),
			limit:   1 << 30,
			wantErr: dirvol.ErrTooLarge,
		},
		"a sparse file within the volume's size is written whole": {
			build:      sparseFile(3 << 20),
			limit:      3 << 20,
			wantCopied: dirvol.Copied{Files: 1, Bytes: 3 << 20},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.requireRoot && os.Geteuid() != 0 {
				t.Skip("only root makes device nodes")
			}
			root := t.TempDir()
			src, dst, outside := filepath.Join(root, "src"), filepath.Join(root, "dst"), filepath.Join(root, "outside")
			for _, d := range []string{src, dst, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			tc.build(t, src, outside)
			copied, err := copyBetween(t.Context(), t, root, "src", "dst", tc.limit)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("CopyTree: %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			want := tc.want
			if want == nil {
				want = describeTree(t, src)
			}
			if diff := cmp.Diff(tc.wantCopied, copied, sortedNames); diff != "" {
				t.Errorf("what was copied (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, describeTree(t, dst)); diff != "" {
				t.Errorf("the copy (-want +got):\n%s", diff)
			}
		})
	}
}

// sortedNames compares the skipped names in any order: listings have none.
var sortedNames = cmp.Transformer("sorted", func(names []string) string {
	sorted := append([]string(nil), names...)
	for i := range sorted {
		for j := i + 1; j < len(sorted); j++ {
			if sorted[j] < sorted[i] {
				sorted[i], sorted[j] = sorted[j], sorted[i]
			}
		}
	}
	return strings.Join(sorted, ",")
})

// hashOf is what describeTree shows of a file writeFile wrote with size
// bytes.
func hashOf(size int) string {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte((i*7 + size) % 256) //nolint:gosec // in range
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:4])
}

// vanishingDir is a source directory whose entries named "gone" (below
// host) are removed as soon as a listing names them, before the copy
// reaches them.
type vanishingDir struct {
	dirvol.Dir
	host string
}

func (d vanishingDir) OpenDir(ctx context.Context, name string) (dirvol.Dir, error) {
	sub, err := d.Dir.OpenDir(ctx, name)
	if err != nil {
		return nil, err
	}
	return vanishingDir{Dir: sub, host: filepath.Join(d.host, name)}, nil
}

func (d vanishingDir) ReadPage(ctx context.Context, from dirvol.ListPos, limit int) ([]dirvol.ListEntry, error) {
	entries, err := d.Dir.ReadPage(ctx, from, limit)
	for _, e := range entries {
		if strings.HasPrefix(e.Name, "gone") {
			if err := os.RemoveAll(filepath.Join(d.host, e.Name)); err != nil {
				return nil, err
			}
		}
	}
	return entries, err
}

// TestCopyTreeSourceChanging: entries removed between their listing and
// their copy are skipped, and the rest copied.
func TestCopyTreeSourceChanging(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	mkdirMode(t, src, 0o755)
	mkdirMode(t, dst, 0o755)
	mkdirMode(t, filepath.Join(src, "gone-dir"), 0o755)
	writeFile(t, filepath.Join(src, "gone-dir", "file"), 10, 0o644)
	writeFile(t, filepath.Join(src, "gone-file"), 10, 0o644)
	if err := os.Symlink("x", filepath.Join(src, "gone-link")); err != nil {
		t.Fatal(err)
	}
	mkdirMode(t, filepath.Join(src, "kept"), 0o755)
	writeFile(t, filepath.Join(src, "kept", "file"), 10, 0o644)
	writeFile(t, filepath.Join(src, "kept", "gone-too"), 10, 0o644)

	_, from, into := openCopyDirs(t, root, "src", "dst")
	copied, err := dirvol.CopyTree[dirvol.Dir](t.Context(), vanishingDir{Dir: from, host: src}, into, 1<<20, dirvol.NoOwner)
	if err != nil {
		t.Fatalf("CopyTree: %v", err)
	}
	want := map[string]string{"kept": "dir -rwxr-xr-x", "kept/file": "file -rw-r--r-- 10 " + hashOf(10)}
	if diff := cmp.Diff(want, describeTree(t, dst)); diff != "" {
		t.Errorf("the copy (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(dirvol.Copied{Dirs: 1, Files: 1, Bytes: 10}, copied); diff != "" {
		t.Errorf("what was copied (-want +got):\n%s", diff)
	}
}

// TestCopyTreeCancelled: a copy whose context ends stops with its error.
func TestCopyTreeCancelled(t *testing.T) {
	root := t.TempDir()
	mkdirMode(t, filepath.Join(root, "src"), 0o755)
	mkdirMode(t, filepath.Join(root, "dst"), 0o755)
	makeFiles(t, filepath.Join(root, "src"), 10)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := copyBetween(ctx, t, root, "src", "dst", 1<<20); !errors.Is(err, context.Canceled) {
		t.Fatalf("CopyTree: %v, want %v", err, context.Canceled)
	}
}

// TestCopyTreeBounded: a wide directory and a chain as deep as a copy
// goes are copied whole, and a deeper chain refused, with the open
// descriptors and the heap bounded meanwhile.
func TestCopyTreeBounded(t *testing.T) {
	tests := map[string]struct {
		build   func(t testing.TB, dir string)
		check   func(t *testing.T, src, dst string)
		wantErr string
	}{
		"a directory of many files": {
			build: func(t testing.TB, dir string) { t.Helper(); makeFiles(t, dir, dirvoltest.ManyFiles) },
			check: func(t *testing.T, src, dst string) {
				t.Helper()
				if diff := cmp.Diff(describeTree(t, src), describeTree(t, dst)); diff != "" {
					t.Errorf("the copy (-source +copy):\n%s", diff)
				}
			},
		},
		"a chain as deep as a copy goes": {
			build: func(t testing.TB, dir string) { t.Helper(); makeChain(t, dir, "d", dirvoltest.CopyDepth) },
			check: func(t *testing.T, _, dst string) {
				t.Helper()
				if depth, leaf := chainDepth(t, dst, "d"); depth != dirvoltest.CopyDepth || !leaf {
					t.Errorf("the copy is a chain of %d directories, with its leaf: %v; want %d with it", depth, leaf, dirvoltest.CopyDepth)
				}
			},
		},
		"a deeper chain": {
			build: func(t testing.TB, dir string) {
				t.Helper()
				makeChain(t, dir, "d", max(dirvoltest.ChainDepth, dirvol.MaxCopyDepth+1))
			},
			wantErr: "more than 2048 levels deep",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			mkdirMode(t, filepath.Join(root, "src"), 0o755)
			mkdirMode(t, filepath.Join(root, "dst"), 0o755)
			tc.build(t, filepath.Join(root, "src"))
			base, from, into := openCopyDirs(t, root, "src", "dst")
			// Deeper than os.RemoveAll, which t.TempDir's cleanup uses, goes.
			defer func() {
				for _, d := range []string{"src", "dst"} {
					if err := base.RemoveAll(context.Background(), d); err != nil {
						t.Error(err)
					}
				}
			}()
			var copyErr error
			dirvoltest.CheckRemoval(t, func(ctx context.Context) error {
				_, copyErr = dirvol.CopyTree(ctx, from, into, 1<<30, dirvol.NoOwner)
				if ctx.Err() != nil {
					return copyErr
				}
				return nil
			})
			if tc.wantErr != "" {
				if copyErr == nil || !strings.Contains(copyErr.Error(), tc.wantErr) {
					t.Fatalf("CopyTree: %v, want an error saying %q", copyErr, tc.wantErr)
				}
				return
			}
			if copyErr != nil {
				t.Fatalf("CopyTree: %v", copyErr)
			}
			tc.check(t, filepath.Join(root, "src"), filepath.Join(root, "dst"))
		})
	}
}

// chainDepth follows the directories named name from dir, one descriptor
// at a time, and returns how many there are and whether the last holds
// the file "leaf".
func chainDepth(t *testing.T, dir, name string) (int, bool) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	depth := 0
	for {
		next, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW, 0)
		if errors.Is(err, syscall.ENOENT) {
			break
		}
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd, depth = next, depth+1
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	return depth, unix.Fstatat(fd, "leaf", &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// TestReadPageResumes: a listing read in pages, each from a Dir opened
// anew at the position the last page ended, names every entry once.
func TestReadPageResumes(t *testing.T) {
	root := t.TempDir()
	mkdirMode(t, filepath.Join(root, "d"), 0o755)
	makeFiles(t, filepath.Join(root, "d"), 1000)
	base, err := dirvol.LocalFS{}.OpenBase(t.Context(), root, ".")
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	seen := map[string]int{}
	var from dirvol.ListPos
	for {
		d, err := base.OpenDir(t.Context(), "d")
		if err == nil {
			var page []dirvol.ListEntry
			page, err = d.ReadPage(t.Context(), from, 7)
			d.Close()
			if len(page) == 0 && err == nil {
				break
			}
			for _, e := range page {
				seen[e.Name]++
				from = e.Next
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{}
	for i := range 1000 {
		want["file-"+strconv.Itoa(i)] = 1
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("names listed (-want +got):\n%s", diff)
	}
}

// repeatingDir is a source directory whose listings name every entry
// twice, as a listing that shifts under changes may.
type repeatingDir struct {
	dirvol.Dir
}

func (d repeatingDir) OpenDir(ctx context.Context, name string) (dirvol.Dir, error) {
	sub, err := d.Dir.OpenDir(ctx, name)
	return repeatingDir{Dir: sub}, err
}

func (d repeatingDir) ReadPage(ctx context.Context, from dirvol.ListPos, limit int) ([]dirvol.ListEntry, error) {
	entries, err := d.Dir.ReadPage(ctx, from, limit)
	if len(entries) == 0 {
		return entries, err
	}
	again := append([]dirvol.ListEntry(nil), entries...)
	for i := range again[:len(again)-1] {
		again[i].Next = from
	}
	return append(entries[:len(entries):len(entries)], again...), err
}

// TestCopyTreeListedTwice: entries a listing names twice are copied once.
func TestCopyTreeListedTwice(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	mkdirMode(t, src, 0o755)
	mkdirMode(t, dst, 0o755)
	mkdirMode(t, filepath.Join(src, "dir"), 0o755)
	writeFile(t, filepath.Join(src, "dir", "file"), 10, 0o644)
	writeFile(t, filepath.Join(src, "file"), 20, 0o644)
	if err := os.Symlink("file", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	_, from, into := openCopyDirs(t, root, "src", "dst")
	copied, err := dirvol.CopyTree[dirvol.Dir](t.Context(), repeatingDir{Dir: from}, into, 1<<20, dirvol.NoOwner)
	if err != nil {
		t.Fatalf("CopyTree: %v", err)
	}
	if diff := cmp.Diff(describeTree(t, src), describeTree(t, dst)); diff != "" {
		t.Errorf("the copy (-source +copy):\n%s", diff)
	}
	if diff := cmp.Diff(dirvol.Copied{Dirs: 1, Files: 2, Links: 1, Bytes: 30}, copied); diff != "" {
		t.Errorf("what was copied (-want +got):\n%s", diff)
	}
}

// TestCopyTreeOwner: the directories and files a copy makes get the owner
// it is given; its symlinks stay the copier's.
func TestCopyTreeOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root gives files away")
	}
	root := t.TempDir()
	src := filepath.Join(root, "src")
	mkdirMode(t, src, 0o755)
	mkdirMode(t, filepath.Join(root, "dst"), 0o755)
	mkdirMode(t, filepath.Join(src, "dir"), 0o750)
	writeFile(t, filepath.Join(src, "dir", "file"), 10, 0o640)
	if err := os.Symlink("dir", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	_, from, into := openCopyDirs(t, root, "src", "dst")
	if _, err := dirvol.CopyTree(t.Context(), from, into, 100, dirvol.Owner{UID: 1234, GID: 5678}); err != nil {
		t.Fatalf("CopyTree: %v", err)
	}
	got := map[string]string{}
	for _, name := range []string{"dir", "dir/file", "link"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, "dst", name), &st); err != nil {
			t.Fatal(err)
		}
		got[name] = fmt.Sprintf("%d:%d %o", st.Uid, st.Gid, st.Mode&0o7777)
	}
	want := map[string]string{"dir": "1234:5678 750", "dir/file": "1234:5678 640", "link": "0:0 777"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("owners and modes of the copy (-want +got):\n%s", diff)
	}
}

// countingDir counts the directories opened below it, and holds no
// descriptor when free says so.
type countingDir struct {
	dirvol.Dir
	opens *int
}

func (d countingDir) OpenDir(ctx context.Context, name string) (countingDir, error) {
	*d.opens++
	sub, err := d.Dir.OpenDir(ctx, name)
	return countingDir{Dir: sub, opens: d.opens}, err
}

// freeDir is a countingDir that says it holds no descriptor.
type freeDir struct {
	countingDir
}

func (d freeDir) OpenDir(ctx context.Context, name string) (freeDir, error) {
	sub, err := d.countingDir.OpenDir(ctx, name)
	return freeDir{sub}, err
}

func (freeDir) HoldsNoDescriptor() {}

// TestCopyTreeOfAChainOpens: a chain is opened once per level on each
// side when the directories hold no descriptor, and reopened by name past
// the window of open directories otherwise.
func TestCopyTreeOfAChainOpens(t *testing.T) {
	const depth = 50
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	mkdirMode(t, src, 0o755)
	makeChain(t, src, "d", depth)
	mkdirMode(t, dst, 0o755)
	open := func(name string) dirvol.Dir {
		t.Helper()
		d, err := dirvol.LocalFS{}.OpenBase(t.Context(), root, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	var descriptorOpens, freeOpens int
	if _, err := dirvol.CopyTree(t.Context(), countingDir{open("src"), &descriptorOpens}, countingDir{open("dst"), &descriptorOpens}, 1<<20, dirvol.NoOwner); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	mkdirMode(t, dst, 0o755)
	if _, err := dirvol.CopyTree(t.Context(), freeDir{countingDir{open("src"), &freeOpens}}, freeDir{countingDir{open("dst"), &freeOpens}}, 1<<20, dirvol.NoOwner); err != nil {
		t.Fatal(err)
	}
	if freeOpens != 2*depth {
		t.Errorf("directories holding no descriptor: %d opens for a chain of %d, want %d", freeOpens, depth, 2*depth)
	}
	if descriptorOpens <= 2*depth {
		t.Errorf("directories holding descriptors: %d opens for a chain of %d, want the reopens past the window too", descriptorOpens, depth)
	}
}

// expiringDir is a source directory whose listings resumed from a
// position fail as expired while expirations lasts.
type expiringDir struct {
	dirvol.Dir
	expirations *int
}

func (d expiringDir) OpenDir(ctx context.Context, name string) (dirvol.Dir, error) {
	sub, err := d.Dir.OpenDir(ctx, name)
	return expiringDir{Dir: sub, expirations: d.expirations}, err
}

func (d expiringDir) ReadPage(ctx context.Context, from dirvol.ListPos, limit int) ([]dirvol.ListEntry, error) {
	if from != (dirvol.ListPos{}) && *d.expirations > 0 {
		*d.expirations--
		return nil, fmt.Errorf("a changed directory: %w", dirvol.ErrListPosExpired)
	}
	return d.Dir.ReadPage(ctx, from, limit)
}

// TestCopyTreeListingExpired: a directory whose listing position expired
// is listed again from its start, what was copied skipped; one whose
// position keeps expiring fails the copy.
func TestCopyTreeListingExpired(t *testing.T) {
	tests := map[string]struct {
		expirations int
		wantErr     error
	}{
		"expired once":     {expirations: 1},
		"expired for ever": {expirations: 1000, wantErr: dirvol.ErrListPosExpired},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
			mkdirMode(t, src, 0o755)
			mkdirMode(t, dst, 0o755)
			// Each directory met resumes its parent's listing after it.
			for _, dir := range []string{"a", "b", "c"} {
				mkdirMode(t, filepath.Join(src, dir), 0o755)
				writeFile(t, filepath.Join(src, dir, "file"), 10, 0o644)
			}
			writeFile(t, filepath.Join(src, "file"), 20, 0o644)
			_, from, into := openCopyDirs(t, root, "src", "dst")
			expirations := tc.expirations
			copied, err := dirvol.CopyTree[dirvol.Dir](t.Context(), expiringDir{Dir: from, expirations: &expirations}, into, 1<<20, dirvol.NoOwner)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("CopyTree: %v, want an error wrapping %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("CopyTree: %v", err)
			}
			if diff := cmp.Diff(describeTree(t, src), describeTree(t, dst)); diff != "" {
				t.Errorf("the copy (-source +copy):\n%s", diff)
			}
			if diff := cmp.Diff(dirvol.Copied{Dirs: 3, Files: 4, Bytes: 50}, copied); diff != "" {
				t.Errorf("what was copied (-want +got):\n%s", diff)
			}
		})
	}
}
