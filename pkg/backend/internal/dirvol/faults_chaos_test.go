//go:build chaos

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
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/provfleet/provfleet/internal/chaoshistory"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol/dirvoltest"
)

// faultOutcomes are what each kind of fault returns, and whether the
// operation was carried out.
var faultOutcomes = map[string]struct {
	errno      syscall.Errno
	carriedOut bool
}{
	"":                         {carriedOut: true},
	chaoshistory.FaultEIO:      {errno: syscall.EIO},
	chaoshistory.FaultENOSPC:   {errno: syscall.ENOSPC},
	chaoshistory.FaultEACCES:   {errno: syscall.EACCES},
	chaoshistory.FaultEROFS:    {errno: syscall.EROFS},
	chaoshistory.FaultEIOAfter: {errno: syscall.EIO, carriedOut: true},
}

// chaosEnv is the environment of a process named identity with faults
// spec, writing its history to a file of its own; it returns the file too.
func chaosEnv(t *testing.T, identity, spec string) (map[string]string, string) {
	t.Helper()
	history := filepath.Join(t.TempDir(), "history")
	return map[string]string{
		chaoshistory.IdentityEnv:    identity,
		chaoshistory.StoreFaultsEnv: spec,
		chaoshistory.HistoryEnv:     history,
	}, history
}

// openBase opens the base "base" of a new host folder through fsys, and
// returns the Dir and the base's host path.
func openBase(t *testing.T, fsys dirvol.Filesystem) (dirvol.Dir, string) {
	t.Helper()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "base"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := fsys.OpenBase(context.Background(), root, "base")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, filepath.Join(root, "base")
}

// makeDirs makes n directories d0, d1... in a base through fsys, and
// returns their errors and the base's host path.
func makeDirs(t *testing.T, fsys dirvol.Filesystem, n int) ([]error, string) {
	t.Helper()
	d, host := openBase(t, fsys)
	errs := make([]error, n)
	for i := range errs {
		errs[i] = d.Mkdir(context.Background(), fmt.Sprintf("d%d", i), 0o755)
	}
	return errs, host
}

func readHistory(t *testing.T, path string) []chaoshistory.Entry {
	t.Helper()
	entries, err := chaoshistory.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// drawn is the faults of a history, in order.
func drawn(entries []chaoshistory.Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Fault
	}
	return out
}

// TestFaultsReproducibleBySeed: every kind is drawn, and the n-th
// operation draws the same for the same seed and identity, and differently
// for another seed or identity.
func TestFaultsReproducibleBySeed(t *testing.T) {
	const ops = 200
	run := func(identity, spec string) []string {
		env, history := chaosEnv(t, identity, spec)
		makeDirs(t, dirvol.FaultsFrom(dirvol.LocalFS{}, env), ops)
		return drawn(readHistory(t, history))
	}
	first := run("manager-0", "rate=0.5,seed=42")
	kinds := map[string]int{}
	for _, kind := range first {
		kinds[kind]++
	}
	for kind := range faultOutcomes {
		if kinds[kind] == 0 {
			t.Errorf("no %q in %d draws: %v", kind, ops, kinds)
		}
	}
	if diff := cmp.Diff(first, run("manager-0", "rate=0.5,seed=42")); diff != "" {
		t.Errorf("the same seed and identity drew differently (-first +second):\n%s", diff)
	}
	for _, other := range [][2]string{{"manager-0", "rate=0.5,seed=43"}, {"agent-1", "rate=0.5,seed=42"}} {
		if cmp.Equal(first, run(other[0], other[1])) {
			t.Errorf("%s with %s drew as manager-0 with seed 42", other[0], other[1])
		}
	}
}

// TestFaultsCarriedOutByKind: a fault before an operation leaves it
// undone, EIO-after does it; each returns its errno as os would.
func TestFaultsCarriedOutByKind(t *testing.T) {
	env, history := chaosEnv(t, "agent-0", "rate=1,seed=7")
	errs, host := makeDirs(t, dirvol.FaultsFrom(dirvol.LocalFS{}, env), 60)
	entries := readHistory(t, history)
	if len(entries) != len(errs) {
		t.Fatalf("%d history lines for %d operations", len(entries), len(errs))
	}
	for i, e := range entries {
		want := faultOutcomes[e.Fault]
		if e.Fault == "" {
			t.Errorf("operation %d not faulted at rate 1", i)
		}
		var pathErr *fs.PathError
		if !errors.As(errs[i], &pathErr) || !errors.Is(errs[i], want.errno) {
			t.Errorf("operation %d faulted %s returned %v, want a *fs.PathError of %v", i, e.Fault, errs[i], want.errno)
		}
		if e.Err != errs[i].Error() {
			t.Errorf("operation %d recorded error %q, returned %q", i, e.Err, errs[i])
		}
		_, err := os.Stat(filepath.Join(host, fmt.Sprintf("d%d", i)))
		if carriedOut := err == nil; carriedOut != want.carriedOut {
			t.Errorf("operation %d faulted %s carried out: %v, want %v", i, e.Fault, carriedOut, want.carriedOut)
		}
	}
}

// TestCreateFileFailedAfter: a file made and then failed is left, with its
// data, and no File is returned.
func TestCreateFileFailedAfter(t *testing.T) {
	env, history := chaosEnv(t, "agent-0", "rate=1,seed=7")
	d, host := openBase(t, dirvol.FaultsFrom(dirvol.LocalFS{}, env))
	ctx := context.Background()
	for i := range 60 {
		name := fmt.Sprintf("f%d", i)
		f, err := d.CreateFile(ctx, name, []byte(name), 0o644)
		if f != nil {
			t.Fatalf("CreateFile %s returned a File with %v at rate 1", name, err)
		}
		entries := readHistory(t, history)
		if entries[len(entries)-1].Fault != chaoshistory.FaultEIOAfter {
			continue
		}
		data, err := os.ReadFile(filepath.Join(host, name))
		if err != nil || string(data) != name {
			t.Errorf("file %s failed after: %q, %v, want it made with its data", name, data, err)
		}
		return
	}
	t.Fatal("no CreateFile failed after in 60 draws")
}

// TestHistoryNamesPaths: each mutating operation is one line naming its
// path below the root, and where Rename and Move put the entry.
func TestHistoryNamesPaths(t *testing.T) {
	env, history := chaosEnv(t, "manager-1", "")
	base, host := openBase(t, dirvol.FaultsFrom(dirvol.LocalFS{}, env))
	root := filepath.Dir(host)
	ctx := context.Background()
	do := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	do(base.Mkdir(ctx, "a", 0o755))
	a, err := base.OpenDir(ctx, "a")
	do(err)
	defer a.Close()
	do(a.Mkdir(ctx, "b", 0o755))
	f, err := a.CreateFile(ctx, "f", []byte("x"), 0o644)
	do(err)
	do(f.Close())
	do(a.RewriteFile(ctx, "f", []byte("y"), 0o600))
	do(a.Rename(ctx, "f", "g"))
	do(a.Move(ctx, "g", base, "h"))
	do(a.Chmod(ctx, 0o750))
	do(a.Chown(ctx, -1, -1))
	do(base.Remove(ctx, "h"))
	do(base.RemoveAll(ctx, "a"))
	missingErr := base.Remove(ctx, "missing")
	if !errors.Is(missingErr, fs.ErrNotExist) {
		t.Fatalf("Remove of a missing name: %v", missingErr)
	}
	line := func(op, path, to string) chaoshistory.Entry {
		return chaoshistory.Entry{Identity: "manager-1", Op: op, Root: root, Path: path, To: to}
	}
	missing := line("Remove", "base/missing", "")
	missing.Err = missingErr.Error()
	want := []chaoshistory.Entry{
		line("Mkdir", "base/a", ""),
		line("Mkdir", "base/a/b", ""),
		line("CreateFile", "base/a/f", ""),
		line("RewriteFile", "base/a/f", ""),
		line("Rename", "base/a/f", "base/a/g"),
		line("Move", "base/a/g", "base/h"),
		line("Chmod", "base/a", ""),
		line("Chown", "base/a", ""),
		line("Remove", "base/h", ""),
		line("RemoveAll", "base/a", ""),
		missing,
	}
	got := readHistory(t, history)
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(chaoshistory.Entry{}, "Start", "Time")); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	for _, e := range got {
		if e.Start.IsZero() || e.Time.Before(e.Start) {
			t.Errorf("%s %s began at %v and returned at %v", e.Op, e.Path, e.Start, e.Time)
		}
	}
}

// TestNoFaultsWithoutTheVariable: without a fault spec, or with one that
// does not parse, nothing is injected and the history is still written;
// without a spec or a history the file system is not wrapped at all.
func TestNoFaultsWithoutTheVariable(t *testing.T) {
	tests := map[string]string{
		"unset":            "",
		"no rate":          "seed=42",
		"rate above one":   "rate=2,seed=1",
		"not key=value":    "rate",
		"unknown key":      "rate=0.5,burst=3",
		"key twice":        "rate=0.5,rate=0.5",
		"seed not a count": "rate=0.5,seed=-1",
	}
	for name, spec := range tests {
		t.Run(name, func(t *testing.T) {
			env, history := chaosEnv(t, "agent-2", spec)
			errs, _ := makeDirs(t, dirvol.FaultsFrom(dirvol.LocalFS{}, env), 50)
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			want := make([]string, len(errs))
			if diff := cmp.Diff(want, drawn(readHistory(t, history))); diff != "" {
				t.Errorf("faults (-want +got):\n%s", diff)
			}
		})
	}
	for _, env := range []map[string]string{nil, {chaoshistory.IdentityEnv: "agent-2"}, {chaoshistory.StoreFaultsEnv: "rate=0"}} {
		if fsys := dirvol.FaultsFrom(dirvol.LocalFS{}, env); fsys != (dirvol.LocalFS{}) {
			t.Errorf("with %v the file system is wrapped: %T", env, fsys)
		}
	}
}

// TestFaultsKeepTheContract: with no fault drawn the layer is the file
// system it wraps, Move between its Dirs included.
func TestFaultsKeepTheContract(t *testing.T) {
	serve := func(t *testing.T, dir string) (dirvol.Filesystem, string, string) {
		t.Helper()
		env, _ := chaosEnv(t, "contract", "")
		return dirvol.FaultsFrom(dirvol.LocalFS{}, env), dir, "."
	}
	t.Run("Filesystem", func(t *testing.T) { dirvoltest.TestFilesystem(t, serve) })
	t.Run("Release", func(t *testing.T) { dirvoltest.TestRelease(t, serve) })
}
