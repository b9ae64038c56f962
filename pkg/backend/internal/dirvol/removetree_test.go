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
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol/dirvoltest"
)

// makeChain makes depth directories named name in dir, each in the one
// before, and a file in the last, one descriptor at a time: the chain's
// path is longer than any call by path takes.
func makeChain(t testing.TB, dir, name string, depth int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range depth {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	defer unix.Close(fd)
	leaf, err := unix.Openat(fd, "leaf", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(leaf)
}

// makeFiles makes count empty files in dir.
func makeFiles(t testing.TB, dir string, count int) {
	t.Helper()
	for i := range count {
		f, err := os.Create(filepath.Join(dir, "file-"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// TestRemoveAllBounded: a volume of many files and a chain of directories
// deeper than a process may hold descriptors for are removed whole, with
// the open descriptors and the heap bounded meanwhile.
func TestRemoveAllBounded(t *testing.T) {
	tests := map[string]func(t testing.TB, dir string){
		"a directory of many files": func(t testing.TB, dir string) { t.Helper(); makeFiles(t, dir, dirvoltest.ManyFiles) },
		"a deep chain of directories": func(t testing.TB, dir string) {
			t.Helper()
			makeChain(t, dir, "level-of-a-deep-chain", dirvoltest.ChainDepth)
		},
	}
	for name, build := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			victim := filepath.Join(root, "victim")
			if err := os.Mkdir(victim, 0o755); err != nil {
				t.Fatal(err)
			}
			build(t, victim)
			base, err := dirvol.LocalFS{}.OpenBase(t.Context(), root, ".")
			if err != nil {
				t.Fatal(err)
			}
			defer base.Close()
			dirvoltest.CheckRemoval(t, func(ctx context.Context) error { return base.RemoveAll(ctx, "victim") })
			if _, err := os.Lstat(victim); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the tree is still there after RemoveAll: %v", err)
			}
		})
	}
}

// stoppingDir is a Dir whose context is cancelled once its tree saw
// removals removals and renames.
type stoppingDir struct {
	dirvol.Dir
	left   *int
	cancel context.CancelFunc
	// unlisted hides every name from ReadSomeNames.
	unlisted bool
}

func (d stoppingDir) OpenDir(ctx context.Context, name string) (dirvol.Dir, error) {
	child, err := d.Dir.OpenDir(ctx, name)
	if err != nil {
		return nil, err
	}
	return stoppingDir{Dir: child, left: d.left, cancel: d.cancel, unlisted: d.unlisted}, nil
}

func (d stoppingDir) ReadSomeNames(ctx context.Context, limit int) ([]string, error) {
	if d.unlisted {
		return nil, nil
	}
	return d.Dir.ReadSomeNames(ctx, limit)
}

func (d stoppingDir) step() {
	if *d.left--; *d.left == 0 {
		d.cancel()
	}
}

func (d stoppingDir) Remove(ctx context.Context, name string) error {
	d.step()
	return d.Dir.Remove(ctx, name)
}

func (d stoppingDir) Move(ctx context.Context, oldName string, to dirvol.Dir, newName string) error {
	d.step()
	return d.Dir.Move(ctx, oldName, to.(stoppingDir).Dir, newName)
}

// countEntries counts what lies below dir.
func countEntries(t *testing.T, dir string) int {
	t.Helper()
	count := -1
	err := filepath.WalkDir(dir, func(string, fs.DirEntry, error) error {
		count++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return count
}

// TestRemoveTreeResumes: a removal whose context ends halfway leaves a
// smaller tree, and the next one removes the rest instead of starting
// over: the two together remove or move each entry about once.
func TestRemoveTreeResumes(t *testing.T) {
	root := t.TempDir()
	victim := filepath.Join(root, "victim")
	if err := os.Mkdir(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	makeChain(t, victim, "level", 300)
	makeFiles(t, filepath.Join(victim, "level"), 300)
	total := countEntries(t, victim)
	base, err := dirvol.LocalFS{}.OpenBase(t.Context(), root, ".")
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	steps := total / 2
	first := stoppingDir{Dir: base, left: &steps, cancel: cancel}
	if err := dirvol.RemoveTree[dirvol.Dir](ctx, first, "victim"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the first removal returned %v, want it cut short", err)
	}
	left := countEntries(t, victim)
	if left >= total-total/3 {
		t.Fatalf("the first removal left %d of %d entries", left, total)
	}
	steps = 0
	second := stoppingDir{Dir: base, left: &steps, cancel: func() {}}
	if err := dirvol.RemoveTree[dirvol.Dir](t.Context(), second, "victim"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(victim); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the tree is still there: %v", err)
	}
	// Each directory below the top is moved once and removed once.
	if done := -steps; done > 2*total {
		t.Fatalf("the second removal took %d steps for the %d entries left of %d", done, left, total)
	}
}

// TestRemoveTreeChecksTheTopIsGone: a listing that shows nothing is not
// taken for an empty directory: the removal fails while anything remains.
func TestRemoveTreeChecksTheTopIsGone(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "victim", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	makeFiles(t, filepath.Join(root, "victim", "sub"), 3)
	base, err := dirvol.LocalFS{}.OpenBase(t.Context(), root, ".")
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	steps := -1
	blind := stoppingDir{Dir: base, left: &steps, cancel: func() {}, unlisted: true}
	if err := dirvol.RemoveTree[dirvol.Dir](t.Context(), blind, "victim"); err == nil {
		t.Fatal("RemoveTree reported success on a directory that still holds a tree")
	}
	if got := countEntries(t, filepath.Join(root, "victim")); got != 4 {
		t.Fatalf("%d entries left, want the 4 it could not see", got)
	}
}
