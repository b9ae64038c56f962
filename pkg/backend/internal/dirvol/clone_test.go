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
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// sourceVolume makes the volume "source" of the claim team/source with a
// few files, as Create does, and returns it.
func sourceVolume(t *testing.T, f *fixture) CloneSource {
	t.Helper()
	req := request(t, "team", "source", "1Gi", nsPattern)
	vol, err := f.store.Create(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	f.pvs = append(f.pvs, volume(req.PVName, vol.Dir, "1Gi", testProvisioner))
	if err := f.store.Forget(t.Context(), req.PVName, vol.Dir); err != nil {
		t.Fatal(err)
	}
	backendtest.WriteFile(t, filepath.Join(f.base, vol.Dir, "top"), "top data")
	backendtest.WriteFile(t, filepath.Join(f.base, vol.Dir, "sub", "deeper", "file"), "deeper data")
	backendtest.Symlink(t, "/etc/passwd", filepath.Join(f.base, vol.Dir, "sub", "link"))
	return CloneSource{PVName: req.PVName, Dir: vol.Dir}
}

// cloneTree is what a copy of sourceVolume holds.
var cloneTree = []string{"sub/", "sub/deeper/", "sub/deeper/file", "sub/link", "top"}

// TestClone: a clone is a copy of its source, made once, on record until
// its PersistentVolume is saved.
func TestClone(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	source := sourceVolume(t, f)
	req := request(t, "team", "copy", "1Gi", nsPattern)
	vol, copied, err := f.store.Clone(ctx, req, source)
	if err != nil {
		t.Fatalf("Clone: %v", err)
	}
	if diff := cmp.Diff(Copied{Dirs: 2, Files: 2, Links: 1, Bytes: int64(len("top data") + len("deeper data"))}, copied); diff != "" {
		t.Errorf("what was copied (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(cloneTree, backendtest.Tree(t, filepath.Join(f.base, vol.Dir))); diff != "" {
		t.Errorf("the clone (-want +got):\n%s", diff)
	}
	if target, err := os.Readlink(filepath.Join(f.base, vol.Dir, "sub", "link")); err != nil || target != "/etc/passwd" {
		t.Errorf("the copied link points to %q, %v; want /etc/passwd", target, err)
	}
	info, err := os.Stat(filepath.Join(f.base, vol.Dir))
	if err != nil || info.Mode().Perm() != backend.DefaultDirectoryMode {
		t.Errorf("the clone's mode is %v, %v; want %v", info.Mode().Perm(), err, backend.DefaultDirectoryMode)
	}
	// Called again, it copies nothing: the source's change is not seen.
	backendtest.WriteFile(t, filepath.Join(f.base, source.Dir, "later"), "later")
	again, copied, err := f.store.Clone(ctx, req, source)
	if err != nil || again.Dir != vol.Dir || !cmp.Equal(copied, Copied{}) {
		t.Fatalf("Clone again = %q, %+v, %v; want %q, nothing copied", again.Dir, copied, err, vol.Dir)
	}
	records, err := f.store.Records(ctx)
	if err != nil || len(records) != 1 || records[0].PVName != req.PVName {
		t.Fatalf("Records = %+v, %v; want the clone's", records, err)
	}
}

// TestCloneRefusals: a clone is refused, leaving nothing, when its source
// is not a volume of the store or it cannot be counted; one whose copy
// fails leaves what DropClone removes.
func TestCloneRefusals(t *testing.T) {
	tests := map[string]struct {
		mutate  func(*Config)
		change  func(t *testing.T, f *fixture, source *CloneSource, req *Request)
		wantErr string
		wantIs  error
		// copied: the clone got as far as copying, and left what
		// DropClone removes.
		copied bool
	}{
		"a source without owner marker": {
			change: func(t *testing.T, f *fixture, source *CloneSource, _ *Request) {
				t.Helper()
				if err := os.Remove(filepath.Join(f.base, "team", markerName("source"))); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "is not a volume of this store",
			copied:  true,
		},
		"a source whose marker names another volume": {
			change: func(_ *testing.T, _ *fixture, source *CloneSource, _ *Request) {
				source.PVName = "pvc-other"
			},
			wantErr: "is not the directory of volume pvc-other",
			copied:  true,
		},
		"a source directory out of the base": {
			change: func(_ *testing.T, _ *fixture, source *CloneSource, _ *Request) {
				source.Dir = "../other"
			},
			wantErr: "refused",
		},
		"a clone inside its source": {
			change: func(t *testing.T, _ *fixture, _ *CloneSource, req *Request) {
				t.Helper()
				*req = request(t, "team", "source", "1Gi", "{{.PVC.Namespace}}/{{.PVC.Name}}/inside")
				req.PVName = "pvc-inside"
			},
			wantErr: "lies inside",
		},
		"beyond the capacity budget": {
			mutate: func(cfg *Config) {
				cfg.Capacity = backend.Capacity{Storage: resource.MustParse("1500Mi")}
			},
			wantIs: provisioning.ErrNoRoom,
		},
		"a source holding more than the request": {
			change: func(_ *testing.T, _ *fixture, _ *CloneSource, req *Request) {
				req.Size = resource.MustParse("10")
			},
			wantIs: ErrTooLarge,
			copied: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.mutate)
			source := sourceVolume(t, f)
			req := request(t, "team", "copy", "1Gi", nsPattern)
			if tc.change != nil {
				tc.change(t, f, &source, &req)
			}
			before := backendtest.Tree(t, f.base)
			_, _, err := f.store.Clone(t.Context(), req, source)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || (tc.wantIs != nil && !errors.Is(err, tc.wantIs)) {
				t.Fatalf("Clone: %v; want an error saying %q, wrapping %v", err, tc.wantErr, tc.wantIs)
			}
			if tc.copied {
				if err := f.store.DropClone(t.Context(), req); err != nil {
					t.Fatalf("DropClone: %v", err)
				}
			}
			if diff := cmp.Diff(before, backendtest.Tree(t, f.base)); diff != "" {
				t.Errorf("left in the base (-before +after):\n%s", diff)
			}
			if _, ok := f.store.reservations[req.PVName]; ok {
				t.Error("the clone still holds its reservation")
			}
		})
	}
}

// TestCloneInterrupted: a copy cut short by a crash leaves no volume
// directory, only a record that reclaim removes with the half copy; a
// retry copies from scratch.
func TestCloneInterrupted(t *testing.T) {
	tests := map[string]struct {
		retry bool
	}{
		"reclaimed":   {},
		"tried again": {retry: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			ctx := t.Context()
			source := sourceVolume(t, f)
			before := backendtest.Tree(t, f.base)
			req := request(t, "team", "copy", "1Gi", nsPattern)
			crash := errors.New("killed")
			f.store.step = func(name string) error {
				if name == stepCopied {
					return crash
				}
				return nil
			}
			if _, _, err := f.store.Clone(ctx, req, source); !errors.Is(err, crash) {
				t.Fatalf("Clone: %v, want %v", err, crash)
			}
			if _, err := os.Lstat(filepath.Join(f.base, "team", "copy")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a half copy is in the volume's place: %v", err)
			}
			// A new process, as after a kill.
			restarted, err := New(f.store.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if tc.retry {
				vol, _, err := restarted.Clone(ctx, req, source)
				if err != nil {
					t.Fatalf("Clone after the crash: %v", err)
				}
				if diff := cmp.Diff(cloneTree, backendtest.Tree(t, filepath.Join(f.base, vol.Dir))); diff != "" {
					t.Errorf("the clone (-want +got):\n%s", diff)
				}
			}
			unsaved, err := restarted.Unsaved(ctx, func(dir string) *corev1.PersistentVolume { return volume("", dir, "1Gi", testProvisioner) })
			if err != nil || len(unsaved) != 1 {
				t.Fatalf("Unsaved = %d volumes, %v; want the clone's", len(unsaved), err)
			}
			if err := restarted.Delete(ctx, unsaved[0].Volume); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if diff := cmp.Diff(before, backendtest.Tree(t, f.base)); diff != "" {
				t.Errorf("left in the base after reclaim (-before +after):\n%s", diff)
			}
		})
	}
}

// sourceGoingFS is a file system whose first listing of a page deletes
// the source volume as a Delete does: moves its directory away and drops
// its owner marker.
type sourceGoingFS struct {
	Filesystem
	once   *sync.Once
	delete func()
}

func (f sourceGoingFS) OpenBase(ctx context.Context, root, base string) (Dir, error) {
	d, err := f.Filesystem.OpenBase(ctx, root, base)
	return sourceGoingDir{Dir: d, fs: f}, err
}

type sourceGoingDir struct {
	Dir
	fs sourceGoingFS
}

func (d sourceGoingDir) OpenDir(ctx context.Context, name string) (Dir, error) {
	sub, err := d.Dir.OpenDir(ctx, name)
	return sourceGoingDir{Dir: sub, fs: d.fs}, err
}

// Move hands the inner Filesystem its own Dir, which it requires.
func (d sourceGoingDir) Move(ctx context.Context, oldName string, to Dir, newName string) error {
	if wrapped, ok := to.(sourceGoingDir); ok {
		to = wrapped.Dir
	}
	return d.Dir.Move(ctx, oldName, to, newName)
}

// CopyTo copies through the wrapper, whose listing deletes the source.
func (d sourceGoingDir) CopyTo(ctx context.Context, into Dir, limit int64, owner Owner) (Copied, error) {
	return CopyTree[Dir](ctx, d, into, limit, owner)
}

func (d sourceGoingDir) ReadPage(ctx context.Context, from ListPos, limit int) ([]ListEntry, error) {
	d.fs.once.Do(d.fs.delete)
	return d.Dir.ReadPage(ctx, from, limit)
}

// TestCloneSourceDeleted: a source deleted during the copy fails the clone.
func TestCloneSourceDeleted(t *testing.T) {
	var f *fixture
	f = newFixture(t, func(cfg *Config) {
		cfg.FS = sourceGoingFS{Filesystem: cfg.FS, once: &sync.Once{}, delete: func() {
			if err := os.Rename(filepath.Join(f.base, "team", "source"), filepath.Join(f.tmp, "gone")); err != nil {
				t.Error(err)
			}
			if err := os.Remove(filepath.Join(f.base, "team", markerName("source"))); err != nil {
				t.Error(err)
			}
		}}
	})
	source := sourceVolume(t, f)
	req := request(t, "team", "copy", "1Gi", nsPattern)
	vol, _, err := f.store.Clone(t.Context(), req, source)
	if err == nil || !strings.Contains(err.Error(), "the source was deleted during the copy") {
		t.Fatalf("Clone = %q, %v; want the source deleted", vol.Dir, err)
	}
	if err := f.store.DropClone(t.Context(), req); err != nil {
		t.Fatalf("DropClone: %v", err)
	}
	if diff := cmp.Diff([]string{JournalDir + "/"}, backendtest.Tree(t, f.base)); diff != "" {
		t.Errorf("left in the base (-want +got):\n%s", diff)
	}
}

// TestCloneCancelled: a copy whose context ends midway stops with its
// error, leaves no volume directory, and what it made is reclaimed.
func TestCloneCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f := newFixture(t, func(cfg *Config) {
		cfg.FS = sourceGoingFS{Filesystem: cfg.FS, once: &sync.Once{}, delete: cancel}
	})
	source := sourceVolume(t, f)
	before := backendtest.Tree(t, f.base)
	req := request(t, "team", "copy", "1Gi", nsPattern)
	if _, _, err := f.store.Clone(ctx, req, source); !errors.Is(err, context.Canceled) {
		t.Fatalf("Clone: %v, want %v", err, context.Canceled)
	}
	if _, err := os.Lstat(filepath.Join(f.base, "team", "copy")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a half copy is in the volume's place: %v", err)
	}
	unsaved, err := f.store.Unsaved(t.Context(), func(dir string) *corev1.PersistentVolume { return volume("", dir, "1Gi", testProvisioner) })
	if err != nil || len(unsaved) != 1 {
		t.Fatalf("Unsaved = %d volumes, %v; want the clone's", len(unsaved), err)
	}
	if err := f.store.Delete(t.Context(), unsaved[0].Volume); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if diff := cmp.Diff(before, backendtest.Tree(t, f.base)); diff != "" {
		t.Errorf("left in the base after reclaim (-before +after):\n%s", diff)
	}
}
