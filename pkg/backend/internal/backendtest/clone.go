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

package backendtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// Cloning is a backend that clones in the background and can be stopped.
type Cloning interface {
	Reclaiming
	Close()
}

// CloneFixture is a backend with a source volume holding data, and the
// options of a claim that clones it.
type CloneFixture struct {
	Backend Cloning
	// Root is the folder on disk that holds the backend's volume
	// directories, the clone's by its PV name.
	Root    string
	Source  *corev1.PersistentVolume
	Options provisioning.ProvisionOptions
	// Reopen makes another backend on the same storage, as a restarted
	// manager would.
	Reopen func(t *testing.T) (Cloning, error)
	// Events are those the clone's Options recorded, as "type reason
	// message".
	Events []string
}

// NewCloneFixture provisions with backend a source volume and saves it,
// fills its directory, found on disk by hostDir, with a file, a bigger file
// two folders down, a link to it and a FIFO, and returns the fixture with
// the options of a claim that clones it.
func NewCloneFixture(t *testing.T, backend Cloning, root string, hostDir func(*corev1.PersistentVolume) string,
	reopen func(*testing.T) (Cloning, error)) *CloneFixture {
	t.Helper()
	f := &CloneFixture{Backend: backend, Root: root, Reopen: reopen}
	sourceClaim := Claim("team", "source", "1Gi")
	sourceOptions := Options(sourceClaim, Class(nil))
	var err error
	if f.Source, _, err = backend.Provision(t.Context(), sourceOptions); err != nil {
		t.Fatal(err)
	}
	f.Source.Name = sourceOptions.PVName
	if err := backend.Saved(t.Context(), f.Source, f.Source); err != nil {
		t.Fatal(err)
	}
	dir := hostDir(f.Source)
	WriteFile(t, filepath.Join(dir, "data"), "the source's data")
	WriteFile(t, filepath.Join(dir, "sub", "deeper", "more"), strings.Repeat("more data ", 20_000))
	Symlink(t, "sub/deeper/more", filepath.Join(dir, "link"))
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.Options = Options(Claim("team", "copy", "1Gi"), Class(nil))
	f.Options.CloneSource = &provisioning.CloneSource{Claim: sourceClaim, Volume: f.Source}
	f.Options.DataSource = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: sourceClaim.Name, Namespace: &sourceClaim.Namespace}
	f.Options.Eventf = func(eventType, reason, format string, args ...any) {
		f.Events = append(f.Events, eventType+" "+reason+" "+fmt.Sprintf(format, args...))
	}
	return f
}

// SnapshotBelow is the tree below dir, by paths relative to it: what a
// clone of dir must hold, but the special files.
func SnapshotBelow(t *testing.T, dir string) map[string]Entry {
	t.Helper()
	rel := map[string]Entry{}
	for p, e := range Snapshot(t, dir, "") {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		if r != "." {
			rel[r] = e
		}
	}
	return rel
}

// ProvisionUntilDone calls Provision until it is no longer in the
// background, as the controller's retries do, each call in the background
// saying that it copies.
func ProvisionUntilDone(t *testing.T, p provisioning.Provisioner, opts provisioning.ProvisionOptions) (*corev1.PersistentVolume, error) {
	t.Helper()
	for {
		pv, state, err := p.Provision(t.Context(), opts)
		if state != provisioning.ProvisioningInBackground {
			if state != provisioning.ProvisioningFinished {
				t.Fatalf("Provision: state %s, want Finished", state)
			}
			return pv, err
		}
		if err == nil || !strings.Contains(err.Error(), "copying the source volume") {
			t.Fatalf("Provision in the background: %v, want it to say it copies", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// CheckCloneAbandoned checks that a claim that abandons its clone stops the
// copy and leaves nothing on disk or on record.
func CheckCloneAbandoned(t *testing.T, f *CloneFixture) {
	t.Helper()
	before := Tree(t, f.Root)
	startCopy(t, f)
	opts := f.Options
	opts.Abandoned = true
	pv, state, err := f.Backend.Provision(t.Context(), opts)
	if pv != nil || state != provisioning.ProvisioningFinished || err != nil {
		t.Fatalf("Provision abandoned = %v, %s, %v; want nothing, Finished", pv, state, err)
	}
	if diff := cmp.Diff(before, Tree(t, f.Root)); diff != "" {
		t.Errorf("left behind (-before +after):\n%s", diff)
	}
	unsaved, err := f.Backend.Unsaved(t.Context())
	if err != nil || len(unsaved) != 0 {
		t.Errorf("Unsaved = %d volumes, %v; want none", len(unsaved), err)
	}
}

// CheckCloneStopped checks that a backend stopped during a copy stops it,
// and that the record it leaves has the next backend, reclaiming it, leave
// nothing.
func CheckCloneStopped(t *testing.T, f *CloneFixture) {
	t.Helper()
	before := Tree(t, f.Root)
	startCopy(t, f)
	f.Backend.Close()
	next, err := f.Reopen(t)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	unsaved, err := next.Unsaved(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range unsaved {
		if u.Volume.Name == f.Source.Name {
			continue
		}
		if err := next.Delete(context.Background(), u.Volume); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if _, err := os.Lstat(filepath.Join(f.Root, f.Options.PVName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the clone's directory is left after reclaim: %v", err)
	}
	if diff := cmp.Diff(before, Tree(t, f.Root)); diff != "" {
		t.Errorf("left behind (-before +after):\n%s", diff)
	}
}

// startCopy has f's backend start the clone, which goes on in the
// background.
func startCopy(t *testing.T, f *CloneFixture) {
	t.Helper()
	if _, state, err := f.Backend.Provision(t.Context(), f.Options); state != provisioning.ProvisioningInBackground {
		t.Fatalf("Provision = %s, %v; want InBackground", state, err)
	}
}
