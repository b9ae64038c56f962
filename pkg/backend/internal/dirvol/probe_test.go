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
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// TestProbe: New reaches nothing; the first probe makes the record folder,
// and later ones report a base that went away or came back without it.
func TestProbe(t *testing.T) {
	tests := map[string]struct {
		// change changes the base of a store probed once.
		change  func(t *testing.T, f *fixture)
		want    error
		wantErr string
	}{
		"unchanged": {change: func(*testing.T, *fixture) {}},
		"base gone": {
			change:  func(t *testing.T, f *fixture) { t.Helper(); rename(t, f.base, f.base+".moved") },
			want:    backend.ErrUnavailable,
			wantErr: "no such file",
		},
		"base back": {
			change: func(t *testing.T, f *fixture) {
				t.Helper()
				rename(t, f.base, f.base+".moved")
				rename(t, f.base+".moved", f.base)
			},
		},
		"base back without its records, as an empty mount point": {
			change: func(t *testing.T, f *fixture) {
				t.Helper()
				rename(t, f.base, f.base+".moved")
				if err := os.Mkdir(f.base, 0o755); err != nil {
					t.Fatal(err)
				}
			},
			want:    backend.ErrUnavailable,
			wantErr: "holds no " + JournalDir + " folder",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			tc.change(t, f)
			before := backendtest.Snapshot(t, f.tmp, "")
			space, err := f.store.Probe(t.Context())
			checkErr(t, err, tc.wantErr)
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v is not %v", err, tc.want)
			}
			if err == nil && (space.TotalBytes <= 0 || space.AvailableBytes > space.TotalBytes) {
				t.Errorf("Probe() = %+v, want a positive total holding the available bytes", space)
			}
			if diff := cmp.Diff(before, backendtest.Snapshot(t, f.tmp, "")); diff != "" {
				t.Errorf("files changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestNewReachesNothing: New of a missing base succeeds and makes nothing;
// the first probe reports the base, and makes the record folder once it is
// there.
func TestNewReachesNothing(t *testing.T) {
	root := t.TempDir()
	s, err := New(Config{FS: LocalFS{}, Root: root, Base: "vols", VolumeDir: hostPathDir, Locate: hostPathLocation})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if diff := cmp.Diff([]string(nil), backendtest.Tree(t, root)); diff != "" {
		t.Errorf("tree after New (-want +got):\n%s", diff)
	}
	if _, err := s.Probe(t.Context()); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Probe() of a missing base: %v, want an error wrapping %v", err, backend.ErrUnavailable)
	}
	if err := os.Mkdir(filepath.Join(root, "vols"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Probe(t.Context()); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if diff := cmp.Diff([]string{"vols/", "vols/" + JournalDir + "/"}, backendtest.Tree(t, root)); diff != "" {
		t.Errorf("tree after Probe (-want +got):\n%s", diff)
	}
}

// TestCreateRefusesWhatDoesNotFit: a claim larger than the space the file
// system reports is refused before anything is made; a file system that
// reports no size is not checked.
func TestCreateRefusesWhatDoesNotFit(t *testing.T) {
	const gi = 1 << 30
	tests := map[string]struct {
		space   provisioning.Space
		size    string
		wantErr string
		// noRoom: the refusal wraps provisioning.ErrNoRoom.
		noRoom bool
	}{
		"fits":                 {space: provisioning.Space{AvailableBytes: 2 * gi, TotalBytes: 10 * gi}, size: "1Gi"},
		"fits exactly":         {space: provisioning.Space{AvailableBytes: 2 * gi, TotalBytes: 10 * gi}, size: "2Gi"},
		"one byte too many":    {space: provisioning.Space{AvailableBytes: 2 * gi, TotalBytes: 10 * gi}, size: "2147483649", wantErr: "not enough free space: 2Gi of 10Gi available, the claim requests 2147483649", noRoom: true},
		"full":                 {space: provisioning.Space{TotalBytes: 10 * gi}, size: "1", wantErr: "not enough free space: 0 of 10Gi available", noRoom: true},
		"no size reported":     {space: provisioning.Space{}, size: "1Ei"},
		"larger than the disk": {space: provisioning.Space{AvailableBytes: 2 * gi, TotalBytes: 10 * gi}, size: "11Gi", wantErr: "the claim requests 11Gi, more than the whole file system"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.FS = spaceFS{space: tc.space} })
			before := backendtest.Tree(t, f.base)
			_, err := f.store.Create(t.Context(), request(t, "team", "data", tc.size, ""))
			checkErr(t, err, tc.wantErr)
			if got := errors.Is(err, provisioning.ErrNoRoom); got != tc.noRoom {
				t.Errorf("errors.Is(%v, ErrNoRoom) = %v, want %v", err, got, tc.noRoom)
			}
			if tc.wantErr == "" {
				return
			}
			if diff := cmp.Diff(before, backendtest.Tree(t, f.base)); diff != "" {
				t.Errorf("tree of the base after a refusal (-before +after):\n%s", diff)
			}
		})
	}
}

// TestCreateRefusesMoreThanTheDisk: on the host's file system, a claim
// larger than the whole disk is refused and one of a mebibyte is not.
func TestCreateRefusesMoreThanTheDisk(t *testing.T) {
	f := newFixture(t, nil)
	space, err := f.store.Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	before := backendtest.Tree(t, f.base)
	huge := resource.NewQuantity(space.TotalBytes+1, resource.BinarySI).String()
	_, err = f.store.Create(t.Context(), request(t, "team", "huge", huge, ""))
	checkErr(t, err, "not enough free space")
	if diff := cmp.Diff(before, backendtest.Tree(t, f.base)); diff != "" {
		t.Errorf("tree of the base after a refusal (-before +after):\n%s", diff)
	}
	if _, err := f.store.Create(t.Context(), request(t, "team", "small", "1Mi", "")); err != nil {
		t.Errorf("Create of 1Mi: %v", err)
	}
}

// spaceFS is the host's file system reporting a given space.
type spaceFS struct {
	LocalFS
	space provisioning.Space
}

func (f spaceFS) OpenBase(ctx context.Context, root, base string) (Dir, error) {
	d, err := f.LocalFS.OpenBase(ctx, root, base)
	if err != nil {
		return nil, err
	}
	return spaceDir{Dir: d, space: f.space}, nil
}

type spaceDir struct {
	Dir
	space provisioning.Space
}

func (d spaceDir) Space(context.Context) (provisioning.Space, error) { return d.space, nil }

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}
