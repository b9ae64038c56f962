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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
)

// unlistableFS is LocalFS on which the folder named unlistable cannot be
// listed.
type unlistableFS struct {
	LocalFS
	unlistable string
}

func (f unlistableFS) OpenBase(ctx context.Context, root, base string) (Dir, error) {
	d, err := f.LocalFS.OpenBase(ctx, root, base)
	return unlistableDir{Dir: d, unlistable: f.unlistable}, err
}

type unlistableDir struct {
	Dir
	name, unlistable string
}

func (d unlistableDir) OpenDir(ctx context.Context, name string) (Dir, error) {
	child, err := d.Dir.OpenDir(ctx, name)
	return unlistableDir{Dir: child, name: name, unlistable: d.unlistable}, err
}

func (d unlistableDir) ReadNames(ctx context.Context) ([]string, error) {
	if d.name == d.unlistable {
		return nil, errors.New("cannot read the folder")
	}
	return d.Dir.ReadNames(ctx)
}

// TestReleaseAfterAnIncompleteWalk: a name whose directory was not found
// may be in the folder the walk could not list, so only the names released
// are done.
func TestReleaseAfterAnIncompleteWalk(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.FS = unlistableFS{unlistable: "team"}
		c.OnDelete = backend.OnDeleteArchive
	})
	for _, req := range []Request{request(t, "team", "a", "1Gi", ""), request(t, "team", "b", "1Gi", "{{.PVC.Namespace}}/{{.PVC.Name}}")} {
		dir, err := dirOf(f.store.Create(t.Context(), req))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.store.Forget(t.Context(), req.PVName, dir); err != nil {
			t.Fatal(err)
		}
	}
	var removed []backend.RemovedVolume
	for _, name := range []string{"pvc-team-a", "pvc-team-b", "pvc-team-c"} {
		removed = append(removed, backend.RemovedVolume{PVName: name, OnDelete: backend.OnDeleteArchive})
	}
	released, err := f.store.Release(t.Context(), removed)
	if err == nil || !strings.Contains(err.Error(), "cannot read the folder") {
		t.Errorf("Release: %v, want the listing's error", err)
	}
	if diff := cmp.Diff([]string{"pvc-team-a"}, released); diff != "" {
		t.Errorf("released (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"archived-pvc-team-a-20260102T020405Z/", "team/", "team/.b.provfleet-volume", "team/b/"},
		volumesIn(t, f.base)); diff != "" {
		t.Errorf("tree after Release (-want +got):\n%s", diff)
	}
}

// volumesIn lists the base's tree but for the records.
func volumesIn(t *testing.T, base string) []string {
	t.Helper()
	var tree []string
	for _, name := range backendtest.Tree(t, base) {
		if !strings.HasPrefix(name, JournalDir+"/") {
			tree = append(tree, name)
		}
	}
	return tree
}
