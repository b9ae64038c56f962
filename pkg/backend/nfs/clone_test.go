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

package nfs

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// cloneFixture is a provisioner with a source volume holding data, and
// the options of a claim to clone it.
type cloneFixture struct {
	*backendtest.CloneFixture
	p      *Provisioner
	cfg    Config
	export string
}

func newCloneFixture(t *testing.T, r reach) *cloneFixture {
	t.Helper()
	f := &cloneFixture{cfg: Config{Path: "/export"}}
	f.export = r(t, &f.cfg)
	var err error
	if f.p, err = New(f.cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.p.Close)
	reopen := func(*testing.T) (backendtest.Cloning, error) { return New(f.cfg, Options{}) }
	f.CloneFixture = backendtest.NewCloneFixture(t, f.p, f.export, func(pv *corev1.PersistentVolume) string { return f.hostDir(t, pv) }, reopen)
	return f
}

// hostDir is the host folder of the subdirectory pv names.
func (f *cloneFixture) hostDir(t *testing.T, pv *corev1.PersistentVolume) string {
	t.Helper()
	rel, err := filepath.Rel(f.cfg.Path, pv.Spec.NFS.Path)
	if err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("volume %s is not on the export: %q", pv.Name, pv.Spec.NFS.Path)
	}
	return filepath.Join(f.export, rel)
}

// TestCloneProvision: a clone is copied in the background, a link as a
// link and its FIFO skipped with an Event, into a subdirectory of the
// export, and its PersistentVolume given once done.
func TestCloneProvision(t *testing.T) {
	for name, r := range reaches {
		t.Run(name, func(t *testing.T) {
			f := newCloneFixture(t, r)
			if !f.p.SupportsDataSource(t.Context(), schema.GroupKind{Kind: "PersistentVolumeClaim"}) {
				t.Error("SupportsDataSource refuses claims")
			}
			if f.p.SupportsDataSource(t.Context(), schema.GroupKind{Group: "snapshot.storage.k8s.io", Kind: "VolumeSnapshot"}) {
				t.Error("SupportsDataSource accepts snapshots")
			}
			woken := make(chan struct{})
			f.Options.Wake = func() { close(woken) }
			if _, state, err := f.p.Provision(t.Context(), f.Options); state != provisioning.ProvisioningInBackground {
				t.Fatalf("Provision = %s, %v; want InBackground", state, err)
			}
			// The copy's end wakes the claim, whose next Provision is done.
			select {
			case <-woken:
			case <-t.Context().Done():
				t.Fatal("the copy's end did not wake the claim")
			}
			pv, state, err := f.p.Provision(t.Context(), f.Options)
			if err != nil || state != provisioning.ProvisioningFinished {
				t.Fatalf("Provision once woken = %s, %v; want Finished", state, err)
			}
			if got, want := pv.Spec.NFS.Path, "/export/"+f.Options.PVName; got != want {
				t.Errorf("the clone's path is %q, want %q", got, want)
			}
			want := backendtest.SnapshotBelow(t, f.hostDir(t, f.Source))
			delete(want, "fifo")
			if diff := cmp.Diff(want, backendtest.SnapshotBelow(t, f.hostDir(t, pv))); diff != "" {
				t.Errorf("the clone (-source +clone):\n%s", diff)
			}
			wantEvents := []string{"Warning SpecialFilesSkipped The clone of " + f.Source.Name + " left out 1 special files (FIFOs, sockets, devices), such as fifo"}
			if diff := cmp.Diff(wantEvents, f.Events); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCloneRefused: a clone of a volume that is not this export's or this
// store's, or that does not fit the request, fails and leaves nothing.
func TestCloneRefused(t *testing.T) {
	tests := map[string]struct {
		change  func(t *testing.T, f *cloneFixture)
		wantErr string
		wantIs  error
	}{
		"a source on another server": {
			change:  func(_ *testing.T, f *cloneFixture) { f.Source.Spec.NFS.Server = "elsewhere.example.com" },
			wantErr: "is on server",
		},
		"a source of another export": {
			change:  func(_ *testing.T, f *cloneFixture) { f.Source.Spec.NFS.Path = "/other/" + f.Source.Name },
			wantErr: "cannot clone volume",
		},
		"a source of another kind": {
			change: func(_ *testing.T, f *cloneFixture) {
				f.Source.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/export/x"}}
			},
			wantErr: "not an nfs volume",
		},
		"a directory of the export that is no volume of the store": {
			change: func(t *testing.T, f *cloneFixture) {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.export, "planted", "secret"), "not a volume")
				f.Source.Spec.NFS.Path = "/export/planted"
			},
			wantErr: "is not a volume of this store",
		},
		"another volume's directory": {
			change:  func(_ *testing.T, f *cloneFixture) { f.Source.Name = "pvc-another" },
			wantErr: "is not the directory of volume pvc-another",
		},
		"a source the controller did not find": {
			change:  func(_ *testing.T, f *cloneFixture) { f.Options.CloneSource = nil },
			wantErr: "the claim to clone, source, was not found",
		},
		"a source bound to no volume": {
			change:  func(_ *testing.T, f *cloneFixture) { f.Options.CloneSource.Volume = nil },
			wantErr: "bound to no volume",
		},
		"a source larger than the request": {
			change: func(_ *testing.T, f *cloneFixture) {
				cloneSource, dataSource, eventf := f.Options.CloneSource, f.Options.DataSource, f.Options.Eventf
				f.Options = backendtest.Options(backendtest.Claim("team", "copy", "1000"), backendtest.Class(nil))
				f.Options.CloneSource, f.Options.DataSource, f.Options.Eventf = cloneSource, dataSource, eventf
			},
			wantIs: dirvol.ErrTooLarge,
		},
	}
	for reachName, r := range reaches {
		for name, tc := range tests {
			t.Run(reachName+"/"+name, func(t *testing.T) {
				f := newCloneFixture(t, r)
				f.Source = f.Source.DeepCopy()
				f.Options.CloneSource.Volume = f.Source
				tc.change(t, f)
				before := backendtest.Tree(t, f.export)
				_, err := backendtest.ProvisionUntilDone(t, f.p, f.Options)
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || (tc.wantIs != nil && !errors.Is(err, tc.wantIs)) {
					t.Fatalf("Provision: %v; want an error saying %q, wrapping %v", err, tc.wantErr, tc.wantIs)
				}
				if diff := cmp.Diff(before, backendtest.Tree(t, f.export)); diff != "" {
					t.Errorf("left behind (-before +after):\n%s", diff)
				}
			})
		}
	}
}

// TestCloneAbandoned: a claim that abandons its clone stops the copy and
// leaves nothing.
func TestCloneAbandoned(t *testing.T) {
	for name, r := range reaches {
		t.Run(name, func(t *testing.T) { backendtest.CheckCloneAbandoned(t, newCloneFixture(t, r).CloneFixture) })
	}
}

// TestCloneStopped: a provisioner closed during a copy stops it; the
// record it leaves is reclaimed by the next one, which leaves nothing.
func TestCloneStopped(t *testing.T) {
	for name, r := range reaches {
		t.Run(name, func(t *testing.T) { backendtest.CheckCloneStopped(t, newCloneFixture(t, r).CloneFixture) })
	}
}
