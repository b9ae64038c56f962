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

package dirvoltest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
)

// Serve serves the host directory dir through the Filesystem under test
// until the test ends, and returns it with the root and base that OpenBase
// takes to reach dir.
type Serve func(t *testing.T, dir string) (fsys dirvol.Filesystem, root, base string)

// contractCase is one operation on the Dir of a base holding plantBase's tree.
type contractCase struct {
	op func(ctx context.Context, d dirvol.Dir) error
	// wantErr is what op's error must wrap: nil for none, errAny for any.
	wantErr error
	// want is the base's tree after op; nil means unchanged.
	want []string
	// check, if set, checks the base at host after op.
	check func(host string) error
	// needs is what the file system must offer for the case to apply.
	needs backendtest.Capability
}

// errAny accepts any error: the contract names no sentinel for it.
var errAny = errors.New("any error")

// initialTree is the base's tree as plantBase makes it.
var initialTree = []string{"dir/", "dir/inner", "file", "link-dir", "link-file", "link-out", "link-up", "link-within"}

// TestFilesystem checks the contract of dirvol.Filesystem and dirvol.Dir on
// what serve returns, one base per case; the cases that need a capability
// among lacking are skipped.
func TestFilesystem(t *testing.T, serve Serve, lacking ...backendtest.Capability) {
	tmp := t.TempDir()
	export := filepath.Join(tmp, "export")
	backendtest.WriteFile(t, filepath.Join(tmp, "outside", "keep"), "outside the served directory")
	if err := os.Mkdir(filepath.Join(tmp, "outside", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(export, 0o755); err != nil {
		t.Fatal(err)
	}
	fsys, root, base := serve(t, export)
	t.Run("OpenBase", func(t *testing.T) { checkOpenBase(t, fsys, root, base, export) })
	t.Run("Space", func(t *testing.T) { checkSpace(t, fsys, root, base, export) })
	cases := map[string]contractCase{}
	for _, group := range []map[string]contractCase{lookupCases(), someNamesCases(), fileCases(), dirCases(), ownerCases(), renameCases(), removeCases(), copyReadCases(), copyWriteCases()} {
		for name, tc := range group {
			cases[name] = tc
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range cases {
			if !yield(name) {
				return
			}
		}
	})
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			if needs := cases[name].needs; needs != "" && slices.Contains(lacking, needs) {
				t.Skipf("the file system under test lacks %s", needs)
			}
			rel := path.Join(strconv.Itoa(i), "base")
			host := filepath.Join(export, filepath.FromSlash(rel))
			plantBase(t, tmp, host)
			checkCase(t, cases[name], tmp, host, func(ctx context.Context) (dirvol.Dir, error) {
				return fsys.OpenBase(ctx, root, path.Join(base, rel))
			})
		})
	}
}

// plantBase makes the base's tree at host, with symlinks leading out of it
// (out of the served directory, and beside the base within it) and within
// it, which no Dir follows either.
func plantBase(t *testing.T, tmp, host string) {
	t.Helper()
	backendtest.WriteFile(t, filepath.Join(host, "file"), "content")
	backendtest.WriteFile(t, filepath.Join(host, "dir", "inner"), "inner")
	backendtest.WriteFile(t, filepath.Join(host, "..", "beside", "keep"), "beside the base")
	backendtest.Symlink(t, filepath.Join(tmp, "outside"), filepath.Join(host, "link-out"))
	backendtest.Symlink(t, "../beside", filepath.Join(host, "link-up"))
	backendtest.Symlink(t, filepath.Join(tmp, "outside", "keep"), filepath.Join(host, "link-file"))
	backendtest.Symlink(t, "dir", filepath.Join(host, "link-dir"))
	backendtest.Symlink(t, "file", filepath.Join(host, "link-within"))
}

// checkCase runs one case on the base at host and checks its error, the
// base's tree after it and that nothing else under tmp changed.
func checkCase(t *testing.T, tc contractCase, tmp, host string, open func(context.Context) (dirvol.Dir, error)) {
	t.Helper()
	before := backendtest.Snapshot(t, tmp, host)
	d, err := open(t.Context())
	if err != nil {
		t.Fatalf("OpenBase: %v", err)
	}
	err = tc.op(t.Context(), d)
	if cerr := d.Close(); cerr != nil {
		t.Errorf("Close: %v", cerr)
	}
	switch {
	case tc.wantErr == nil && err != nil:
		t.Errorf("unexpected error: %v", err)
	case errors.Is(tc.wantErr, errAny) && err == nil:
		t.Error("no error, want one")
	case tc.wantErr != nil && !errors.Is(tc.wantErr, errAny) && !errors.Is(err, tc.wantErr):
		t.Errorf("error %v, want one wrapping %v", err, tc.wantErr)
	}
	want := tc.want
	if want == nil {
		want = initialTree
	}
	if diff := cmp.Diff(want, backendtest.Tree(t, host)); diff != "" {
		t.Errorf("tree of the base (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, backendtest.Snapshot(t, tmp, host)); diff != "" {
		t.Errorf("files outside the base changed (-before +after):\n%s", diff)
	}
	if tc.check != nil {
		if err := tc.check(host); err != nil {
			t.Error(err)
		}
	}
}

// checkOpenBase checks what OpenBase refuses, and how.
func checkOpenBase(t *testing.T, fsys dirvol.Filesystem, root, base, export string) {
	t.Helper()
	backendtest.WriteFile(t, filepath.Join(export, "base-file"), "not a directory")
	backendtest.Symlink(t, filepath.Join(filepath.Dir(export), "outside"), filepath.Join(export, "base-link"))
	tests := map[string]struct {
		base string
		want error
	}{
		"missing":                     {base: "base-missing", want: backend.ErrUnavailable},
		"a file":                      {base: "base-file", want: backend.ErrInvalidSpec},
		"a symlink out of the export": {base: "base-link", want: backend.ErrInvalidSpec},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, err := fsys.OpenBase(t.Context(), root, path.Join(base, tc.base))
			if err == nil {
				d.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want one wrapping %v", err, tc.want)
			}
		})
	}
}

// checkSpace checks that Space reports the figures of the served
// directory's file system, as statfs(2) reads them on the host.
func checkSpace(t *testing.T, fsys dirvol.Filesystem, root, base, export string) {
	t.Helper()
	d, err := fsys.OpenBase(t.Context(), root, base)
	if err != nil {
		t.Fatalf("OpenBase: %v", err)
	}
	defer d.Close()
	got, err := d.Space(t.Context())
	if err != nil {
		t.Fatalf("Space: %v", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(export, &st); err != nil {
		t.Fatal(err)
	}
	bsize := uint64(st.Bsize) //nolint:gosec // a block size is positive
	want := dirvol.NewSpace(st.Bavail*bsize, st.Blocks*bsize)
	// Other writers on this machine move the available figure a little.
	const tolerance = 256 << 20
	near := cmp.Comparer(func(a, b int64) bool { return max(a, b)-min(a, b) <= tolerance })
	if diff := cmp.Diff(want, got, near); diff != "" {
		t.Errorf("Space against statfs (-want +got):\n%s", diff)
	}
}

// withDir runs op on the directory name in d, and closes it.
func withDir(ctx context.Context, d dirvol.Dir, name string, op func(sub dirvol.Dir) error) error {
	sub, err := d.OpenDir(ctx, name)
	if err != nil {
		return err
	}
	return errors.Join(op(sub), sub.Close())
}

// expect reports got unless it is want.
func expect[T comparable](what string, got, want T) error {
	if got != want {
		return fmt.Errorf("%s is %v, want %v", what, got, want)
	}
	return nil
}

// without returns the initial tree without the names drop, with add.
func without(drop []string, add ...string) []string {
	tree := slices.DeleteFunc(slices.Clone(initialTree), func(name string) bool { return slices.Contains(drop, name) })
	tree = append(tree, add...)
	slices.Sort(tree)
	return tree
}
