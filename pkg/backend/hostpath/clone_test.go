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

package hostpath

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
)

// cloneFixture is a provisioner of node-a with a source volume holding
// data, and the options of a claim to clone it.
type cloneFixture struct {
	*backendtest.CloneFixture
	p    *Provisioner
	vols string
}

func newCloneFixture(t *testing.T) *cloneFixture {
	t.Helper()
	_, root := layout(t)
	f := &cloneFixture{vols: filepath.Join(root, "vols")}
	cfg := Config{Path: f.vols, HostPathRoot: root, NodeName: "node-a"}
	var err error
	if f.p, err = New(cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.p.Close)
	reopen := func(*testing.T) (backendtest.Cloning, error) { return New(cfg, Options{}) }
	f.CloneFixture = backendtest.NewCloneFixture(t, f.p, f.vols, localPath, reopen)
	return f
}

// TestCloneProvision: a clone is copied in the background, a link as a
// link and its FIFO skipped with an Event, and its PersistentVolume given
// once done.
func TestCloneProvision(t *testing.T) {
	f := newCloneFixture(t)
	if !f.p.SupportsDataSource(t.Context(), schema.GroupKind{Kind: "PersistentVolumeClaim"}) {
		t.Error("SupportsDataSource refuses claims")
	}
	if f.p.SupportsDataSource(t.Context(), schema.GroupKind{Group: "snapshot.storage.k8s.io", Kind: "VolumeSnapshot"}) {
		t.Error("SupportsDataSource accepts snapshots")
	}
	pv, err := backendtest.ProvisionUntilDone(t, f.p, f.Options)
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if got, want := localPath(pv), filepath.Join(f.vols, f.Options.PVName); got != want {
		t.Errorf("the clone's path is %q, want %q", got, want)
	}
	want := backendtest.SnapshotBelow(t, localPath(f.Source))
	delete(want, "fifo")
	if diff := cmp.Diff(want, backendtest.SnapshotBelow(t, localPath(pv))); diff != "" {
		t.Errorf("the clone (-source +clone):\n%s", diff)
	}
	wantEvents := []string{"Warning SpecialFilesSkipped The clone of " + f.Source.Name + " left out 1 special files (FIFOs, sockets, devices), such as fifo"}
	if diff := cmp.Diff(wantEvents, f.Events); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
}

// TestCloneRefused: a clone of a volume that is not this node's, or that
// does not fit the request, fails and leaves nothing.
func TestCloneRefused(t *testing.T) {
	tests := map[string]struct {
		change  func(f *cloneFixture)
		wantErr string
		wantIs  error
	}{
		"a source of another node": {
			change: func(f *cloneFixture) {
				f.Source.Annotations[backend.AnnNode] = "node-b"
			},
			wantIs: backend.ErrOtherNode,
		},
		"a source the controller did not find": {
			change: func(f *cloneFixture) {
				f.Options.CloneSource = nil
			},
			wantErr: "the claim to clone, source, was not found",
		},
		"a source bound to no volume": {
			change:  func(f *cloneFixture) { f.Options.CloneSource.Volume = nil },
			wantErr: "bound to no volume",
		},
		"a source path outside the provisioner's": {
			change: func(f *cloneFixture) {
				f.Source.Spec.Local.Path = filepath.Join(filepath.Dir(f.vols), "other")
			},
			wantErr: "cannot clone volume",
		},
		"a source larger than the request": {
			change: func(f *cloneFixture) {
				cloneSource, dataSource := f.Options.CloneSource, f.Options.DataSource
				f.Options = backendtest.Options(backendtest.Claim("team", "copy", "10"), backendtest.Class(nil))
				f.Options.CloneSource, f.Options.DataSource = cloneSource, dataSource
			},
			wantIs: dirvol.ErrTooLarge,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newCloneFixture(t)
			before := backendtest.Tree(t, f.vols)
			f.Source = f.Source.DeepCopy()
			f.Options.CloneSource.Volume = f.Source
			tc.change(f)
			_, err := backendtest.ProvisionUntilDone(t, f.p, f.Options)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || (tc.wantIs != nil && !errors.Is(err, tc.wantIs)) {
				t.Fatalf("Provision: %v; want an error saying %q, wrapping %v", err, tc.wantErr, tc.wantIs)
			}
			if diff := cmp.Diff(before, backendtest.Tree(t, f.vols)); diff != "" {
				t.Errorf("left behind (-before +after):\n%s", diff)
			}
		})
	}
}

// TestCloneAbandoned: a claim that abandons its clone stops the copy and
// leaves nothing.
func TestCloneAbandoned(t *testing.T) {
	backendtest.CheckCloneAbandoned(t, newCloneFixture(t).CloneFixture)
}

// TestCloneStopped: a provisioner closed during a copy stops it; the
// record it leaves is reclaimed by the next one, which leaves nothing.
func TestCloneStopped(t *testing.T) {
	backendtest.CheckCloneStopped(t, newCloneFixture(t).CloneFixture)
}
