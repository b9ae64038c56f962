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
	"context"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
)

// reach is one way the backend reaches an export: it fills in cfg (whose
// Path is set) and returns the host folder that holds the export.
type reach func(t *testing.T, cfg *Config) (dir string)

// reaches are the two ways: a mount in the manager's pod, and NFSv3 spoken
// to a server on loopback.
var reaches = map[string]reach{
	"mounted": func(t *testing.T, cfg *Config) string {
		t.Helper()
		cfg.Server = "nfs.example.com"
		cfg.MountPath = t.TempDir()
		return cfg.MountPath
	},
	"over NFS": func(t *testing.T, cfg *Config) string {
		t.Helper()
		dir := t.TempDir()
		server, err := nfsserver.Start(t.Context(), nfsserver.Options{Dir: dir, Path: path.Clean(cfg.Path)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := server.Stop(); err != nil {
				t.Error(err)
			}
		})
		cfg.Server, cfg.Port = "127.0.0.1", server.Port()
		return dir
	},
}

// lacks are what the reaches lack of what a backend could do.
var lacks = map[string][]backendtest.Capability{
	// go-nfs masks every mode it sets with 0777.
	"over NFS": {backendtest.SpecialModeBits},
}

// newProvisioner makes the Provisioner of cfg reaching its export by r,
// closed when the test ends, and returns the export's host folder.
func newProvisioner(t *testing.T, r reach, cfg Config, opts Options) (*Provisioner, string) {
	t.Helper()
	dir := r(t, &cfg)
	p, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, dir
}

// portOptions are the mount options the Provisioner of cfg adds.
func portOptions(cfg Config) []string {
	if cfg.Port == 0 {
		return nil
	}
	return []string{"port=" + strconv.Itoa(cfg.Port), "mountport=" + strconv.Itoa(cfg.Port)}
}

func TestNew(t *testing.T) {
	tests := map[string]struct {
		mutate  func(mount string, c *Config)
		want    error
		wantErr string
	}{
		"valid":              {},
		"no server":          {mutate: func(m string, c *Config) { c.Server = "" }, want: backend.ErrInvalidSpec, wantErr: "server"},
		"server with a path": {mutate: func(m string, c *Config) { c.Server = "nfs/x" }, want: backend.ErrInvalidSpec, wantErr: "server"},
		"server with space":  {mutate: func(m string, c *Config) { c.Server = "nfs x" }, want: backend.ErrInvalidSpec, wantErr: "server"},
		"relative export":    {mutate: func(m string, c *Config) { c.Path = "export" }, want: backend.ErrInvalidSpec, wantErr: "export path"},
		"relative mount":     {mutate: func(m string, c *Config) { c.MountPath = "mnt" }, want: backend.ErrInvalidSpec, wantErr: "mountPath"},
		"missing mount": {
			mutate: func(m string, c *Config) { c.MountPath = filepath.Join(m, "missing") },
			want:   backend.ErrUnavailable, wantErr: "no such file",
		},
		"bad onDelete":        {mutate: func(m string, c *Config) { c.OnDelete = "Keep" }, want: backend.ErrInvalidSpec, wantErr: "Keep"},
		"server with a comma": {mutate: func(m string, c *Config) { c.Server = "nfs,port=1" }, want: backend.ErrInvalidSpec, wantErr: "server"},
		"port beyond 65535":   {mutate: func(m string, c *Config) { c.Port = 65536 }, want: backend.ErrInvalidSpec, wantErr: "port 65536"},
		"mountOptions naming another port": {
			mutate: func(m string, c *Config) { c.Port, c.MountOptions = 2050, []string{"nfsvers=3,port=2049"} },
			want:   backend.ErrInvalidSpec, wantErr: "mountOptions: port=2049 is not the backend's port 2050",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			mount := t.TempDir()
			cfg := Config{Server: "nfs.example.com", Path: "/export", MountPath: mount}
			if tc.mutate != nil {
				tc.mutate(mount, &cfg)
			}
			_, err := New(cfg, Options{})
			backendtest.CheckNewError(t, err, tc.want, tc.wantErr)
		})
	}
}

// Speaking NFS, New reaches nothing: a hung server does not hold up the
// fleet's workers that build backends, and the probes report it.
func TestNewWaitsForNoServer(t *testing.T) {
	silent, err := nfsserver.StartSilent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := silent.Stop(); err != nil {
			t.Error(err)
		}
	})
	p, err := New(Config{Server: silent.Host(), Port: silent.Port(), Path: "/export"}, Options{})
	if err != nil {
		t.Fatalf("New with a server that never answers: %v", err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = p.Probe(ctx)
	if want := "NFS server " + backend.NFSServer(silent.Host(), silent.Port()) + ", export /export: "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Probe of a server that never answers: %v, want an error starting with %q", err, want)
	}
}

func TestWithPorts(t *testing.T) {
	tests := map[string]struct {
		options []string
		port    int
		want    []string
		wantErr string
	}{
		"no port":           {options: []string{"nfsvers=3"}, want: []string{"nfsvers=3"}},
		"added":             {options: []string{"nfsvers=3"}, port: 2050, want: []string{"nfsvers=3", "port=2050", "mountport=2050"}},
		"named already":     {options: []string{"nfsvers=3,port=2050"}, port: 2050, want: []string{"nfsvers=3,port=2050", "mountport=2050"}},
		"another port":      {options: []string{"port=2049"}, port: 2050, wantErr: "port=2049 is not the backend's port 2050"},
		"another mount":     {options: []string{"mountport=20048"}, port: 2050, wantErr: "mountport=20048 is not the backend's port 2050"},
		"not a port":        {options: []string{"port=x"}, port: 2050, wantErr: "port=x is not a port"},
		"no options":        {port: 2050, want: []string{"port=2050", "mountport=2050"}},
		"no options at all": {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := withPorts(tc.options, tc.port)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("withPorts(%q, %d) (-want +got):\n%s", tc.options, tc.port, diff)
			}
		})
	}
}

// A class's mount options replace the backend's, and must not send nodes
// to another port of the server than the one provisioned on.
func TestProvisionRefusesAClassOfAnotherPort(t *testing.T) {
	p, dir := newProvisioner(t, reaches["over NFS"], Config{Path: "/export"}, Options{})
	class := backendtest.Class(nil)
	class.MountOptions = []string{"nfsvers=3", "port=2049"}
	_, _, err := p.Provision(t.Context(), backendtest.Options(backendtest.Claim("team", "data", "1Gi"), class))
	if want := "StorageClass standard: mountOptions: port=2049 is not the backend's port"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Provision() error = %v, want one containing %q", err, want)
	}
	if diff := cmp.Diff([]string(nil), backendtest.Tree(t, dir)); diff != "" {
		t.Errorf("left on the export (-want +got):\n%s", diff)
	}
}

func TestProvision(t *testing.T) {
	filesystem := corev1.PersistentVolumeFilesystem
	tests := map[string]struct {
		configOptions []string
		classOptions  []string
		pattern       string
		onDelete      string
		nodePath      string
		affinityKey   string
		wantOptions   []string
		wantAnn       map[string]string
		wantPath      string
		wantDir       string
		wantErr       string
	}{
		"export mount options": {
			configOptions: []string{"nfsvers=4.1"}, wantOptions: []string{"nfsvers=4.1"},
			wantPath: "/export/pvc-team-data", wantDir: "pvc-team-data",
		},
		"class mount options win": {
			configOptions: []string{"nfsvers=4.1"}, classOptions: []string{"nfsvers=3", "hard"}, wantOptions: []string{"nfsvers=3", "hard"},
			wantPath: "/export/pvc-team-data", wantDir: "pvc-team-data",
		},
		"subfolders": {
			pattern:  "{{.PVC.Namespace}}/{{.PVC.Name}}",
			wantPath: "/export/team/data", wantDir: "team/data",
		},
		"hostile pattern": {pattern: "/{{.PVC.Name}}", wantErr: "absolute"},
		"nfs-subdir pattern archives": {
			pattern: "${.PVC.namespace}/${.PVC.name}", wantAnn: map[string]string{backend.AnnOnDelete: "Archive"},
			wantPath: "/export/team/data", wantDir: "team/data",
		},
		"nfs-subdir onDelete names by default as it does": {
			onDelete: "delete", wantAnn: map[string]string{backend.AnnOnDelete: "Delete"},
			wantPath: "/export/team-data-pvc-team-data", wantDir: "team-data-pvc-team-data",
		},
		"patterns mixed":      {pattern: "${.PVC.namespace}/{{.PVC.Name}}", wantErr: "mixes ${...} keys"},
		"local-path nodePath": {nodePath: "/export", wantErr: "nodePath is local-path-provisioner's, for volumes on a node"},
		"local-path nodeAffinityKey": {
			affinityKey: "topology.example.com/rack", wantErr: "nodeAffinityKey is local-path-provisioner's, for volumes on a node",
		},
	}
	for name, tc := range tests {
		for reachName, r := range reaches {
			t.Run(name+"/"+reachName, func(t *testing.T) {
				cfg := Config{Path: "/export/", MountOptions: tc.configOptions}
				p, dir := newProvisioner(t, r, cfg, Options{})
				cfg.Server, cfg.Port = p.server, p.port
				class := backendtest.Class(map[string]string{})
				if tc.pattern != "" {
					class.Parameters["pathPattern"] = tc.pattern
				}
				if tc.onDelete != "" {
					class.Parameters["onDelete"] = tc.onDelete
				}
				if tc.nodePath != "" {
					class.Parameters["nodePath"] = tc.nodePath
				}
				if tc.affinityKey != "" {
					class.Parameters["nodeAffinityKey"] = tc.affinityKey
				}
				class.MountOptions = tc.classOptions
				pv, _, err := p.Provision(t.Context(), backendtest.Options(backendtest.Claim("team", "data", "5Gi"), class))
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("Provision() error = %v, want %q", err, tc.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("Provision: %v", err)
				}
				want := &corev1.PersistentVolume{
					ObjectMeta: metav1.ObjectMeta{Name: "pvc-team-data", Annotations: tc.wantAnn},
					Spec: corev1.PersistentVolumeSpec{
						Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
						AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
						StorageClassName:              "standard",
						VolumeMode:                    &filesystem,
						MountOptions:                  append(slices.Clone(tc.wantOptions), portOptions(cfg)...),
						PersistentVolumeSource: corev1.PersistentVolumeSource{
							NFS: &corev1.NFSVolumeSource{Server: cfg.Server, Path: tc.wantPath},
						},
					},
				}
				if diff := cmp.Diff(want, pv); diff != "" {
					t.Errorf("Provision() mismatch (-want +got):\n%s", diff)
				}
				if info, err := os.Stat(filepath.Join(dir, tc.wantDir)); err != nil || !info.IsDir() {
					t.Errorf("subdirectory missing: %v", err)
				}
			})
		}
	}
}

func TestDelete(t *testing.T) {
	tests := map[string]struct {
		onDelete backend.OnDeletePolicy
		mutate   func(pv *corev1.PersistentVolume)
		wantErr  string
		wantLeft []string
	}{
		"delete removes subfolders": {onDelete: backend.OnDeleteDelete},
		"archive with subfolders":   {onDelete: backend.OnDeleteArchive, wantLeft: []string{"team/", "team/x/", "team/x/archived-data-20010909T014640Z/"}},
		"retain":                    {onDelete: backend.OnDeleteRetain, wantLeft: []string{"team/", "team/x/", "team/x/data/"}},
		"another server": {
			mutate:  func(pv *corev1.PersistentVolume) { pv.Spec.NFS.Server = "other.example.com" },
			wantErr: `on server "other.example.com`, wantLeft: []string{"team/", "team/x/", "team/x/.data.provfleet-volume", "team/x/data/"},
		},
		"another port": {
			mutate:  func(pv *corev1.PersistentVolume) { pv.Spec.MountOptions = []string{"nfsvers=3,port=1"} },
			wantErr: `,port=1", not`, wantLeft: []string{"team/", "team/x/", "team/x/.data.provfleet-volume", "team/x/data/"},
		},
		"another export": {
			mutate:  func(pv *corev1.PersistentVolume) { pv.Spec.NFS.Path = "/other/team/x/data" },
			wantErr: "not below", wantLeft: []string{"team/", "team/x/", "team/x/.data.provfleet-volume", "team/x/data/"},
		},
		"not nfs": {
			mutate:  func(pv *corev1.PersistentVolume) { pv.Spec.NFS = nil },
			wantErr: "not an nfs volume", wantLeft: []string{"team/", "team/x/", "team/x/.data.provfleet-volume", "team/x/data/"},
		},
	}
	for name, tc := range tests {
		for reachName, r := range reaches {
			t.Run(name+"/"+reachName, func(t *testing.T) {
				p, dir := newProvisioner(t, r, Config{
					Path: "/export", OnDelete: tc.onDelete, PathPattern: "{{.PVC.Namespace}}/x/{{.PVC.Name}}",
				}, Options{Now: archiveTime})
				pv, _, err := p.Provision(t.Context(), backendtest.Options(backendtest.Claim("team", "data", "1Gi"), nil))
				if err != nil {
					t.Fatal(err)
				}
				if tc.mutate != nil {
					tc.mutate(pv)
				}
				err = p.Delete(t.Context(), pv)
				if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
					t.Fatalf("Delete() error = %v, want %q", err, tc.wantErr)
				}
				// Records are checked below, by what they name.
				records := dirvol.JournalDir + "/"
				left := slices.DeleteFunc(backendtest.Tree(t, dir), func(p string) bool { return p != records && strings.HasPrefix(p, records) })
				if diff := cmp.Diff(append([]string{records}, tc.wantLeft...), left); diff != "" {
					t.Errorf("left on the export (-want +got):\n%s", diff)
				}
				// A refused Delete keeps the record, so the volume is not forgotten.
				var wantUnsaved []string
				if err != nil {
					wantUnsaved = []string{pv.Name}
				}
				if diff := cmp.Diff(wantUnsaved, backendtest.UnsavedNames(t, p)); diff != "" {
					t.Errorf("on record after Delete (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestReclaim(t *testing.T) {
	tests := map[string]struct {
		pattern string
		end     backendtest.ReclaimEnd
	}{
		"deleted":            {},
		"saved":              {end: backendtest.ReclaimSaved},
		"subfolders deleted": {pattern: "{{.PVC.Namespace}}/x/{{.PVC.Name}}"},
		"subfolders saved":   {pattern: "{{.PVC.Namespace}}/x/{{.PVC.Name}}", end: backendtest.ReclaimSaved},
	}
	for name, tc := range tests {
		for reachName, r := range reaches {
			t.Run(name+"/"+reachName, func(t *testing.T) {
				p, dir := newProvisioner(t, r, Config{Path: "/export", PathPattern: tc.pattern}, Options{})
				opts := backendtest.Options(backendtest.Claim("team", "data", "1Gi"), backendtest.Class(nil))
				localPath := func(pv *corev1.PersistentVolume) string {
					return filepath.Join(dir, strings.TrimPrefix(pv.Spec.NFS.Path, "/export/"))
				}
				backendtest.CheckReclaim(t, p, opts, localPath, tc.end)
			})
		}
	}
}

// Saved compares a record with its saved PersistentVolume by the export
// subdirectory each names. What it cannot tell apart (one inside the other,
// a server written otherwise, which may be the same server or another one,
// a saved volume that is not this backend's) it keeps, its record dropped.
func TestSavedComparesDirectories(t *testing.T) {
	for reachName, r := range reaches {
		t.Run(reachName, func(t *testing.T) {
			backendtest.CheckSaved(t, map[string]backendtest.SavedCase{
				"the same source": {Mutate: func(*corev1.PersistentVolume) {}},
				"the same path, written otherwise": {Mutate: func(pv *corev1.PersistentVolume) {
					pv.Spec.NFS.Path = "/export//team/x/./data/"
				}},
				"another directory": {
					Mutate:  func(pv *corev1.PersistentVolume) { pv.Spec.NFS.Path = "/export/team/x/other" },
					Removed: true,
				},
				"a directory around it":      {Mutate: func(pv *corev1.PersistentVolume) { pv.Spec.NFS.Path = "/export/team/x" }},
				"the server by another name": {Mutate: func(pv *corev1.PersistentVolume) { pv.Spec.NFS.Server = "192.0.2.10" }},
				"the server by another name, the directory holding files": {
					Mutate: func(pv *corev1.PersistentVolume) { pv.Spec.NFS.Server = "192.0.2.10" },
					Files:  true,
				},
				"another port":   {Mutate: func(pv *corev1.PersistentVolume) { pv.Spec.MountOptions = []string{"port=1"} }},
				"another export": {Mutate: func(pv *corev1.PersistentVolume) { pv.Spec.NFS.Path = "/other/pvc-team-data" }},
				"not nfs":        {Mutate: func(pv *corev1.PersistentVolume) { pv.Spec.NFS = nil }},
			}, func(t *testing.T) (backendtest.Fixture, error) {
				t.Helper()
				p, dir := newProvisioner(t, r, Config{Path: "/export", PathPattern: "{{.PVC.Namespace}}/x/{{.PVC.Name}}"}, Options{})
				localPath := func(pv *corev1.PersistentVolume) string {
					return filepath.Join(dir, strings.TrimPrefix(pv.Spec.NFS.Path, "/export/"))
				}
				return backendtest.Fixture{Backend: p, LocalPath: localPath}, nil
			})
		})
	}
}

func archiveTime() time.Time { return time.Unix(1e9, 0) }

func TestDeleteUnmarked(t *testing.T) {
	for reachName, r := range reaches {
		t.Run(reachName, func(t *testing.T) {
			backendtest.CheckDeleteUnmarked(t, map[string]string{backend.AnnDeleteUnmarked: "true"}, func(t *testing.T) (backendtest.UnmarkedVolume, error) {
				t.Helper()
				cfg := Config{Path: "/export"}
				p, dir := newProvisioner(t, r, cfg, Options{})
				return backendtest.UnmarkedVolume{
					Backend:      p,
					Dir:          filepath.Join(dir, "made-by-hand"),
					Source:       corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: p.server, Path: "/export/made-by-hand"}},
					MountOptions: portOptions(Config{Port: p.port}),
				}, nil
			})
		})
	}
}

func TestProvisionDirectory(t *testing.T) {
	for reachName, r := range reaches {
		t.Run(reachName, func(t *testing.T) {
			backendtest.CheckDirectory(t, func(t *testing.T, dir backend.Directory, parameters map[string]string) (string, error) {
				t.Helper()
				p, export := newProvisioner(t, r, Config{Path: "/export", Directory: dir}, Options{})
				pv, _, err := p.Provision(t.Context(), backendtest.Options(backendtest.Claim("team", "data", "1Gi"), backendtest.Class(parameters)))
				if err != nil {
					return "", err
				}
				return filepath.Join(export, strings.TrimPrefix(pv.Spec.NFS.Path, "/export/")), nil
			}, lacks[reachName]...)
		})
	}
}
