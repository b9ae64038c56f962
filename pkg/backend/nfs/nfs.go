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
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/backend/internal/nfsclient"
	"github.com/provfleet/provfleet/pkg/backend/internal/nfsfs"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// Config is backend.nfs of a ProvisionerConfig.
type Config struct {
	// Server is the NFS server's host name or address.
	Server string
	// Path is the exported path on the server.
	Path string
	// Port, when set, is the one port serving MOUNT and NFS; 0 asks the
	// server's portmapper. PersistentVolumes get it as the mount options
	// port and mountport.
	Port int
	// MountPath, when set, is where the manager's pod mounts Server:Path,
	// and nothing outside it is ever touched. Empty, the Provisioner speaks
	// NFSv3 to Server:Path itself.
	MountPath string
	// PathPattern is the subdirectory of a volume; empty means the PV name. A
	// StorageClass parameter pathPattern overrides it.
	PathPattern string
	// OnDelete is Delete (the default), Retain or Archive.
	OnDelete backend.OnDeletePolicy
	// MountOptions are used when the StorageClass has none.
	MountOptions []string
	Capacity     backend.Capacity
	// Directory is the mode and owner of a new volume directory: mode 0777
	// and the manager's own user when not set. StorageClass parameters mode,
	// uid and gid override it field by field.
	Directory backend.Directory
	// AdoptRetainedDirectories gives a claim made again the directory its
	// earlier volume retained, when that volume proves it (dirvol.Config.Adopt).
	AdoptRetainedDirectories bool
	// NFSSubdir, when set, is the nfs-subdir-external-provisioner this
	// backend took over: the claims of its StorageClasses are served, and
	// its volumes released, as it would (see backend.NFSSubdir).
	NFSSubdir *backend.NFSSubdir
}

// Options are what the provisioner needs from the process that runs it, as
// opposed to what the ProvisionerConfig says: the names whose volumes count
// towards Capacity, the cluster's PersistentVolumes (usually a
// backend.PathIndex, so that capacity and subdirectory collisions survive
// restarts) and the clock that stamps archived subdirectories. The directory store
// both backends share reads them.
type Options = dirvol.Options

// Provisioner provisions NFS subdirectory volumes. It implements
// provisioning.Provisioner, provisioning.Reclaimer and provisioning.Prober
// and is safe for concurrent use.
type Provisioner struct {
	server string
	port   int
	path   string
	// serverName is server and port as backend.NFSServer names them.
	serverName   string
	mountOptions []string
	store        *dirvol.Store
	// client is the connection to Server:Path, nil with a MountPath.
	client *nfsclient.Client
	// subdir is Config.NFSSubdir, nil when there is none.
	subdir *backend.NFSSubdir
	// cloner copies the clones, through client when there is no mount.
	cloner *dirvol.Cloner
}

var (
	_ provisioning.Provisioner    = (*Provisioner)(nil)
	_ provisioning.Reclaimer      = (*Provisioner)(nil)
	_ provisioning.Prober         = (*Provisioner)(nil)
	_ provisioning.BudgetReporter = (*Provisioner)(nil)
	_ provisioning.VolumeRecorder = (*Provisioner)(nil)
	_ provisioning.Expander       = (*Provisioner)(nil)

	_ provisioning.DataSourceProvisioner = (*Provisioner)(nil)
)

// New checks cfg and returns its Provisioner. Errors wrap
// backend.ErrInvalidSpec or backend.ErrUnavailable. Without a MountPath it
// does not wait for the server: calls fail while the server is down and
// succeed once it is back. Close releases the connection.
func New(cfg Config, opts Options) (*Provisioner, error) {
	if err := check(cfg); err != nil {
		return nil, err
	}
	mountOptions, err := withPorts(cfg.MountOptions, cfg.Port)
	if err != nil {
		return nil, fmt.Errorf("%w: mountOptions: %w", backend.ErrInvalidSpec, err)
	}
	p := &Provisioner{
		server:       cfg.Server,
		port:         cfg.Port,
		path:         path.Clean(cfg.Path),
		serverName:   backend.NFSServer(cfg.Server, cfg.Port),
		mountOptions: mountOptions,
		subdir:       cfg.NFSSubdir,
		cloner:       dirvol.NewCloner(),
	}
	var fsys dirvol.Filesystem = dirvol.LocalFS{}
	root := cfg.MountPath
	if cfg.MountPath == "" {
		p.client = nfsclient.New(nfsclient.Options{Server: cfg.Server, Path: p.path, Port: cfg.Port})
		fsys, root = nfsfs.New(p.client, p.path), p.path
	}
	p.store, err = dirvol.New(dirvol.Config{
		FS:        fsys,
		Root:      root,
		Base:      ".",
		Pattern:   cfg.PathPattern,
		Directory: cfg.Directory,
		OnDelete:  cfg.OnDelete,
		Capacity:  cfg.Capacity,
		Options:   opts,
		Adopt:     cfg.AdoptRetainedDirectories,
		VolumeDir: p.volumeDir,
		Locate:    p.locate,
	})
	if err != nil {
		p.Close()
		return nil, err
	}
	if p.client != nil {
		// The controller's probes report the server: the fleet's workers,
		// which build every backend, never wait for one.
		return p, nil
	}
	if _, err := p.store.Probe(context.Background()); err != nil {
		return nil, err
	}
	return p, nil
}

// check refuses what no server or mount can serve.
func check(cfg Config) error {
	switch {
	case cfg.Server == "" || strings.ContainsFunc(cfg.Server, func(r rune) bool { return r == '/' || r == ',' || !unicode.IsGraphic(r) || unicode.IsSpace(r) }):
		return fmt.Errorf("%w: server %q is not a host name or address", backend.ErrInvalidSpec, cfg.Server)
	case !path.IsAbs(cfg.Path):
		return fmt.Errorf("%w: export path %q is not absolute", backend.ErrInvalidSpec, cfg.Path)
	case cfg.Port < 0 || cfg.Port > 65535:
		return fmt.Errorf("%w: port %d is not a TCP port", backend.ErrInvalidSpec, cfg.Port)
	case cfg.MountPath != "" && !filepath.IsAbs(cfg.MountPath):
		return fmt.Errorf("%w: mountPath %q is not absolute", backend.ErrInvalidSpec, cfg.MountPath)
	}
	return nil
}

// Budget returns the capacity budget and what this provisioner's volumes use
// of it.
func (p *Provisioner) Budget() (provisioning.Budget, error) {
	return p.store.Budget()
}

// Probe reaches the export and reports its space. Speaking NFS, its
// errors name the server, as a waiting call's own may not.
func (p *Provisioner) Probe(ctx context.Context) (provisioning.Space, error) {
	space, err := p.store.Probe(ctx)
	if err != nil && p.client != nil {
		return space, fmt.Errorf("NFS server %s, export %s: %w", p.serverName, p.path, err)
	}
	return space, err
}

// Close stops the copies under way (dirvol.Cloner.Close) and releases the
// connection to the server; the Provisioner must not be used after it.
func (p *Provisioner) Close() {
	p.cloner.Close()
	if p.client != nil {
		p.client.Close()
	}
}

// SupportsDataSource answers for claims to clone: a claim's volume on this
// export is copied into the new one.
func (p *Provisioner) SupportsDataSource(_ context.Context, kind schema.GroupKind) bool {
	return kind == schema.GroupKind{Kind: "PersistentVolumeClaim"}
}

// Provision creates the claim's subdirectory, empty or, for a claim with a
// data source, a copy of its source's volume made in the background, and
// returns its PersistentVolume.
func (p *Provisioner) Provision(ctx context.Context, opts provisioning.ProvisionOptions) (*corev1.PersistentVolume, provisioning.ProvisioningState, error) {
	req, err := p.parseRequest(opts)
	if err != nil {
		return nil, provisioning.ProvisioningFinished, err
	}
	mountOptions := slices.Clone(p.mountOptions)
	if opts.StorageClass != nil && len(opts.StorageClass.MountOptions) > 0 {
		if mountOptions, err = withPorts(opts.StorageClass.MountOptions, p.port); err != nil {
			return nil, provisioning.ProvisioningFinished, fmt.Errorf("StorageClass %s: mountOptions: %w", opts.StorageClass.Name, err)
		}
	}
	vol, state, err := p.volume(ctx, opts, req)
	if err != nil || state != provisioning.ProvisioningFinished || vol == nil {
		return nil, state, err
	}
	if p.ofSubdir(opts) {
		// Decided by the directory, now known, and recorded on the volume.
		if req.OnDelete, err = p.subdir.OnDelete(opts.StorageClass.Parameters, vol.Dir); err != nil {
			return nil, provisioning.ProvisioningFinished, fmt.Errorf("StorageClass %s: %w", opts.StorageClass.Name, err)
		}
	}
	pv := dirvol.NewPV(opts, req, p.source(vol.Dir))
	pv.Spec.MountOptions = mountOptions
	if err := dirvol.RecordAdoption(ctx, opts, pv, *vol); err != nil {
		return nil, provisioning.ProvisioningFinished, err
	}
	return pv, provisioning.ProvisioningFinished, nil
}

// volume makes the claim's subdirectory: an empty one, a copy of the
// source claim's volume, which must be a volume of this export, or none
// for a claim that abandoned its clone.
func (p *Provisioner) volume(ctx context.Context, opts provisioning.ProvisionOptions, req dirvol.Request) (*dirvol.Volume, provisioning.ProvisioningState, error) {
	switch {
	case opts.Abandoned:
		return nil, provisioning.ProvisioningFinished, p.cloner.Abandon(ctx, p.store, req)
	case opts.DataSource != nil:
		return p.cloner.Clone(ctx, p.store, opts, req, p.volumeDir)
	}
	vol, err := p.store.Create(ctx, req)
	if err != nil {
		return nil, provisioning.ProvisioningFinished, err
	}
	return &vol, provisioning.ProvisioningFinished, nil
}

// parseRequest reads a claim of a StorageClass of the
// nfs-subdir-external-provisioner this backend took over as that provisioner
// reads it, and any other as this project does.
func (p *Provisioner) parseRequest(opts provisioning.ProvisionOptions) (dirvol.Request, error) {
	if p.ofSubdir(opts) {
		return dirvol.ParseNFSSubdirRequest(opts, *p.subdir)
	}
	req, err := dirvol.ParseRequest(opts)
	if err != nil {
		return dirvol.Request{}, err
	}
	return req, req.CheckNoNodePath()
}

// ofSubdir reports whether the claim's StorageClass is one of the
// nfs-subdir-external-provisioner this backend took over.
func (p *Provisioner) ofSubdir(opts provisioning.ProvisionOptions) bool {
	return p.subdir != nil && opts.StorageClass != nil && opts.StorageClass.Provisioner == p.subdir.ProvisionerName
}

// errFateNotRecorded refuses to release the directory of a volume of
// nfs-subdir-external-provisioner whose fate Record could not decide.
var errFateNotRecorded = fmt.Errorf("the fate of its directory is not recorded (annotation %s): "+
	"it is decided once from its StorageClass, as nfs-subdir-external-provisioner decides it, and could not be "+
	"(the class is missing, or its archiveOnDelete is no boolean: %w); set the annotation to Delete, Retain or "+
	"ArchiveAsNFSSubdir to decide it, and the directory is kept until then", backend.AnnOnDelete, backend.ErrFateUndecided)

// Delete applies the onDelete policy to the subdirectory the PersistentVolume
// names, which must be on this server below this export. A volume of the
// nfs-subdir-external-provisioner this backend took over goes by the fate
// Record wrote on it, and is kept while there is none.
func (p *Provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	if p.subdir != nil && p.subdir.Owns(pv) {
		if _, recorded := pv.Annotations[backend.AnnOnDelete]; !recorded {
			return p.store.DeleteUndecided(ctx, pv, errFateNotRecorded)
		}
	}
	return p.store.Delete(ctx, pv)
}

// Expand counts a volume of this export at size in the capacity budget,
// when it fits; the subdirectory needs nothing, since nothing on the server
// limits its size.
func (p *Provisioner) Expand(_ context.Context, pv *corev1.PersistentVolume, _ *corev1.PersistentVolumeClaim, size resource.Quantity) (resource.Quantity, error) {
	if _, err := p.volumeDir(pv); err != nil {
		return resource.Quantity{}, fmt.Errorf("cannot expand volume %s: %w", pv.Name, err)
	}
	if err := p.store.Expand(pv, size); err != nil {
		return resource.Quantity{}, err
	}
	return size, nil
}

// Record returns, for a volume of the nfs-subdir-external-provisioner this
// backend took over that has no fate recorded yet, the fate its directory
// gets, decided from its class as that provisioner decides it at delete time
// (backend.NFSSubdir.VolumeOnDelete), and leave to release the directory,
// which carries no owner marker. Where that provisioner could not decide
// either, it records nothing and says why.
func (p *Provisioner) Record(_ context.Context, pv *corev1.PersistentVolume, class *storagev1.StorageClass) (map[string]string, error) {
	if p.subdir == nil || !p.subdir.Owns(pv) {
		return nil, nil
	}
	if _, recorded := pv.Annotations[backend.AnnOnDelete]; recorded {
		return nil, nil
	}
	dir, err := p.volumeDir(pv)
	if err != nil {
		return nil, fmt.Errorf("cannot decide the fate of volume %s: %w", pv.Name, err)
	}
	record, err := p.subdir.VolumeRecord(pv, class, dir)
	if err != nil {
		return nil, fmt.Errorf("cannot decide the fate of the directory %q: %w", dir, err)
	}
	return record, nil
}

// Unsaved lists the subdirectories made for PersistentVolumes this
// provisioner was not told exist, each with the source Provision gave it.
func (p *Provisioner) Unsaved(ctx context.Context) ([]provisioning.UnsavedVolume, error) {
	return p.store.Unsaved(ctx, func(dir string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: p.source(dir), MountOptions: slices.Clone(p.mountOptions)}}
	})
}

// Saved settles the record of an unsaved volume whose PersistentVolume, saved,
// exists, by the subdirectory each names. A saved volume on another server
// string keeps the record: a host name and an address of one server cannot be
// told apart from two servers, and nothing is deleted in doubt.
func (p *Provisioner) Saved(ctx context.Context, volume, saved *corev1.PersistentVolume) error {
	return p.store.Saved(ctx, volume, saved)
}

// source is the volume source of the subdirectory dir of the export.
func (p *Provisioner) source(dir string) corev1.PersistentVolumeSource {
	return corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: p.server, Path: path.Join(p.path, dir)}}
}

// locate returns where the subdirectory dir of the export is on the server.
func (p *Provisioner) locate(dir string) (string, string) {
	return p.serverName, path.Join(p.path, dir)
}

// volumeDir returns the subdirectory of the export that a PersistentVolume
// names.
func (p *Provisioner) volumeDir(pv *corev1.PersistentVolume) (string, error) {
	return exportDir(p.serverName, p.path, pv)
}

// VolumeDir returns the subdirectory of the export path of server (at port,
// 0 for none named) that pv names, as a backend of that export reads it: an
// error says why pv is not one of its volumes.
func VolumeDir(server string, port int, path string, pv *corev1.PersistentVolume) (string, error) {
	return exportDir(backend.NFSServer(server, port), path, pv)
}

// exportDir is VolumeDir for the server as backend.NFSServer names it.
func exportDir(serverName, exportPath string, pv *corev1.PersistentVolume) (string, error) {
	source := pv.Spec.NFS
	if source == nil {
		return "", errors.New("it is not an nfs volume")
	}
	if server := backend.NFSServerOf(source, pv.Spec.MountOptions); server != serverName {
		return "", fmt.Errorf("it is on server %q, not %q", server, serverName)
	}
	return dirvol.RelDir(exportPath, source.Path)
}

// withPorts returns mountOptions with port=<port> and mountport=<port>
// added when port is set and they name neither, so that nodes mount the
// server the Provisioner reaches. Options that name another port are
// refused: nodes would mount another server than the one provisioned on.
func withPorts(mountOptions []string, port int) ([]string, error) {
	options := slices.Clone(mountOptions)
	if port == 0 {
		return options, nil
	}
	for _, name := range []string{"port", "mountport"} {
		named, err := backend.MountOptionPort(options, name)
		switch {
		case err != nil:
			return nil, err
		case named == 0:
			options = append(options, name+"="+strconv.Itoa(port))
		case named != port:
			return nil, fmt.Errorf("%s=%d is not the backend's port %d", name, named, port)
		}
	}
	return options, nil
}
