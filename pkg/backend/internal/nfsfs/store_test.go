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

package nfsfs

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/backend/internal/nfsclient"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// testServer is the server name volumes of the test export name.
const testServer = "nfs.test"

// provisioner provisions volumes of a dirvol.Store: the part of a directory
// backend these tests need to drive the store as the controller does.
type provisioner struct {
	store *dirvol.Store
	base  string
}

// newProvisioner serves root and keeps volumes below its folder base, a
// slash-separated path relative to root.
func newProvisioner(t testing.TB, root, base string, onDelete backend.OnDeletePolicy, opts dirvol.Options) (*provisioner, error) {
	t.Helper()
	return newProvisionerOf(t, serve(t, root), base, onDelete, opts)
}

// newProvisionerOf keeps volumes below the folder base of the export that
// client mounted.
func newProvisionerOf(t testing.TB, client *nfsclient.Client, base string, onDelete backend.OnDeletePolicy, opts dirvol.Options) (*provisioner, error) {
	t.Helper()
	p := &provisioner{base: path.Join(exportPath, base)}
	var err error
	p.store, err = dirvol.New(dirvol.Config{
		FS:       New(client, exportPath),
		Root:     exportPath,
		Base:     base,
		OnDelete: onDelete,
		Options:  opts,
		VolumeDir: func(pv *corev1.PersistentVolume) (string, error) {
			if pv.Spec.NFS == nil || pv.Spec.NFS.Server != testServer {
				return "", errors.New("not a volume of the test server")
			}
			return dirvol.RelDir(p.base, pv.Spec.NFS.Path)
		},
		Locate: p.locate,
	})
	if err != nil {
		return nil, err
	}
	_, err = p.store.Probe(t.Context())
	return p, err
}

func (p *provisioner) locate(dir string) (string, string) {
	return testServer, path.Join(p.base, dir)
}

func (p *provisioner) source(dir string) corev1.PersistentVolumeSource {
	server, volumePath := p.locate(dir)
	return corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: server, Path: volumePath}}
}

func (p *provisioner) Provision(ctx context.Context, opts provisioning.ProvisionOptions) (*corev1.PersistentVolume, provisioning.ProvisioningState, error) {
	req, err := dirvol.ParseRequest(opts)
	if err != nil {
		return nil, provisioning.ProvisioningFinished, err
	}
	vol, err := p.store.Create(ctx, req)
	if err != nil {
		return nil, provisioning.ProvisioningFinished, err
	}
	return dirvol.NewPV(opts, req, p.source(vol.Dir)), provisioning.ProvisioningFinished, nil
}

func (p *provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	return p.store.Delete(ctx, pv)
}

func (p *provisioner) Unsaved(ctx context.Context) ([]provisioning.UnsavedVolume, error) {
	return p.store.Unsaved(ctx, func(dir string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: p.source(dir)}}
	})
}

func (p *provisioner) Saved(ctx context.Context, volume, saved *corev1.PersistentVolume) error {
	return p.store.Saved(ctx, volume, saved)
}

// hostPath returns where the directory of pv is on the host, below the
// served folder root.
func hostPath(root string, pv *corev1.PersistentVolume) string {
	return filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(pv.Spec.NFS.Path, exportPath)))
}

// storeFixture is an export holding the folder of volumes "vols", a folder
// beside it and one outside the export.
type storeFixture struct {
	tmp, root, base string
}

func newStoreFixture(t *testing.T) storeFixture {
	t.Helper()
	tmp := t.TempDir()
	f := storeFixture{tmp: tmp, root: filepath.Join(tmp, "export"), base: filepath.Join(tmp, "export", "vols")}
	if err := os.MkdirAll(f.base, 0o755); err != nil {
		t.Fatal(err)
	}
	backendtest.WriteFile(t, filepath.Join(f.root, "other", "keep"), "inside the export, outside the base")
	backendtest.WriteFile(t, filepath.Join(tmp, "outside", "data", "keep"), "outside the export")
	return f
}

var archiveTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func (f storeFixture) provisioner(t *testing.T, onDelete backend.OnDeletePolicy) *provisioner {
	t.Helper()
	return f.provisionerOf(t, serve(t, f.root), onDelete)
}

// provisionerOf provisions through client, which mounted the fixture's
// export.
func (f storeFixture) provisionerOf(t *testing.T, client *nfsclient.Client, onDelete backend.OnDeletePolicy) *provisioner {
	t.Helper()
	p, err := newProvisionerOf(t, client, "vols", onDelete, dirvol.Options{
		ProvisionerNames: []string{"provfleet.io/test"},
		Volumes:          backend.NewListedVolumes(func() ([]*corev1.PersistentVolume, error) { return nil, nil }),
		Now:              func() time.Time { return archiveTime },
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// volumes lists the base's tree but for the folder of unsaved volumes'
// records.
func (f storeFixture) volumes(t *testing.T) []string {
	t.Helper()
	return slices.DeleteFunc(backendtest.Tree(t, f.base), func(name string) bool {
		return strings.HasPrefix(name, dirvol.JournalDir+"/")
	})
}

func TestStoreLifecycle(t *testing.T) {
	tests := map[string]struct {
		onDelete   backend.OnDeletePolicy
		pattern    string
		wantTree   []string
		wantRemain []string
	}{
		"delete": {
			onDelete: backend.OnDeleteDelete, pattern: "{{.PVC.Namespace}}/{{.PVC.Name}}",
			wantTree:   []string{"team/", "team/.data.provfleet-volume", "team/data/"},
			wantRemain: []string{},
		},
		"retain": {
			onDelete: backend.OnDeleteRetain, pattern: "{{.PVC.Namespace}}/{{.PVC.Name}}",
			wantTree:   []string{"team/", "team/.data.provfleet-volume", "team/data/"},
			wantRemain: []string{"team/", "team/data/", "team/data/file"},
		},
		"archive with subfolders": {
			onDelete: backend.OnDeleteArchive, pattern: "{{.PVC.Namespace}}/x/{{.PVC.Name}}",
			wantTree:   []string{"team/", "team/x/", "team/x/.data.provfleet-volume", "team/x/data/"},
			wantRemain: []string{"team/", "team/x/", "team/x/archived-data-20260102T030405Z/", "team/x/archived-data-20260102T030405Z/file"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newStoreFixture(t)
			p := f.provisioner(t, tc.onDelete)
			before := backendtest.Snapshot(t, f.tmp, f.base)
			opts := backendtest.Options(backendtest.Claim("team", "data", "1Gi"), backendtest.Class(map[string]string{"pathPattern": tc.pattern}))
			pv, _, err := p.Provision(t.Context(), opts)
			if err != nil {
				t.Fatalf("Provision: %v", err)
			}
			if diff := cmp.Diff(tc.wantTree, f.volumes(t)); diff != "" {
				t.Errorf("tree after Provision (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{pv.Name}, backendtest.UnsavedNames(t, p)); diff != "" {
				t.Errorf("on record after Provision (-want +got):\n%s", diff)
			}
			backendtest.WriteFile(t, filepath.Join(hostPath(f.root, pv), "file"), "data")
			if err := p.Saved(t.Context(), pv, pv); err != nil {
				t.Fatalf("Saved: %v", err)
			}
			if err := p.Delete(t.Context(), pv); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if diff := cmp.Diff(tc.wantRemain, f.volumes(t)); diff != "" {
				t.Errorf("tree after Delete (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, backendtest.Snapshot(t, f.tmp, f.base)); diff != "" {
				t.Errorf("outside the base changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestStoreReclaim(t *testing.T) {
	for name, end := range map[string]backendtest.ReclaimEnd{"deleted": backendtest.ReclaimDeleted, "saved": backendtest.ReclaimSaved} {
		t.Run(name, func(t *testing.T) {
			f := newStoreFixture(t)
			opts := backendtest.Options(backendtest.Claim("team", "data", "1Gi"), backendtest.Class(nil))
			backendtest.CheckReclaim(t, f.provisioner(t, backend.OnDeleteDelete), opts, func(pv *corev1.PersistentVolume) string { return hostPath(f.root, pv) }, end)
		})
	}
}

// TestStorePlantedLinks plants links on the export leading out of the base,
// as a user of another volume could: no create, rename or removal may
// follow them.
func TestStorePlantedLinks(t *testing.T) {
	tests := map[string]struct {
		onDelete backend.OnDeletePolicy
		pattern  string
		// swap replaces the volume's parent with a link out after
		// Provision, before Delete.
		swap bool
	}{
		"create through an absolute link out":   {pattern: "out/{{.PVC.Name}}"},
		"create through a link beside the base": {pattern: "up/{{.PVC.Name}}"},
		"create over a link":                    {pattern: "out"},
		"delete through a link":                 {onDelete: backend.OnDeleteDelete, pattern: "team/{{.PVC.Name}}", swap: true},
		"archive through a link":                {onDelete: backend.OnDeleteArchive, pattern: "team/{{.PVC.Name}}", swap: true},
		"retain through a link":                 {onDelete: backend.OnDeleteRetain, pattern: "team/{{.PVC.Name}}", swap: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newStoreFixture(t)
			backendtest.Symlink(t, filepath.Join(f.tmp, "outside"), filepath.Join(f.base, "out"))
			backendtest.Symlink(t, "../other", filepath.Join(f.base, "up"))
			p := f.provisioner(t, tc.onDelete)
			before := backendtest.Snapshot(t, f.tmp, f.base)
			opts := backendtest.Options(backendtest.Claim("team", "data", "1Gi"), backendtest.Class(map[string]string{"pathPattern": tc.pattern}))
			pv, _, err := p.Provision(t.Context(), opts)
			if !tc.swap {
				if err == nil {
					t.Errorf("Provision made %s through a link", pv.Spec.NFS.Path)
				}
			} else {
				if err != nil {
					t.Fatalf("Provision: %v", err)
				}
				if err := os.RemoveAll(filepath.Join(f.base, "team")); err != nil {
					t.Fatal(err)
				}
				backendtest.Symlink(t, filepath.Join(f.tmp, "outside"), filepath.Join(f.base, "team"))
				if err := p.Delete(t.Context(), pv); err == nil {
					t.Error("Delete through a link succeeded")
				}
			}
			if diff := cmp.Diff(before, backendtest.Snapshot(t, f.tmp, f.base)); diff != "" {
				t.Errorf("outside the base changed (-before +after):\n%s", diff)
			}
			want := []string{"out", "up"}
			if tc.swap {
				want = []string{"out", "team", "up"}
			}
			if diff := cmp.Diff(want, f.volumes(t)); diff != "" {
				t.Errorf("the base (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStoreSpace: the store reports the served folder's space through
// FSSTAT, refuses a claim larger than it before making anything on the
// server, and provisions one that fits.
func TestStoreSpace(t *testing.T) {
	f := newStoreFixture(t)
	p := f.provisioner(t, backend.OnDeleteDelete)
	space, err := p.store.Probe(t.Context())
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(f.root, &st); err != nil {
		t.Fatal(err)
	}
	if want := int64(st.Blocks) * st.Bsize; space.TotalBytes != want { //nolint:gosec // block counts fit
		t.Errorf("Probe() total = %d, want %d", space.TotalBytes, want)
	}
	tests := map[string]struct {
		size     string
		wantErr  string
		wantTree []string
	}{
		"larger than the export": {
			size:     resource.NewQuantity(space.TotalBytes+1, resource.BinarySI).String(),
			wantErr:  "not enough free space",
			wantTree: []string{},
		},
		"fits": {size: "1Mi", wantTree: []string{".data.provfleet-volume", "data/"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newStoreFixture(t)
			p := f.provisioner(t, backend.OnDeleteDelete)
			_, _, err := p.Provision(t.Context(), backendtest.Options(backendtest.Claim("team", "data", tc.size), backendtest.Class(map[string]string{"pathPattern": "{{.PVC.Name}}"})))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Provision: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Provision: %v, want an error containing %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantTree, f.volumes(t)); diff != "" {
				t.Errorf("tree after Provision (-want +got):\n%s", diff)
			}
		})
	}
}
