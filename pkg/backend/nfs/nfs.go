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
	"strings"
	"unicode"

	v1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// Config is backend.nfs of a ProvisionerConfig.
type Config struct {
	// Server is the NFS server's host name or address.
	Server string
	// Path is the exported path on the server.
	Path string
	// MountPath is where the manager's pod mounts Server:Path; nothing
	// outside it is ever touched.
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
}

// Options are what the provisioner needs from the process that runs it, as
// opposed to what the ProvisionerConfig says: the names whose volumes count
// towards Capacity, the cluster's PersistentVolumes (usually a
// backend.PathIndex, so that capacity and subdirectory collisions survive
// restarts) and the clock that stamps archived subdirectories. The directory store
// both backends share reads them.
type Options = dirvol.Options

// Provisioner provisions NFS subdirectory volumes. It implements
// provisioning.Provisioner and provisioning.Reclaimer and is safe for
// concurrent use.
type Provisioner struct {
	server       string
	path         string
	mountOptions []string
	store        *dirvol.Store
}

var (
	_ provisioning.Provisioner = (*Provisioner)(nil)
	_ provisioning.Reclaimer   = (*Provisioner)(nil)
)

// New checks cfg and returns its Provisioner. Errors wrap
// backend.ErrInvalidSpec or backend.ErrUnavailable.
func New(cfg Config, opts Options) (*Provisioner, error) {
	switch {
	case cfg.Server == "" || strings.ContainsFunc(cfg.Server, func(r rune) bool { return r == '/' || !unicode.IsGraphic(r) || unicode.IsSpace(r) }):
		return nil, fmt.Errorf("%w: server %q is not a host name or address", backend.ErrInvalidSpec, cfg.Server)
	case !path.IsAbs(cfg.Path):
		return nil, fmt.Errorf("%w: export path %q is not absolute", backend.ErrInvalidSpec, cfg.Path)
	case !filepath.IsAbs(cfg.MountPath):
		return nil, fmt.Errorf("%w: mountPath %q is not absolute", backend.ErrInvalidSpec, cfg.MountPath)
	}
	p := &Provisioner{
		server:       cfg.Server,
		path:         path.Clean(cfg.Path),
		mountOptions: cfg.MountOptions,
	}
	var err error
	p.store, err = dirvol.New(dirvol.Config{
		FS:        dirvol.LocalFS{},
		Root:      cfg.MountPath,
		Base:      ".",
		Pattern:   cfg.PathPattern,
		Directory: cfg.Directory,
		OnDelete:  cfg.OnDelete,
		Capacity:  cfg.Capacity,
		Options:   opts,
		VolumeDir: p.volumeDir,
		Locate:    p.locate,
	})
	if err != nil {
		return nil, err
	}
	if _, err := p.store.Probe(context.Background()); err != nil {
		return nil, err
	}
	return p, nil
}

// Provision creates the claim's subdirectory and returns its PersistentVolume.
func (p *Provisioner) Provision(ctx context.Context, opts provisioning.ProvisionOptions) (*v1.PersistentVolume, provisioning.ProvisioningState, error) {
	req, err := dirvol.ParseRequest(opts)
	if err != nil {
		return nil, provisioning.ProvisioningFinished, err
	}
	dir, err := p.store.Create(ctx, req)
	if err != nil {
		return nil, provisioning.ProvisioningFinished, err
	}
	pv := dirvol.NewPV(opts, req, p.source(dir))
	pv.Spec.MountOptions = slices.Clone(p.mountOptions)
	if opts.StorageClass != nil && len(opts.StorageClass.MountOptions) > 0 {
		pv.Spec.MountOptions = slices.Clone(opts.StorageClass.MountOptions)
	}
	return pv, provisioning.ProvisioningFinished, nil
}

// Delete applies the onDelete policy to the subdirectory the PersistentVolume
// names, which must be on this server below this export.
func (p *Provisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	return p.store.Delete(ctx, pv)
}

// Unsaved lists the subdirectories made for PersistentVolumes this
// provisioner was not told exist, each with the source Provision gave it.
func (p *Provisioner) Unsaved(ctx context.Context) ([]provisioning.UnsavedVolume, error) {
	return p.store.Unsaved(ctx, func(dir string) *v1.PersistentVolume {
		return &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: p.source(dir)}}
	})
}

// Saved settles the record of an unsaved volume whose PersistentVolume, saved,
// exists, by the subdirectory each names. A saved volume on another server
// string keeps the record: a host name and an address of one server cannot be
// told apart from two servers, and nothing is deleted in doubt.
func (p *Provisioner) Saved(ctx context.Context, volume, saved *v1.PersistentVolume) error {
	return p.store.Saved(ctx, volume, saved)
}

// source is the volume source of the subdirectory dir of the export.
func (p *Provisioner) source(dir string) v1.PersistentVolumeSource {
	return v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: p.server, Path: path.Join(p.path, dir)}}
}

// locate returns where the subdirectory dir of the export is on the server.
func (p *Provisioner) locate(dir string) (string, string) {
	return p.server, path.Join(p.path, dir)
}

// volumeDir returns the subdirectory of the export that a PersistentVolume
// names.
func (p *Provisioner) volumeDir(pv *v1.PersistentVolume) (string, error) {
	source := pv.Spec.NFS
	switch {
	case source == nil:
		return "", errors.New("it is not an nfs volume")
	case source.Server != p.server:
		return "", fmt.Errorf("it is on server %q, not %q", source.Server, p.server)
	}
	return dirvol.RelDir(p.path, source.Path)
}

// Probe reaches the export and reports its space.
func (p *Provisioner) Probe(ctx context.Context) (provisioning.Space, error) {
	return p.store.Probe(ctx)
}
