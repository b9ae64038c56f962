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
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// cloneFixture is a provisioner of node-a with a source volume holding
// data, and the options of a claim to clone it.
type cloneFixture struct {
	p      *Provisioner
	vols   string
	source *corev1.PersistentVolume
	opts   provisioning.ProvisionOptions
	events []string
}

func newCloneFixture(t *testing.T) *cloneFixture {
	t.Helper()
	_, root := layout(t)
	f := &cloneFixture{vols: filepath.Join(root, "vols")}
	var err error
	f.p, err = New(Config{Path: f.vols, HostPathRoot: root, NodeName: "node-a"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.p.Close)
	sourceClaim := backendtest.Claim("team", "source", "1Gi")
	f.source, _, err = f.p.Provision(t.Context(), backendtest.Options(sourceClaim, backendtest.Class(nil)))
	if err != nil {
		t.Fatal(err)
	}
	f.source.Name = "pvc-" + string(sourceClaim.UID)
	if err := f.p.Saved(t.Context(), f.source, f.source); err != nil {
		t.Fatal(err)
	}
	dir := localPath(f.source)
	backendtest.WriteFile(t, filepath.Join(dir, "data"), "the source's data")
	backendtest.WriteFile(t, filepath.Join(dir, "sub", "more"), "more data")
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.opts = backendtest.Options(backendtest.Claim("team", "copy", "1Gi"), backendtest.Class(nil))
	f.opts.CloneSource = &provisioning.CloneSource{Claim: sourceClaim, Volume: f.source}
	f.opts.DataSource = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: sourceClaim.Name, Namespace: &sourceClaim.Namespace}
	f.opts.Eventf = func(eventType, reason, format string, args ...any) {
		f.events = append(f.events, eventType+" "+reason+" "+fmt.Sprintf(format, args...))
	}
	return f
}

// provisionUntilDone calls Provision until it is no longer in the
// background, as the controller's retries do.
func (f *cloneFixture) provisionUntilDone(t *testing.T) (*corev1.PersistentVolume, error) {
	t.Helper()
	return backendtest.ProvisionUntilDone(t, f.p, f.opts)
}

// shared is the fixture as backendtest's clone checks take it.
func (f *cloneFixture) shared() backendtest.CloneFixture {
	return backendtest.CloneFixture{
		Backend: f.p, Root: f.vols, Source: f.source, Options: f.opts,
		Reopen: func(*testing.T) (backendtest.Cloning, error) {
			return New(Config{Path: f.vols, HostPathRoot: filepath.Dir(f.vols), NodeName: "node-a"}, Options{})
		},
	}
}

// TestCloneProvision: a clone is copied in the background, its special
// files skipped with an Event, and its PersistentVolume given once done.
func TestCloneProvision(t *testing.T) {
	f := newCloneFixture(t)
	if !f.p.SupportsDataSource(t.Context(), schema.GroupKind{Kind: "PersistentVolumeClaim"}) {
		t.Error("SupportsDataSource refuses claims")
	}
	if f.p.SupportsDataSource(t.Context(), schema.GroupKind{Group: "snapshot.storage.k8s.io", Kind: "VolumeSnapshot"}) {
		t.Error("SupportsDataSource accepts snapshots")
	}
	pv, err := f.provisionUntilDone(t)
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if got, want := localPath(pv), filepath.Join(f.vols, f.opts.PVName); got != want {
		t.Errorf("the clone's path is %q, want %q", got, want)
	}
	if diff := cmp.Diff([]string{"data", "sub/", "sub/more"}, backendtest.Tree(t, localPath(pv))); diff != "" {
		t.Errorf("the clone (-want +got):\n%s", diff)
	}
	want := []string{"Warning SpecialFilesSkipped The clone of " + f.source.Name + " left out 1 special files (FIFOs, sockets, devices), such as fifo"}
	if diff := cmp.Diff(want, f.events); diff != "" {
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
				f.source.Annotations[backend.AnnNode] = "node-b"
			},
			wantIs: backend.ErrOtherNode,
		},
		"a source the controller did not find": {
			change: func(f *cloneFixture) {
				f.opts.CloneSource = nil
			},
			wantErr: "the claim to clone, source, was not found",
		},
		"a source bound to no volume": {
			change:  func(f *cloneFixture) { f.opts.CloneSource.Volume = nil },
			wantErr: "bound to no volume",
		},
		"a source path outside the provisioner's": {
			change: func(f *cloneFixture) {
				f.source.Spec.Local.Path = filepath.Join(filepath.Dir(f.vols), "other")
			},
			wantErr: "cannot clone volume",
		},
		"a source larger than the request": {
			change: func(f *cloneFixture) {
				cloneSource, dataSource := f.opts.CloneSource, f.opts.DataSource
				f.opts = backendtest.Options(backendtest.Claim("team", "copy", "10"), backendtest.Class(nil))
				f.opts.CloneSource, f.opts.DataSource = cloneSource, dataSource
			},
			wantIs: dirvol.ErrTooLarge,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newCloneFixture(t)
			before := backendtest.Tree(t, f.vols)
			f.source = f.source.DeepCopy()
			f.opts.CloneSource.Volume = f.source
			tc.change(f)
			_, err := f.provisionUntilDone(t)
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
	backendtest.CheckCloneAbandoned(t, newCloneFixture(t).shared())
}

// TestCloneStopped: a provisioner closed during a copy stops it; the
// record it leaves is reclaimed by the next one, which leaves nothing.
func TestCloneStopped(t *testing.T) {
	backendtest.CheckCloneStopped(t, newCloneFixture(t).shared())
}
