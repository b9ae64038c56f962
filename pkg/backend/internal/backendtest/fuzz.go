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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/backend"
)

// FuzzBackend adapts one directory backend to FuzzConfinement.
type FuzzBackend struct {
	// New returns a provisioner confined to root whose volumes go below base,
	// a folder of root, with the onDelete policy and the runtime options of
	// FuzzOptions. What it starts (a file server) ends with t.
	New func(t *testing.T, root, base string, onDelete backend.OnDeletePolicy, opts FuzzOptions) (Reclaiming, error)
	// LocalPath returns where the directory of a PersistentVolume is on disk.
	LocalPath func(pv *corev1.PersistentVolume, base string) string
}

// FuzzOptions are the runtime options FuzzConfinement gives a backend.
type FuzzOptions struct {
	ProvisionerNames []string
	Volumes          backend.ListedVolumes
	Now              func() time.Time
}

var policies = []backend.OnDeletePolicy{backend.OnDeleteDelete, backend.OnDeleteRetain, backend.OnDeleteArchive}

// confinementSeeds are path patterns, claim namespaces, names, a label and an
// annotation that FuzzConfinement starts from.
var confinementSeeds = [][5]string{
	{"", "team", "data", "", ""},
	{"{{.PVC.Namespace}}/{{.PVC.Name}}", "..", "..", "", ""},
	{"{{.PVC.Namespace}}/{{.PVC.Name}}", "team", "../../outside", "", ""},
	{"{{.PVC.Labels.dir}}/x", "team", "data", "out", ""},
	{"{{.PVC.Labels.dir}}/x", "team", "data", "up", ""},
	{"{{.PVC.Labels.dir}}", "team", "data", "../other", ""},
	{`{{index .PVC.Annotations "dir"}}`, "team", "data", "", "/etc"},
	{`{{index .PVC.Annotations "dir"}}`, "team", "data", "", "pvc-victim/inner"},
	{"pvc-victim", "team", "data", "", ""},
	{"out", "team", "data", "", ""},
	{"real/out/{{.PVName}}", "team", "data", "", ""},
	{"a/b/c/{{.PVC.Name}}", "team", "data\n", "", ""},
	{"{{range .PVC.Labels}}{{end}}", "team", "data", "", ""},
	{"{{.PVC.Name}}", "team", ".snapshot", "", ""},
	{"${.PVC.namespace}/${.PVC.name}", "..", "..", "", ""},
	{"${.PVC.labels.dir}/x", "team", "data", "../other", ""},
	{"${.PVC.annotations.dir}", "team", "data", "", "/etc"},
	{"${.PVC.labels.dir}", "team", "data", "", ""},
}

// FuzzConfinement provisions and deletes a volume with a fuzzed path pattern
// and claim metadata next to symlinks planted in the base and another claim's
// volume, and fails if anything outside the base, or the other volume,
// changed, if a volume directory resolves outside the base, or if anything
// but the other volume is left on record.
func FuzzConfinement(f *testing.F, b FuzzBackend) {
	for _, seed := range confinementSeeds {
		for i := range policies {
			f.Add(seed[0], seed[1], seed[2], seed[3], seed[4], uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, pattern, namespace, name, label, annotation string, policy uint8) {
		tmp, root, base := plantConfinementTree(t)
		var listed []*corev1.PersistentVolume
		opts := FuzzOptions{
			ProvisionerNames: []string{"provfleet.io/fuzz"},
			Volumes:          backend.NewListedVolumes(func() ([]*corev1.PersistentVolume, error) { return listed, nil }),
			Now:              func() time.Time { return time.Unix(1e9, 0) },
		}
		p, err := b.New(t, root, base, policies[int(policy)%len(policies)], opts)
		if err != nil {
			t.Fatal(err)
		}
		victimClaim := Claim("victim", "victim", "1Gi")
		victim, _, err := p.Provision(t.Context(), Options(victimClaim, Class(map[string]string{"pathPattern": "pvc-victim"})))
		if err != nil {
			t.Fatalf("victim volume: %v", err)
		}
		listed = append(listed, victim)
		victimDir := b.LocalPath(victim, base)
		WriteFile(t, filepath.Join(victimDir, "data"), "the victim's data")
		beforeOutside := Snapshot(t, tmp, base)
		beforeVictim := Snapshot(t, victimDir, "")

		claim := Claim("team", "data", "1Gi")
		claim.Namespace, claim.Name = namespace, name
		claim.Labels = map[string]string{"dir": label}
		claim.Annotations = map[string]string{"dir": annotation}
		pv, _, err := p.Provision(t.Context(), Options(claim, Class(map[string]string{"pathPattern": pattern})))
		if err == nil {
			checkInside(t, b.LocalPath(pv, base), base)
			if err := p.Delete(t.Context(), pv); err != nil {
				t.Errorf("Delete of a volume just provisioned: %v", err)
			}
		}
		if diff := cmp.Diff([]string{victim.Name}, UnsavedNames(t, p)); diff != "" {
			t.Errorf("pattern %q: on record after Delete or a refused Provision (-want +got):\n%s", pattern, diff)
		}
		if diff := cmp.Diff(beforeOutside, Snapshot(t, tmp, base)); diff != "" {
			t.Fatalf("pattern %q changed files outside the base (-before +after):\n%s", pattern, diff)
		}
		if diff := cmp.Diff(beforeVictim, Snapshot(t, victimDir, "")); diff != "" {
			t.Fatalf("pattern %q changed another volume (-before +after):\n%s", pattern, diff)
		}
	})
}

// checkInside fails unless dir is a directory that resolves below base.
func checkInside(t *testing.T, dir, base string) {
	t.Helper()
	resolvedBase, err := filepath.EvalSymlinks(base)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatalf("volume directory %q: %v", dir, err)
	}
	if !strings.HasPrefix(resolved, resolvedBase+string(filepath.Separator)) {
		t.Fatalf("volume directory %q resolves to %q, outside %q", dir, resolved, resolvedBase)
	}
}

// plantConfinementTree makes the tree FuzzConfinement runs in: files outside
// the root and inside the root outside the base, and symlinks in the base
// that lead out of it. It returns the temporary folder, the root and the base.
func plantConfinementTree(t *testing.T) (tmp, root, base string) {
	t.Helper()
	tmp = t.TempDir()
	root = filepath.Join(tmp, "root")
	base = filepath.Join(root, "vols")
	outside := filepath.Join(tmp, "outside")
	WriteFile(t, filepath.Join(outside, "keep"), "outside the root")
	WriteFile(t, filepath.Join(root, "other", "keep"), "inside the root, outside the base")
	if err := os.MkdirAll(filepath.Join(base, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	Symlink(t, outside, filepath.Join(base, "out"))
	Symlink(t, "../other", filepath.Join(base, "up"))
	Symlink(t, outside, filepath.Join(base, "real", "out"))
	return tmp, root, base
}
