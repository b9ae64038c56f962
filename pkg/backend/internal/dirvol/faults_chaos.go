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

package dirvol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/internal/chaoshistory"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// faultKinds are what a draw picks from, in order; a kind's errno is
// returned before the operation is carried out, but FaultEIOAfter's.
var faultKinds = []struct {
	name  string
	errno syscall.Errno
}{
	{chaoshistory.FaultEIO, syscall.EIO},
	{chaoshistory.FaultENOSPC, syscall.ENOSPC},
	{chaoshistory.FaultEACCES, syscall.EACCES},
	{chaoshistory.FaultEROFS, syscall.EROFS},
	{chaoshistory.FaultEIOAfter, syscall.EIO},
}

// processFaults are the faults of this process, from its environment.
var processFaults = sync.OnceValue(func() *faults { return newFaults(os.Getenv) })

// withFaults wraps fsys in the process's faults and history, or returns it
// as it is when the environment asks for neither.
func withFaults(fsys Filesystem) Filesystem { return wrapFaults(fsys, processFaults()) }

func wrapFaults(fsys Filesystem, f *faults) Filesystem {
	if f == nil {
		return fsys
	}
	return &faultFS{inner: fsys, faults: f}
}

// faults draws the faults of one process and writes its history. The n-th
// operation drawn draws the same on every run with the same seed and
// identity, whatever the operations before it did.
type faults struct {
	identity string
	rate     float64
	// history is nil when none is written.
	history *os.File

	mu   sync.Mutex
	rand *rand.Rand
}

// newFaults reads the environment through getenv; nil when it asks for no
// fault and no history. A malformed fault spec is logged and injects
// nothing, since a chaos run must not die of its own harness.
func newFaults(getenv func(string) string) *faults {
	logger := klog.Background().WithName("chaos")
	f := &faults{identity: getenv(chaoshistory.IdentityEnv)}
	rate, seed, err := parseFaultSpec(getenv(chaoshistory.StoreFaultsEnv))
	if err != nil {
		logger.Error(err, "No store faults injected", "variable", chaoshistory.StoreFaultsEnv)
	} else {
		f.rate = rate
	}
	identity := fnv.New64a()
	_, _ = identity.Write([]byte(f.identity))
	f.rand = rand.New(rand.NewPCG(seed, identity.Sum64())) //nolint:gosec // reproducible faults, not secrets
	if name := getenv(chaoshistory.HistoryEnv); name != "" {
		f.history, err = os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644) //nolint:gosec // a harness's file
		if err != nil {
			logger.Error(err, "No store history written", "variable", chaoshistory.HistoryEnv)
		}
	}
	if f.rate == 0 && f.history == nil {
		return nil
	}
	return f
}

// parseFaultSpec reads "rate=R,seed=S": R between 0 and 1, S an unsigned
// integer (0 when left out); an empty spec injects nothing.
func parseFaultSpec(spec string) (float64, uint64, error) {
	var rate float64
	var seed uint64
	if spec == "" {
		return 0, 0, nil
	}
	seen := map[string]bool{}
	for _, field := range strings.Split(spec, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(field), "=")
		var err error
		switch {
		case !ok:
			err = errors.New("not key=value")
		case seen[key]:
			err = errors.New("given twice")
		case key == "rate":
			rate, err = strconv.ParseFloat(value, 64)
			if err == nil && !(rate >= 0 && rate <= 1) {
				err = errors.New("not between 0 and 1")
			}
		case key == "seed":
			seed, err = strconv.ParseUint(value, 10, 64)
		default:
			err = errors.New("unknown key")
		}
		if err != nil {
			return 0, 0, fmt.Errorf("cannot read %q in %q: %w", field, spec, err)
		}
		seen[key] = true
	}
	if !seen["rate"] {
		return 0, 0, fmt.Errorf("cannot read %q: no rate", spec)
	}
	return rate, seed, nil
}

// draw picks the fault of the next operation, or none (-1). Each draw
// takes two numbers, so the n-th is the same whatever came before.
func (f *faults) draw() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	hit := f.rand.Float64() < f.rate
	kind := f.rand.IntN(len(faultKinds))
	if !hit {
		return -1
	}
	return kind
}

// run carries out op, an operation on the entry at p below root (moved to
// to, for Rename and Move), unless a fault drawn fails it first, and
// records the outcome.
func (f *faults) run(name, root, p, to string, op func() error) error {
	start := time.Now().UTC()
	kind := f.draw()
	var err error
	switch {
	case kind < 0:
		err = op()
	case faultKinds[kind].name == chaoshistory.FaultEIOAfter:
		err = op()
		if err != nil {
			// Failed on its own: nothing was injected.
			kind = -1
		} else {
			err = &fs.PathError{Op: name, Path: path.Join(root, p), Err: faultKinds[kind].errno}
		}
	default:
		err = &fs.PathError{Op: name, Path: path.Join(root, p), Err: faultKinds[kind].errno}
	}
	entry := chaoshistory.Entry{Start: start, Time: time.Now().UTC(), Identity: f.identity, Op: name, Root: root, Path: p, To: to}
	if kind >= 0 {
		entry.Fault = faultKinds[kind].name
	}
	if err != nil {
		entry.Err = err.Error()
	}
	f.record(entry)
	return err
}

// record appends entry as one line in one write, so a kill loses at most
// this line and other processes' lines never split it.
func (f *faults) record(entry chaoshistory.Entry) {
	if f.history == nil {
		return
	}
	line, err := json.Marshal(entry)
	if err == nil {
		_, err = f.history.Write(append(line, '\n'))
	}
	if err != nil {
		klog.Background().WithName("chaos").Error(err, "Cannot write the store history", "op", entry.Op, "path", entry.Path)
	}
}

// faultFS is a Filesystem whose Dirs go through faults.
type faultFS struct {
	inner  Filesystem
	faults *faults
}

func (f *faultFS) OpenBase(ctx context.Context, root, base string) (Dir, error) {
	d, err := f.inner.OpenBase(ctx, root, base)
	if err != nil {
		return nil, err
	}
	return &faultDir{inner: d, faults: f.faults, root: root, path: path.Clean(base)}, nil
}

// faultDir is a Dir whose mutating operations go through faults; it knows
// its path below the root, for the history. Reads, opens, Space and Sync
// pass through untouched, so every fault falls on an operation that the
// history records, and the harness counts them all there.
type faultDir struct {
	inner  Dir
	faults *faults
	root   string
	path   string
}

// run runs op on the entry name of this directory ("" for the directory
// itself).
func (d *faultDir) run(op, name, to string, do func() error) error {
	return d.faults.run(op, d.root, path.Join(d.path, name), to, do)
}

func (d *faultDir) OpenDir(ctx context.Context, name string) (Dir, error) {
	sub, err := d.inner.OpenDir(ctx, name)
	if err != nil {
		return nil, err
	}
	return &faultDir{inner: sub, faults: d.faults, root: d.root, path: path.Join(d.path, name)}, nil
}

func (d *faultDir) Lstat(ctx context.Context, name string) (fs.FileInfo, error) {
	return d.inner.Lstat(ctx, name)
}

func (d *faultDir) Mkdir(ctx context.Context, name string, perm fs.FileMode) error {
	return d.run("Mkdir", name, "", func() error { return d.inner.Mkdir(ctx, name, perm) })
}

// CreateFile closes a file it made when it fails after making it.
func (d *faultDir) CreateFile(ctx context.Context, name string, data []byte, perm fs.FileMode) (File, error) {
	var file File
	err := d.run("CreateFile", name, "", func() error {
		var err error
		file, err = d.inner.CreateFile(ctx, name, data, perm)
		return err
	})
	if err != nil && file != nil {
		return nil, errors.Join(err, file.Close())
	}
	return file, err
}

func (d *faultDir) RewriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	return d.run("RewriteFile", name, "", func() error { return d.inner.RewriteFile(ctx, name, data, perm) })
}

func (d *faultDir) ReadFile(ctx context.Context, name string, limit int64) ([]byte, fs.FileInfo, error) {
	return d.inner.ReadFile(ctx, name, limit)
}

func (d *faultDir) ReadNames(ctx context.Context) ([]string, error) { return d.inner.ReadNames(ctx) }

func (d *faultDir) ReadSomeNames(ctx context.Context, limit int) ([]string, error) {
	return d.inner.ReadSomeNames(ctx, limit)
}

func (d *faultDir) ReadPage(ctx context.Context, from ListPos, limit int) ([]ListEntry, error) {
	return d.inner.ReadPage(ctx, from, limit)
}

func (d *faultDir) OpenRead(ctx context.Context, name string) (Reader, error) {
	return d.inner.OpenRead(ctx, name)
}

func (d *faultDir) Readlink(ctx context.Context, name string) (string, error) {
	return d.inner.Readlink(ctx, name)
}

func (d *faultDir) Symlink(ctx context.Context, target, name string) error {
	return d.run("Symlink", name, "", func() error { return d.inner.Symlink(ctx, target, name) })
}

func (d *faultDir) Rename(ctx context.Context, oldName, newName string) error {
	return d.run("Rename", oldName, path.Join(d.path, newName), func() error { return d.inner.Rename(ctx, oldName, newName) })
}

// Move hands the inner Filesystem its own Dir, which it requires.
func (d *faultDir) Move(ctx context.Context, oldName string, to Dir, newName string) error {
	target, into := to, ""
	if wrapped, ok := to.(*faultDir); ok {
		target, into = wrapped.inner, wrapped.path
	}
	return d.run("Move", oldName, path.Join(into, newName), func() error { return d.inner.Move(ctx, oldName, target, newName) })
}

// CopyTo copies over faultDirs, so that each step of the copy may fail.
func (d *faultDir) CopyTo(ctx context.Context, into Dir, limit int64, owner Owner) (Copied, error) {
	return CopyTree[Dir](ctx, d, into, limit, owner)
}

func (d *faultDir) Remove(ctx context.Context, name string) error {
	return d.run("Remove", name, "", func() error { return d.inner.Remove(ctx, name) })
}

func (d *faultDir) RemoveAll(ctx context.Context, name string) error {
	return d.run("RemoveAll", name, "", func() error { return d.inner.RemoveAll(ctx, name) })
}

func (d *faultDir) Chmod(ctx context.Context, perm fs.FileMode) error {
	return d.run("Chmod", "", "", func() error { return d.inner.Chmod(ctx, perm) })
}

func (d *faultDir) Chown(ctx context.Context, uid, gid int) error {
	return d.run("Chown", "", "", func() error { return d.inner.Chown(ctx, uid, gid) })
}

func (d *faultDir) Space(ctx context.Context) (provisioning.Space, error) { return d.inner.Space(ctx) }

func (d *faultDir) Sync(ctx context.Context) error { return d.inner.Sync(ctx) }

func (d *faultDir) Close() error { return d.inner.Close() }
