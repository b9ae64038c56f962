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
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// Reclaiming is a backend that keeps a record of the volumes it makes.
type Reclaiming interface {
	provisioning.Provisioner
	provisioning.Reclaimer
}

// UnsavedNames lists the names of r's unsaved volumes, or fails the test.
func UnsavedNames(t testing.TB, r provisioning.Reclaimer) []string {
	t.Helper()
	unsaved, err := r.Unsaved(t.Context())
	if err != nil {
		t.Fatalf("Unsaved: %v", err)
	}
	var names []string
	for _, u := range unsaved {
		names = append(names, u.Volume.Name)
	}
	return names
}

// ReclaimEnd is how CheckReclaim ends the record of the unsaved volume.
type ReclaimEnd int

const (
	// ReclaimDeleted ends it with Delete of the unsaved volume.
	ReclaimDeleted ReclaimEnd = iota
	// ReclaimSaved ends it with Saved of the provisioned volume.
	ReclaimSaved
)

// CheckReclaim provisions opts with p and checks that Unsaved returns the
// volume with the name, source, annotations and claim of the provisioned
// one; then, as end says, that Saved drops the record and keeps the
// directory, or that Delete of the unsaved volume removes both. localPath
// returns where a volume's directory is on disk.
func CheckReclaim(t *testing.T, p Reclaiming, opts provisioning.ProvisionOptions, localPath func(*corev1.PersistentVolume) string, end ReclaimEnd) {
	t.Helper()
	ctx := t.Context()
	pv, _, err := p.Provision(ctx, opts)
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	unsaved, err := p.Unsaved(ctx)
	if err != nil {
		t.Fatalf("Unsaved: %v", err)
	}
	if len(unsaved) != 1 {
		t.Fatalf("Unsaved() returned %d volumes, want 1", len(unsaved))
	}
	got := unsaved[0].Volume
	if got.Name != pv.Name || unsaved[0].Since.IsZero() {
		t.Errorf("Unsaved() = %s since %v, want %s since a time", got.Name, unsaved[0].Since, pv.Name)
	}
	if diff := cmp.Diff(pv.Spec.PersistentVolumeSource, got.Spec.PersistentVolumeSource); diff != "" {
		t.Errorf("unsaved volume source (-provisioned +unsaved):\n%s", diff)
	}
	if diff := cmp.Diff(pv.Annotations, got.Annotations); diff != "" {
		t.Errorf("unsaved volume annotations (-provisioned +unsaved):\n%s", diff)
	}
	claim := opts.PVC
	if ref := got.Spec.ClaimRef; ref == nil || ref.Namespace != claim.Namespace || ref.Name != claim.Name || ref.UID != claim.UID {
		t.Errorf("unsaved volume claimRef = %+v, want claim %s/%s %s", ref, claim.Namespace, claim.Name, claim.UID)
	}
	dir := localPath(pv)
	if end == ReclaimSaved {
		if err := p.Saved(ctx, got, pv); err != nil {
			t.Fatalf("Saved: %v", err)
		}
	} else if err := p.Delete(ctx, got); err != nil {
		t.Fatalf("Delete of the unsaved volume: %v", err)
	}
	if names := UnsavedNames(t, p); len(names) != 0 {
		t.Errorf("still on record: %v", names)
	}
	_, err = os.Stat(dir)
	switch {
	case end == ReclaimSaved && err != nil:
		t.Errorf("Saved touched the volume directory: %v", err)
	case end != ReclaimSaved && !os.IsNotExist(err):
		t.Errorf("Delete left the volume directory: %v", err)
	}
}

// SavedCase is a PersistentVolume saved for a provisioned volume: Mutate
// makes it from a copy of the provisioned one. Saved must settle the record;
// Removed says it removes the provisioned directory as a second one made
// for the PV, else it keeps it.
type SavedCase struct {
	Mutate  func(*corev1.PersistentVolume)
	Removed bool
	// Files, when set, writes a file into the provisioned directory
	// before Saved.
	Files bool
}

// Fixture is a backend made for one test case and where its volumes'
// directories are on disk.
type Fixture struct {
	Backend   Reclaiming
	LocalPath func(*corev1.PersistentVolume) string
}

// CheckSaved checks, in a subtest per case on a backend setup makes, what
// Saved does with the record and the directory of a provisioned volume.
func CheckSaved(t *testing.T, cases map[string]SavedCase, setup func(t *testing.T) (Fixture, error)) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := setup(t)
			if err != nil {
				t.Fatal(err)
			}
			checkSaved(t, f, tc)
		})
	}
}

// checkSaved provisions a claim with the fixture's backend, changes a copy of
// its PersistentVolume with the case's Mutate into the saved one, and checks
// that Saved drops the record of the provisioned volume, and removes its
// directory, a second one made for the PV, when Removed is set, and keeps
// it else: a record left would have the directory deleted once the saved
// PersistentVolume and its claim are gone.
func checkSaved(t *testing.T, f Fixture, tc SavedCase) {
	t.Helper()
	p := f.Backend
	pv, _, err := p.Provision(t.Context(), Options(Claim("team", "data", "1Gi"), nil))
	if err != nil {
		t.Fatal(err)
	}
	if tc.Files {
		WriteFile(t, filepath.Join(f.LocalPath(pv), "data"), "a pod's data")
	}
	saved := pv.DeepCopy()
	tc.Mutate(saved)
	if err := p.Saved(t.Context(), pv, saved); err != nil {
		t.Fatalf("Saved: %v", err)
	}
	if names := UnsavedNames(t, p); len(names) != 0 {
		t.Errorf("still on record after Saved: %v", names)
	}
	_, err = os.Stat(f.LocalPath(pv))
	switch {
	case tc.Removed && !os.IsNotExist(err):
		t.Errorf("Saved left the second directory: %v", err)
	case !tc.Removed && err != nil:
		t.Errorf("Saved touched the directory: %v", err)
	}
}
