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
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

const (
	testProvisioner = "provfleet.io/test"
	// volumesPath is where the test's PersistentVolumes say the base is.
	volumesPath = "/vols"
)

var archiveTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))

// fixture is a Store on a temporary root holding the base "vols" and a
// sentinel tree outside the base.
type fixture struct {
	store *Store
	tmp   string
	base  string
	pvs   []*corev1.PersistentVolume
}

func newFixture(t *testing.T, mutate func(*Config)) *fixture {
	t.Helper()
	f := &fixture{tmp: t.TempDir()}
	f.base = filepath.Join(f.tmp, "root", "vols")
	if err := os.MkdirAll(f.base, 0o755); err != nil {
		t.Fatal(err)
	}
	backendtest.WriteFile(t, filepath.Join(f.tmp, "root", "other", "keep"), "inside the root, outside the base")
	backendtest.WriteFile(t, filepath.Join(f.tmp, "outside", "keep"), "outside the root")
	cfg := Config{
		FS:        LocalFS{},
		Root:      filepath.Join(f.tmp, "root"),
		Base:      "vols",
		VolumeDir: hostPathDir,
		Locate:    hostPathLocation,
		Options: Options{
			ProvisionerNames: []string{testProvisioner},
			Volumes:          backend.NewListedVolumes(func() ([]*corev1.PersistentVolume, error) { return f.pvs, nil }),
			Now:              func() time.Time { return archiveTime },
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	var err error
	f.store, err = New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := f.store.Probe(t.Context()); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	return f
}

func hostPathDir(pv *corev1.PersistentVolume) (string, error) {
	if pv.Spec.HostPath == nil {
		return "", errors.New("not a hostPath volume")
	}
	return RelDir(volumesPath, pv.Spec.HostPath.Path)
}

func hostPathLocation(dir string) (string, string) {
	return "", path.Join(volumesPath, dir)
}

func volume(name, dir, size, provisioner string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{provisioning.AnnDynamicallyProvisioned: provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: volumesPath + "/" + dir}},
		},
	}
}

func request(t *testing.T, namespace, name, size, pattern string) Request {
	t.Helper()
	claim := backendtest.Claim(namespace, name, size)
	req := Request{PVName: "pvc-" + string(claim.UID), Claim: claim, Size: resource.MustParse(size)}
	if pattern != "" {
		var err error
		if req.Pattern, err = ParsePattern(pattern); err != nil {
			t.Fatal(err)
		}
	}
	return req
}

func (f *fixture) outside(t *testing.T) map[string]backendtest.Entry {
	t.Helper()
	return backendtest.Snapshot(t, f.tmp, f.base)
}

const nsPattern = "{{.PVC.Namespace}}/{{.PVC.Name}}"

func TestCreateAndRemove(t *testing.T) {
	tests := map[string]struct {
		onDelete   backend.OnDeletePolicy
		pattern    string
		sibling    string
		wantDir    string
		wantTree   []string
		wantRemain []string
	}{
		"delete": {
			onDelete: backend.OnDeleteDelete, wantDir: "pvc-team-data",
			wantTree: []string{".pvc-team-data.provfleet-volume", "pvc-team-data/"},
		},
		"delete with subfolders removes empty parents": {
			onDelete: backend.OnDeleteDelete, pattern: nsPattern, wantDir: "team/data",
			wantTree: []string{"team/", "team/.data.provfleet-volume", "team/data/"},
		},
		"delete keeps parents in use": {
			onDelete: backend.OnDeleteDelete, pattern: nsPattern, sibling: "team/keep", wantDir: "team/data",
			wantTree:   []string{"team/", "team/.data.provfleet-volume", "team/data/", "team/keep"},
			wantRemain: []string{"team/", "team/keep"},
		},
		"retain": {
			onDelete: backend.OnDeleteRetain, pattern: nsPattern, wantDir: "team/data",
			wantTree:   []string{"team/", "team/.data.provfleet-volume", "team/data/"},
			wantRemain: []string{"team/", "team/data/", "team/data/file"},
		},
		"archive": {
			onDelete: backend.OnDeleteArchive, wantDir: "pvc-team-data",
			wantTree:   []string{".pvc-team-data.provfleet-volume", "pvc-team-data/"},
			wantRemain: []string{"archived-pvc-team-data-20260102T020405Z/", "archived-pvc-team-data-20260102T020405Z/file"},
		},
		"archive with subfolders": {
			onDelete: backend.OnDeleteArchive, pattern: "{{.PVC.Namespace}}/x/{{.PVC.Name}}", wantDir: "team/x/data",
			wantTree:   []string{"team/", "team/x/", "team/x/.data.provfleet-volume", "team/x/data/"},
			wantRemain: []string{"team/", "team/x/", "team/x/archived-data-20260102T020405Z/", "team/x/archived-data-20260102T020405Z/file"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.OnDelete = tc.onDelete })
			if tc.sibling != "" {
				backendtest.WriteFile(t, filepath.Join(f.base, tc.sibling), "")
			}
			before := f.outside(t)
			ctx := t.Context()
			req := request(t, "team", "data", "1Gi", tc.pattern)
			dir, err := dirOf(f.store.Create(ctx, req))
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if dir != tc.wantDir {
				t.Errorf("Create() = %q, want %q", dir, tc.wantDir)
			}
			wantTree := append([]string{JournalDir + "/", JournalDir + "/" + recordName(req.PVName, tc.wantDir)}, tc.wantTree...)
			slices.Sort(wantTree)
			if diff := cmp.Diff(wantTree, backendtest.Tree(t, f.base)); diff != "" {
				t.Errorf("tree after Create (-want +got):\n%s", diff)
			}
			info, err := os.Stat(filepath.Join(f.base, dir))
			if err != nil || info.Mode().Perm() != backend.DefaultDirectoryMode {
				t.Errorf("volume directory: %v, mode %v, want %v", err, info.Mode().Perm(), backend.DefaultDirectoryMode)
			}
			backendtest.WriteFile(t, filepath.Join(f.base, dir, "file"), "data")
			if err := f.store.DeleteByName(ctx, req.PVName, dir); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			// The record is gone; the folder of records stays.
			wantRemain := append([]string{JournalDir + "/"}, tc.wantRemain...)
			if diff := cmp.Diff(wantRemain, backendtest.Tree(t, f.base)); diff != "" {
				t.Errorf("tree after Remove (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, f.outside(t)); diff != "" {
				t.Errorf("outside the base changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestIdempotent(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	req := request(t, "team", "data", "1Gi", nsPattern)
	first, err := dirOf(f.store.Create(ctx, req))
	if err != nil {
		t.Fatal(err)
	}
	// Metadata changed between retries: the first directory is kept.
	req.Claim.Namespace = "moved"
	again, err := dirOf(f.store.Create(ctx, req))
	if err != nil || again != first {
		t.Fatalf("second Create() = %q, %v; want %q", again, err, first)
	}
	// A restarted process knows the directory from its owner marker.
	restarted, err := New(f.store.cfg)
	if err != nil {
		t.Fatal(err)
	}
	req.Claim.Namespace = "team"
	if got, err := dirOf(restarted.Create(ctx, req)); err != nil || got != first {
		t.Fatalf("Create() after restart = %q, %v; want %q", got, err, first)
	}
	for i := range 2 {
		if err := restarted.DeleteByName(ctx, req.PVName, first); err != nil {
			t.Fatalf("Remove #%d: %v", i, err)
		}
	}
	if diff := cmp.Diff([]string{JournalDir + "/"}, backendtest.Tree(t, f.base)); diff != "" {
		t.Errorf("left in the base after Remove (-want +got):\n%s", diff)
	}
}

func TestCreateRefusesCollisions(t *testing.T) {
	tests := map[string]struct {
		pvs     []*corev1.PersistentVolume
		setup   func(t *testing.T, f *fixture)
		wantErr string
	}{
		"same directory as a listed volume": {
			pvs:     []*corev1.PersistentVolume{volume("pvc-old", "team/data", "1Gi", testProvisioner)},
			wantErr: "another volume",
		},
		"inside a listed volume": {
			pvs:     []*corev1.PersistentVolume{volume("pvc-old", "team", "1Gi", "someone/else")},
			wantErr: "another volume",
		},
		"around a listed volume": {
			pvs:     []*corev1.PersistentVolume{volume("pvc-old", "team/data/deeper", "1Gi", testProvisioner)},
			wantErr: "another volume",
		},
		"a directory made by hand": {
			setup: func(t *testing.T, f *fixture) {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, "team/data/secret"), "x")
			},
			wantErr: "already exists",
		},
		"a file made by hand": {
			setup: func(t *testing.T, f *fixture) {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, "team/data"), "x")
			},
			wantErr: "already exists",
		},
		"a directory owned by another volume": {
			setup: func(t *testing.T, f *fixture) {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, "team/.data.provfleet-volume"), "pvc-other")
			},
			wantErr: "belongs to another volume",
		},
		"inside an unlisted volume's directory": {
			setup: func(t *testing.T, f *fixture) {
				t.Helper()
				if _, err := f.store.Create(t.Context(), request(t, "x", "team", "1Gi", "{{.PVC.Name}}")); err != nil {
					t.Fatal(err)
				}
				f.store.reservations = map[string]*reservation{} // as after a restart
			},
			wantErr: `"team" is the directory of another volume`,
		},
		"a directory being provisioned": {
			setup: func(t *testing.T, f *fixture) {
				t.Helper()
				if _, err := f.store.Create(t.Context(), request(t, "other", "data", "1Gi", "team/data")); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "being provisioned",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.pvs = tc.pvs
			if tc.setup != nil {
				tc.setup(t, f)
			}
			before := backendtest.Snapshot(t, f.tmp, "")
			_, err := f.store.Create(t.Context(), request(t, "team", "data", "1Gi", nsPattern))
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(before, backendtest.Snapshot(t, f.tmp, "")); diff != "" {
				t.Errorf("a refused Create changed files (-before +after):\n%s", diff)
			}
		})
	}
}

func TestRemoveRefusals(t *testing.T) {
	tests := map[string]struct {
		dir     string
		pvs     []*corev1.PersistentVolume
		setup   func(t *testing.T, f *fixture)
		wantErr string
	}{
		"invalid directory": {dir: "../other", wantErr: `".."`},
		"used by another listed volume": {
			dir:     "team/data",
			pvs:     []*corev1.PersistentVolume{volume("pvc-static", "team/data/inner", "1Gi", "")},
			wantErr: "another volume",
		},
		"owned by another volume": {
			dir: "team/data",
			setup: func(t *testing.T, f *fixture) {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, "team/.data.provfleet-volume"), "pvc-other")
			},
			wantErr: "belongs to another volume",
		},
		"a file": {
			dir: "team/data",
			setup: func(t *testing.T, f *fixture) {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, "team/data"), "x")
			},
			wantErr: "not a directory",
		},
		"a symlink leaf": {
			dir: "team/data",
			setup: func(t *testing.T, f *fixture) {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, "team/keep"), "x")
				backendtest.Symlink(t, filepath.Join(f.tmp, "outside"), filepath.Join(f.base, "team/data"))
			},
			wantErr: "not a directory",
		},
		"a symlink parent": {
			dir: "link/data",
			setup: func(t *testing.T, f *fixture) {
				t.Helper()
				backendtest.Symlink(t, filepath.Join(f.tmp, "outside"), filepath.Join(f.base, "link"))
			},
			wantErr: "not a directory",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.pvs = tc.pvs
			if tc.setup != nil {
				tc.setup(t, f)
			}
			before := backendtest.Snapshot(t, f.tmp, "")
			err := f.store.DeleteByName(t.Context(), "pvc-team-data", tc.dir)
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(before, backendtest.Snapshot(t, f.tmp, "")); diff != "" {
				t.Errorf("a refused Remove changed files (-before +after):\n%s", diff)
			}
		})
	}
}

func TestRemoveArchiveNeverReplaces(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.OnDelete = backend.OnDeleteArchive })
	req := request(t, "team", "data", "1Gi", "")
	dir, err := dirOf(f.store.Create(t.Context(), req))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(f.base, "archived-pvc-team-data-20260102T020405Z"), 0o755); err != nil {
		t.Fatal(err)
	}
	checkErr(t, f.store.DeleteByName(t.Context(), req.PVName, dir), "already exists")
	if _, err := os.Stat(filepath.Join(f.base, dir)); err != nil {
		t.Errorf("volume directory gone after a refused archive: %v", err)
	}
}

func TestCapacity(t *testing.T) {
	tests := map[string]struct {
		capacity backend.Capacity
		pvs      []*corev1.PersistentVolume
		earlier  []string
		size     string
		wantErr  string
		// noRoom: the refusal wraps provisioning.ErrNoRoom.
		noRoom bool
	}{
		"no budget": {
			pvs: []*corev1.PersistentVolume{volume("pvc-a", "a", "1Ei", testProvisioner)}, size: "1Mi",
		},
		"fits exactly": {
			capacity: backend.Capacity{Storage: resource.MustParse("10Gi")},
			pvs:      []*corev1.PersistentVolume{volume("pvc-a", "a", "6Gi", testProvisioner)}, size: "4Gi",
		},
		"bytes exhausted by listed volumes": {
			capacity: backend.Capacity{Storage: resource.MustParse("10Gi")},
			pvs:      []*corev1.PersistentVolume{volume("pvc-a", "a", "6Gi", testProvisioner)}, size: "5Gi",
			wantErr: "capacity exhausted: 6Gi of 10Gi in use, the claim requests 5Gi", noRoom: true,
		},
		"other provisioners' volumes do not count": {
			capacity: backend.Capacity{Storage: resource.MustParse("10Gi"), MaxVolumes: 1},
			pvs:      []*corev1.PersistentVolume{volume("pvc-a", "a", "6Gi", "someone/else")}, size: "10Gi",
		},
		"bytes exhausted by reservations": {
			capacity: backend.Capacity{Storage: resource.MustParse("10Gi")},
			earlier:  []string{"4Gi", "4Gi"}, size: "3Gi",
			wantErr: "8Gi of 10Gi in use", noRoom: true,
		},
		"larger than the whole budget": {
			capacity: backend.Capacity{Storage: resource.MustParse("1Gi")}, size: "2Gi",
			wantErr: "0 of 1Gi in use, the claim requests 2Gi, more than the whole budget",
		},
		"volumes exhausted": {
			capacity: backend.Capacity{MaxVolumes: 2},
			pvs:      []*corev1.PersistentVolume{volume("pvc-a", "a", "1Gi", testProvisioner)},
			earlier:  []string{"1Gi"}, size: "1Gi",
			wantErr: "capacity exhausted: 2 of 2 volumes in use", noRoom: true,
		},
		"volumes left": {
			capacity: backend.Capacity{MaxVolumes: 3},
			pvs:      []*corev1.PersistentVolume{volume("pvc-a", "a", "1Gi", testProvisioner)},
			earlier:  []string{"1Gi"}, size: "1Gi",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Capacity = tc.capacity })
			f.pvs = tc.pvs
			for i, size := range tc.earlier {
				if _, err := f.store.Create(t.Context(), request(t, "earlier", fmt.Sprint(i), size, "")); err != nil {
					t.Fatalf("earlier Create: %v", err)
				}
			}
			_, err := f.store.Create(t.Context(), request(t, "team", "data", tc.size, ""))
			checkErr(t, err, tc.wantErr)
			if got := errors.Is(err, provisioning.ErrNoRoom); got != tc.noRoom {
				t.Errorf("errors.Is(%v, ErrNoRoom) = %v, want %v", err, got, tc.noRoom)
			}
		})
	}
}

// failingFS is LocalFS on which making a volume directory (named pvc-...)
// fails with err.
type failingFS struct {
	LocalFS
	err error
}

func (f failingFS) OpenBase(ctx context.Context, root, base string) (Dir, error) {
	d, err := f.LocalFS.OpenBase(ctx, root, base)
	return failingDir{Dir: d, err: f.err}, err
}

type failingDir struct {
	Dir
	err error
}

func (d failingDir) OpenDir(ctx context.Context, name string) (Dir, error) {
	child, err := d.Dir.OpenDir(ctx, name)
	return failingDir{Dir: child, err: d.err}, err
}

func (d failingDir) Mkdir(ctx context.Context, name string, perm fs.FileMode) error {
	if !strings.HasPrefix(name, "pvc-") {
		return d.Dir.Mkdir(ctx, name, perm)
	}
	return &fs.PathError{Op: "mkdir", Path: name, Err: d.err}
}

// TestCreateOnAFullFileSystem: a file system found full or over quota only
// when the directory is made refuses the claim for want of room, which may
// free up; another failure does not.
func TestCreateOnAFullFileSystem(t *testing.T) {
	tests := map[string]struct {
		err    error
		noRoom bool
	}{
		"out of space":     {err: syscall.ENOSPC, noRoom: true},
		"over quota":       {err: syscall.EDQUOT, noRoom: true},
		"read-only":        {err: syscall.EROFS},
		"permission error": {err: syscall.EACCES},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.FS = failingFS{err: tc.err} })
			_, err := f.store.Create(t.Context(), request(t, "team", "data", "1Gi", ""))
			if !errors.Is(err, tc.err) {
				t.Fatalf("Create: %v, want the file system's error", err)
			}
			if got := errors.Is(err, provisioning.ErrNoRoom); got != tc.noRoom {
				t.Errorf("errors.Is(%v, ErrNoRoom) = %v, want %v", err, got, tc.noRoom)
			}
		})
	}
}

// TestBudget: Budget reports the limits and what Create counts against them,
// listed volumes of this provisioner and reservations not yet listed.
func TestBudget(t *testing.T) {
	tests := map[string]struct {
		capacity backend.Capacity
		pvs      []*corev1.PersistentVolume
		earlier  []string
		want     provisioning.Budget
	}{
		"no budget, nothing counted": {
			pvs: []*corev1.PersistentVolume{volume("pvc-a", "a", "1Gi", testProvisioner)},
		},
		"listed volumes and reservations": {
			capacity: backend.Capacity{Storage: resource.MustParse("10Gi"), MaxVolumes: 5},
			pvs: []*corev1.PersistentVolume{
				volume("pvc-a", "a", "2Gi", testProvisioner),
				volume("pvc-b", "b", "6Gi", "someone/else"),
			},
			earlier: []string{"1Gi", "3Gi"},
			want:    provisioning.Budget{UsedBytes: 6 << 30, LimitBytes: 10 << 30, UsedVolumes: 3, LimitVolumes: 5},
		},
		"a volume limit only": {
			capacity: backend.Capacity{MaxVolumes: 2},
			pvs:      []*corev1.PersistentVolume{volume("pvc-a", "a", "2Gi", testProvisioner)},
			want:     provisioning.Budget{UsedBytes: 2 << 30, UsedVolumes: 1, LimitVolumes: 2},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Capacity = tc.capacity })
			f.pvs = tc.pvs
			for i, size := range tc.earlier {
				if _, err := f.store.Create(t.Context(), request(t, "earlier", fmt.Sprint(i), size, "")); err != nil {
					t.Fatalf("earlier Create: %v", err)
				}
			}
			got, err := f.store.Budget()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Budget() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCapacityCountsEachVolumeOnce: a reservation stops counting once its
// PersistentVolume is listed, and a removed volume frees its room.
func TestCapacityCountsEachVolumeOnce(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Capacity = backend.Capacity{MaxVolumes: 2} })
	ctx := t.Context()
	first := request(t, "team", "a", "1Gi", "")
	dir, err := dirOf(f.store.Create(ctx, first))
	if err != nil {
		t.Fatal(err)
	}
	f.pvs = []*corev1.PersistentVolume{volume(first.PVName, dir, "1Gi", testProvisioner)}
	if _, err := f.store.Create(ctx, request(t, "team", "b", "1Gi", "")); err != nil {
		t.Fatalf("second volume refused: %v", err)
	}
	checkErr(t, func() error { _, err := f.store.Create(ctx, request(t, "team", "c", "1Gi", "")); return err }(), "2 of 2 volumes")
	f.pvs = nil
	if err := f.store.DeleteByName(ctx, first.PVName, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Create(ctx, request(t, "team", "c", "1Gi", "")); err != nil {
		t.Fatalf("room not freed: %v", err)
	}
}

func TestConcurrentCreate(t *testing.T) {
	tests := map[string]struct {
		capacity backend.Capacity
		pattern  string
		want     int
	}{
		"capacity is never overshot": {capacity: backend.Capacity{MaxVolumes: 3}, want: 3},
		"one claim gets a directory": {pattern: "shared/dir", want: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Capacity = tc.capacity })
			var wg sync.WaitGroup
			var mu sync.Mutex
			var created []string
			for i := range 12 {
				wg.Go(func() {
					dir, err := dirOf(f.store.Create(t.Context(), request(t, "team", fmt.Sprint(i), "1Gi", tc.pattern)))
					if err == nil {
						mu.Lock()
						created = append(created, dir)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(created) != tc.want {
				t.Errorf("%d claims got directories %v, want %d", len(created), created, tc.want)
			}
		})
	}
}

// TestSymlinksInBase plants symlinks in the base and checks no pattern can
// reach through them.
func TestSymlinksInBase(t *testing.T) {
	tests := map[string]struct {
		pattern string
		wantErr string
	}{
		"absolute link out":      {pattern: "out/x", wantErr: "not a directory"},
		"relative link out":      {pattern: "up/x", wantErr: "not a directory"},
		"link to another dir":    {pattern: "inner/x", wantErr: "not a directory"},
		"link as the volume":     {pattern: "out", wantErr: "already exists"},
		"deep link":              {pattern: "real/out/x", wantErr: "not a directory"},
		"link to another volume": {pattern: "tovol/x", wantErr: "not a directory"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			outside := filepath.Join(f.tmp, "outside")
			backendtest.Symlink(t, outside, filepath.Join(f.base, "out"))
			backendtest.Symlink(t, "../other", filepath.Join(f.base, "up"))
			if err := os.MkdirAll(filepath.Join(f.base, "real", "inside"), 0o755); err != nil {
				t.Fatal(err)
			}
			backendtest.Symlink(t, "real/inside", filepath.Join(f.base, "inner"))
			backendtest.Symlink(t, outside, filepath.Join(f.base, "real", "out"))
			backendtest.Symlink(t, "pvc-victim", filepath.Join(f.base, "tovol"))
			if _, err := f.store.Create(t.Context(), request(t, "x", "victim", "1Gi", "")); err != nil {
				t.Fatal(err)
			}
			before := backendtest.Snapshot(t, f.tmp, "")
			_, err := f.store.Create(t.Context(), request(t, "team", "data", "1Gi", tc.pattern))
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(before, backendtest.Snapshot(t, f.tmp, "")); diff != "" {
				t.Errorf("files changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestBaseSwappedAfterNew replaces the base with a symlink out of the root
// after the Store was made: operations must refuse it at the moment of use.
func TestBaseSwappedAfterNew(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	req := request(t, "team", "data", "1Gi", "")
	dir, err := dirOf(f.store.Create(ctx, req))
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(f.tmp, "outside")
	backendtest.WriteFile(t, filepath.Join(outside, dir, "precious"), "x")
	if err := os.Rename(f.base, f.base+".moved"); err != nil {
		t.Fatal(err)
	}
	backendtest.Symlink(t, outside, f.base)
	before := backendtest.Snapshot(t, f.tmp, "")
	checkErr(t, f.store.DeleteByName(ctx, req.PVName, dir), "escapes")
	_, err = f.store.Create(ctx, request(t, "team", "new", "1Gi", ""))
	checkErr(t, err, "escapes")
	if diff := cmp.Diff(before, backendtest.Snapshot(t, f.tmp, "")); diff != "" {
		t.Errorf("files changed (-before +after):\n%s", diff)
	}
}

func TestNewRefusals(t *testing.T) {
	tests := map[string]struct {
		mutate  func(t *testing.T, c *Config)
		want    error
		wantErr string
	}{
		"unknown onDelete": {
			mutate: func(t *testing.T, c *Config) { t.Helper(); c.OnDelete = "Shred" }, want: backend.ErrInvalidSpec, wantErr: "Shred",
		},
		"negative capacity": {
			mutate: func(t *testing.T, c *Config) { t.Helper(); c.Capacity.MaxVolumes = -1 }, want: backend.ErrInvalidSpec, wantErr: "negative",
		},
		"bad pattern": {
			mutate: func(t *testing.T, c *Config) { t.Helper(); c.Pattern = "{{range .PVC.Labels}}{{end}}" }, want: backend.ErrInvalidSpec, wantErr: "not allowed",
		},
		"no volume mapping": {
			mutate: func(t *testing.T, c *Config) { t.Helper(); c.VolumeDir = nil }, want: backend.ErrInvalidSpec, wantErr: "mapping",
		},
		"no location mapping": {
			mutate: func(t *testing.T, c *Config) { t.Helper(); c.Locate = nil }, want: backend.ErrInvalidSpec, wantErr: "mapping",
		},
		"relative root": {
			mutate: func(t *testing.T, c *Config) { t.Helper(); c.Root = "root" }, want: backend.ErrInvalidSpec, wantErr: "not absolute",
		},
		"missing root": {
			mutate: func(t *testing.T, c *Config) { t.Helper(); c.Root = filepath.Join(c.Root, "missing") }, want: backend.ErrUnavailable, wantErr: "no such file",
		},
		"missing base": {
			mutate: func(t *testing.T, c *Config) { t.Helper(); c.Base = "missing" }, want: backend.ErrUnavailable, wantErr: "no such file",
		},
		"base escaping the root": {
			mutate: func(t *testing.T, c *Config) {
				t.Helper()
				backendtest.Symlink(t, "/", filepath.Join(c.Root, "escape"))
				c.Base = "escape"
			},
			want: backend.ErrInvalidSpec, wantErr: "escapes",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.Mkdir(filepath.Join(root, "vols"), 0o755); err != nil {
				t.Fatal(err)
			}
			cfg := Config{FS: LocalFS{}, Root: root, Base: "vols", VolumeDir: hostPathDir, Locate: hostPathLocation}
			tc.mutate(t, &cfg)
			s, err := New(cfg)
			if err == nil {
				_, err = s.Probe(t.Context())
			}
			checkErr(t, err, tc.wantErr)
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v is not %v", err, tc.want)
			}
		})
	}
}

func TestVolumesError(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Options.Volumes = backend.NewListedVolumes(func() ([]*corev1.PersistentVolume, error) { return nil, errors.New("cache gone") })
	})
	_, err := f.store.Create(t.Context(), request(t, "team", "data", "1Gi", ""))
	checkErr(t, err, "cache gone")
	checkErr(t, f.store.DeleteByName(t.Context(), "pvc-team-data", "pvc-team-data"), "cache gone")
}

// indexedFixture is a fixture whose volumes come from a cache.Indexer with
// the fleet's path index, as in the manager.
func indexedFixture(t *testing.T) (*fixture, cache.Indexer) {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{backend.VolumePathIndex: backend.IndexVolumePaths})
	f := newFixture(t, func(c *Config) { c.Options.Volumes = backend.NewPathIndex(indexer) })
	return f, indexer
}

func TestOverlapThroughIndexer(t *testing.T) {
	elsewhere := volume("pvc-elsewhere", "team/data", "1Gi", testProvisioner)
	elsewhere.Spec.HostPath.Path = "/elsewhere/team/data"
	base := volume("pvc-base", "team", "1Gi", testProvisioner)
	base.Spec.HostPath.Path = volumesPath
	tests := map[string]struct {
		pv      *corev1.PersistentVolume
		remove  bool
		wantErr string
	}{
		"create at an indexed volume's directory": {
			pv: volume("pvc-old", "team/data", "1Gi", testProvisioner), wantErr: "another volume",
		},
		"create inside an indexed volume": {
			pv: volume("pvc-old", "team", "1Gi", "someone/else"), wantErr: "another volume",
		},
		"create around an indexed volume": {
			pv: volume("pvc-old", "team/data/deeper", "1Gi", testProvisioner), wantErr: "another volume",
		},
		"create beside a volume with a common name prefix": {
			pv: volume("pvc-old", "team/data2", "1Gi", testProvisioner),
		},
		"create at the path of a volume below another base":                  {pv: elsewhere},
		"create inside a volume at the base, which is no volume of the base": {pv: base},
		"remove with an indexed volume inside": {
			pv: volume("pvc-static", "team/data/inner", "1Gi", ""), remove: true, wantErr: "another volume",
		},
		"remove beside a volume with a common name prefix": {
			pv: volume("pvc-static", "team/data2", "1Gi", ""), remove: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, indexer := indexedFixture(t)
			if err := indexer.Add(tc.pv); err != nil {
				t.Fatal(err)
			}
			if tc.remove {
				checkErr(t, f.store.DeleteByName(t.Context(), "pvc-team-data", "team/data"), tc.wantErr)
				return
			}
			_, err := f.store.Create(t.Context(), request(t, "team", "data", "1Gi", nsPattern))
			checkErr(t, err, tc.wantErr)
		})
	}
}

// TestReservationDroppedOnceSaved: once a volume's PersistentVolume exists,
// the volume, not the reservation, keeps its directory from others, so
// reservations do not pile up.
func TestReservationDroppedOnceSaved(t *testing.T) {
	f, indexer := indexedFixture(t)
	ctx := t.Context()
	first := request(t, "team", "a", "1Gi", "team/a")
	dir, err := dirOf(f.store.Create(ctx, first))
	if err != nil {
		t.Fatal(err)
	}
	if err := indexer.Add(volume(first.PVName, dir, "1Gi", testProvisioner)); err != nil {
		t.Fatal(err)
	}
	second := request(t, "team", "b", "1Gi", "")
	if _, err := f.store.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{second.PVName}, slices.Sorted(maps.Keys(f.store.reservations))); diff != "" {
		t.Errorf("reservations (-want +got):\n%s", diff)
	}
	_, err = f.store.Create(ctx, request(t, "team", "c", "1Gi", "team"))
	checkErr(t, err, "contains or lies inside the directory of another volume")
}

// removeVolume releases a PersistentVolume's directory as a backend's Delete
// does.
func removeVolume(t *testing.T, f *fixture, pv *corev1.PersistentVolume, dir string) error {
	t.Helper()
	return f.store.DeleteAt(t.Context(), pv, dir)
}

// TestRemoveUnmarked: a directory without an owner marker, such as one a
// PersistentVolume made by hand points to, or one retained or holding
// archives, is deleted only when its PersistentVolume opts in.
func TestRemoveUnmarked(t *testing.T) {
	const annDeleteUnmarked = "provfleet.io/delete-unmarked"
	const archived = "team/data/archived-old-20260102T020405Z/file"
	tests := map[string]struct {
		setup       func(t *testing.T, f *fixture) string
		annotations map[string]string
		wantErr     string
		wantTree    []string
	}{
		"marked by its volume": {
			setup: func(t *testing.T, f *fixture) string {
				t.Helper()
				dir := f.create(t, request(t, "team", "data", "1Gi", nsPattern))
				backendtest.WriteFile(t, filepath.Join(f.base, dir, "file"), "x")
				return dir
			},
		},
		"unmarked": {
			setup: func(t *testing.T, f *fixture) string {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, "team/data/file"), "x")
				return "team/data"
			},
			wantErr:  "no owner marker",
			wantTree: []string{"team/", "team/data/", "team/data/file"},
		},
		"unmarked, holding archived volumes": {
			setup: func(t *testing.T, f *fixture) string {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, archived), "x")
				return "team/data"
			},
			wantErr:  "no owner marker",
			wantTree: []string{"team/", "team/data/", "team/data/archived-old-20260102T020405Z/", archived},
		},
		"retained by an earlier release": {
			setup: func(t *testing.T, f *fixture) string {
				t.Helper()
				req := request(t, "team", "data", "1Gi", nsPattern)
				dir := f.create(t, req)
				backendtest.WriteFile(t, filepath.Join(f.base, dir, "file"), "x")
				cfg := f.store.cfg
				cfg.OnDelete = backend.OnDeleteRetain
				retain, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := retain.DeleteByName(t.Context(), req.PVName, dir); err != nil {
					t.Fatal(err)
				}
				return dir
			},
			wantErr:  "no owner marker",
			wantTree: []string{"team/", "team/data/", "team/data/file"},
		},
		"unmarked, opted in": {
			setup: func(t *testing.T, f *fixture) string {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, "team/data/file"), "x")
				return "team/data"
			},
			annotations: map[string]string{annDeleteUnmarked: "true"},
		},
		"unmarked, opted in with another value": {
			setup: func(t *testing.T, f *fixture) string {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, "team/data/file"), "x")
				return "team/data"
			},
			annotations: map[string]string{annDeleteUnmarked: "yes"},
			wantErr:     "no owner marker",
			wantTree:    []string{"team/", "team/data/", "team/data/file"},
		},
		"opted in, marked by another volume": {
			setup: func(t *testing.T, f *fixture) string {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, "team/data/file"), "x")
				backendtest.WriteFile(t, filepath.Join(f.base, "team", markerName("data")), "pvc-other")
				return "team/data"
			},
			annotations: map[string]string{annDeleteUnmarked: "true"},
			wantErr:     "belongs to another volume",
			wantTree:    []string{"team/", "team/.data.provfleet-volume", "team/data/", "team/data/file"},
		},
		"unmarked and missing": {
			setup: func(t *testing.T, f *fixture) string { t.Helper(); return "team/data" },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			dir := tc.setup(t, f)
			pv := volume("pvc-team-data", dir, "1Gi", testProvisioner)
			pv.Annotations = tc.annotations
			checkErr(t, removeVolume(t, f, pv, dir), tc.wantErr)
			want := append([]string{JournalDir + "/"}, tc.wantTree...)
			if diff := cmp.Diff(want, backendtest.Tree(t, f.base)); diff != "" {
				t.Errorf("tree after Remove (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeleteOutsideLock: while one volume's files are being deleted, other
// claims of the provisioner get their volumes.
func TestDeleteOutsideLock(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	doomed := request(t, "team", "doomed", "1Gi", nsPattern)
	dir := f.create(t, doomed)
	backendtest.WriteFile(t, filepath.Join(f.base, dir, "precious-doomed"), "x")
	other := request(t, "team", "other", "1Gi", nsPattern)
	created := ""
	f.store.step = func(name string) error {
		if name != stepDelete {
			return nil
		}
		if !f.store.mu.TryLock() {
			t.Error("the store's lock is held while a volume's files are deleted")
			return nil
		}
		f.store.mu.Unlock()
		var err error
		if created, err = dirOf(f.store.Create(ctx, other)); err != nil {
			t.Errorf("Create during a delete: %v", err)
		}
		return nil
	}
	if err := f.store.DeleteByName(ctx, doomed.PVName, dir); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if created != "team/other" {
		t.Errorf("Create during a delete = %q, want %q", created, "team/other")
	}
	for _, entry := range backendtest.Tree(t, f.base) {
		if strings.HasSuffix(entry, "precious-doomed") || strings.Contains(entry, "doomed/") {
			t.Errorf("%s left after Remove", entry)
		}
	}
}

// TestDeleteLeftoversRemoved: a delete interrupted after its volume left its
// place, as by a crash, leaves nothing once the next delete ran.
func TestDeleteLeftoversRemoved(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	var dirs []string
	for _, name := range []string{"a", "b"} {
		dir := f.create(t, request(t, "team", name, "1Gi", nsPattern))
		backendtest.WriteFile(t, filepath.Join(f.base, dir, "precious-"+name), "x")
		dirs = append(dirs, dir)
	}
	f.store.step = func(name string) error {
		if name == stepDelete {
			return errors.New("crashed")
		}
		return nil
	}
	checkErr(t, f.store.DeleteByName(ctx, "pvc-team-a", dirs[0]), "crashed")
	f.restart(t)
	if err := f.store.DeleteByName(ctx, "pvc-team-b", dirs[1]); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	for _, entry := range backendtest.Tree(t, f.base) {
		if strings.Contains(entry, "precious-") {
			t.Errorf("%s left after the next Remove", entry)
		}
	}
}

// recordFault is how a recordFaultFS fails records.
type recordFault int

const (
	// answerLost makes a record empty and fails, as a server that made
	// the file and answered with an error, and fails removals.
	answerLost recordFault = iota
	// modeRefused fails creating and rewriting a record with
	// backend.ErrModeRefused, leaving no file, as a server that cannot
	// set a file's mode.
	modeRefused
)

// recordFaultFS is LocalFS whose records fail as fault says; volume
// directories and owner markers are left alone. creates counts the record
// creates tried.
type recordFaultFS struct {
	LocalFS
	fault   recordFault
	creates *atomic.Int32
}

func (f recordFaultFS) OpenBase(ctx context.Context, root, base string) (Dir, error) {
	d, err := f.LocalFS.OpenBase(ctx, root, base)
	return recordFaultDir{Dir: d, fs: f}, err
}

type recordFaultDir struct {
	Dir
	fs recordFaultFS
}

func (d recordFaultDir) OpenDir(ctx context.Context, name string) (Dir, error) {
	child, err := d.Dir.OpenDir(ctx, name)
	return recordFaultDir{Dir: child, fs: d.fs}, err
}

var errServer = errors.New("NFS3ERR_IO")

func (d recordFaultDir) CreateFile(ctx context.Context, name string, data []byte, perm fs.FileMode) (File, error) {
	if !strings.HasSuffix(name, recordSuffix) {
		return d.Dir.CreateFile(ctx, name, data, perm)
	}
	d.fs.creates.Add(1)
	if _, err := d.Lstat(ctx, name); d.fs.fault == modeRefused && err == nil {
		return nil, fmt.Errorf("cannot create %q: %w", name, fs.ErrExist)
	}
	if d.fs.fault == modeRefused {
		return nil, fmt.Errorf("cannot set the mode of %q: %w", name, backend.ErrModeRefused)
	}
	f, err := d.Dir.CreateFile(ctx, name, nil, perm)
	if err != nil {
		return nil, err
	}
	return nil, errors.Join(errServer, f.Close())
}

func (d recordFaultDir) RewriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	if d.fs.fault == modeRefused {
		return fmt.Errorf("cannot set the mode of %q: %w", name, backend.ErrModeRefused)
	}
	return d.Dir.RewriteFile(ctx, name, data, perm)
}

func (d recordFaultDir) Remove(ctx context.Context, name string) error {
	if d.fs.fault == answerLost && strings.HasSuffix(name, recordSuffix) {
		return errServer
	}
	return d.Dir.Remove(ctx, name)
}

// TestCreateAfterAnAnswerLost: a record the file system made empty before
// it answered with an error fails that try as the backend being
// unavailable (so the claim waits rather than being given up on), and is
// reused by the next, which makes the volume though the file system still
// fails every create and removal of a record.
func TestCreateAfterAnAnswerLost(t *testing.T) {
	var creates atomic.Int32
	f := newFixture(t, func(c *Config) { c.FS = recordFaultFS{fault: answerLost, creates: &creates} })
	req := request(t, "team", "data", "1Gi", "")
	_, err := f.store.Create(t.Context(), req)
	if !errors.Is(err, backend.ErrUnavailable) || !errors.Is(err, errServer) {
		t.Errorf("first try: %v, want the file system's error as the backend's being unavailable", err)
	}
	vol, err := f.store.Create(t.Context(), req)
	if err != nil {
		t.Fatalf("Create after the answer was lost: %v", err)
	}
	if info, err := os.Stat(filepath.Join(f.base, vol.Dir)); err != nil || !info.IsDir() {
		t.Errorf("volume directory: %v, want one made", err)
	}
	got, err := f.store.Records(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{record("team", "data", vol.Dir)}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Record{}, "Since")); diff != "" {
		t.Errorf("Records() (-want +got):\n%s", diff)
	}
}

// TestCreateModeRefused: a file system that cannot set a record's mode
// fails every try with an error that says so and is not the backend being
// unavailable, after one create a try, and leaves no record, not even the
// empty one an earlier try left.
func TestCreateModeRefused(t *testing.T) {
	var creates atomic.Int32
	f := newFixture(t, func(c *Config) { c.FS = recordFaultFS{fault: modeRefused, creates: &creates} })
	req := request(t, "team", "data", "1Gi", "")
	backendtest.WriteFile(t, filepath.Join(f.journal(), recordName(req.PVName, req.PVName)), "")
	const tries = 3
	for i := range tries {
		_, err := f.store.Create(t.Context(), req)
		if !errors.Is(err, backend.ErrModeRefused) || errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("try %d: %v, want an error wrapping backend.ErrModeRefused only", i+1, err)
		}
		if diff := cmp.Diff([]string(nil), backendtest.Tree(t, f.journal())); diff != "" {
			t.Errorf("try %d: records left (-want +got):\n%s", i+1, diff)
		}
	}
	// The first try meets the empty record, fails to rewrite it and
	// removes it; each try after it creates once.
	if got := creates.Load(); got != tries {
		t.Errorf("%d record creates in %d tries, want one a try", got, tries)
	}
}

// dirOf is the directory of what Create returns.
func dirOf(vol Volume, err error) (string, error) {
	return vol.Dir, err
}

// TestEmptyOwnerMarker: an owner marker made empty (its create carried out,
// its data never written: a kill in between, or an NFS server whose reply
// was lost) is taken by the next try of its volume, so the claim is not
// blocked for good; it is left alone while another volume's record names
// the directory or the directory exists.
func TestEmptyOwnerMarker(t *testing.T) {
	req := request(t, "team", "data", "1Gi", nsPattern)
	marker := func(f *fixture) string { return filepath.Join(f.base, "team", ".data"+markerSuffix) }
	tests := map[string]struct {
		setUp      func(t *testing.T, f *fixture)
		wantErr    string
		wantMarker string
		wantDir    bool
	}{
		"left by an earlier try": {
			setUp:      func(t *testing.T, f *fixture) { t.Helper() },
			wantMarker: req.PVName,
			wantDir:    true,
		},
		"another volume's create in flight": {
			setUp: func(t *testing.T, f *fixture) {
				t.Helper()
				content, err := json.Marshal(recordFile{PV: "pvc-other", Dir: "team/data", ClaimNamespace: "team", ClaimName: "other", ClaimUID: "other", Provisioner: testProvisioner})
				if err != nil {
					t.Fatal(err)
				}
				backendtest.WriteFile(t, filepath.Join(f.journal(), recordName("pvc-other", "team/data")), string(content))
			},
			wantErr: "another volume, pvc-other, is being made there",
		},
		"a directory beside it": {
			setUp: func(t *testing.T, f *fixture) {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, "team", "data", "keep"), "someone's data")
			},
			wantErr: "it belongs to another volume",
			wantDir: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			if _, err := f.store.Probe(t.Context()); err != nil {
				t.Fatal(err)
			}
			backendtest.WriteFile(t, marker(f), "")
			tt.setUp(t, f)
			_, err := f.store.Create(t.Context(), req)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Create: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errNotOurs)):
				t.Fatalf("Create: %v, want the directory refused as not this volume's: %s", err, tt.wantErr)
			}
			got, err := os.ReadFile(marker(f))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantMarker, string(got)); diff != "" {
				t.Errorf("owner marker (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(filepath.Join(f.base, "team", "data")); (err == nil) != tt.wantDir {
				t.Errorf("volume directory: %v, want it there: %v", err, tt.wantDir)
			}
		})
	}
}
