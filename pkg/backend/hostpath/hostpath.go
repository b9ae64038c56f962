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
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// VolumeType says which PersistentVolume source a volume gets.
type VolumeType string

const (
	// VolumeTypeLocal gives local volumes with required node affinity.
	VolumeTypeLocal VolumeType = "Local"
	// VolumeTypeHostPath gives hostPath volumes.
	VolumeTypeHostPath VolumeType = "HostPath"
)

// hostnameLabel is the node label volumes are pinned with.
const hostnameLabel = v1.LabelHostname

// Config is backend.hostPath of a ProvisionerConfig plus what the node agent
// knows about the node it runs on.
type Config struct {
	// Path is the folder holding the volumes; it must resolve, symlinks
	// included, inside HostPathRoot. It is created when missing.
	Path string
	// VolumeType is Local (the default) or HostPath.
	VolumeType VolumeType
	// NodeName is the node agent's own node, whose filesystem holds Path:
	// required. Every volume is pinned to it and carries it in
	// backend.AnnNode.
	NodeName string
	// PathPattern is the directory of a volume below Path; empty means the PV
	// name. A StorageClass parameter pathPattern overrides it.
	PathPattern string
	// OnDelete is Delete (the default), Retain or Archive.
	OnDelete backend.OnDeletePolicy
	// Capacity is the budget of NodeName: the volumes of other nodes do not
	// count.
	Capacity backend.Capacity
	// Directory is the mode and owner of a new volume directory: mode 0777
	// and the node agent's own user when not set. StorageClass parameters mode,
	// uid and gid override it field by field.
	Directory backend.Directory
	// HostPathRoot is the node agent's --host-path-root: nothing outside it
	// is ever touched.
	HostPathRoot string
	// LocalPathPatterns are the patterns of local-path-provisioner's
	// StorageClasses that set a new directory's owner and mode.
	LocalPathPatterns LocalPathPatterns
}

// LocalPathPatterns says which of local-path-provisioner's class patterns
// (userPattern, groupPattern, permPattern) apply, as the lines of its setup
// script did.
type LocalPathPatterns = dirvol.LocalPathPatterns

// Options are what the provisioner needs from the process that runs it, as
// opposed to what the ProvisionerConfig says: the names whose volumes count
// towards Capacity, the cluster's PersistentVolumes (usually a
// backend.PathIndex, so that capacity and directory collisions survive
// restarts) and the clock that stamps archived directories. The directory store
// both backends share reads them.
type Options = dirvol.Options

// Provisioner provisions hostPath and local volumes. It implements
// provisioning.Provisioner, Reclaimer and Prober and is safe for concurrent
// use.
type Provisioner struct {
	path       string
	volumeType VolumeType
	node       string
	patterns   LocalPathPatterns
	store      *dirvol.Store
}

var (
	_ provisioning.Provisioner    = (*Provisioner)(nil)
	_ provisioning.Reclaimer      = (*Provisioner)(nil)
	_ provisioning.Prober         = (*Provisioner)(nil)
	_ provisioning.BudgetReporter = (*Provisioner)(nil)
)

// CheckPathPattern refuses a pathPattern that New refuses, for the manager,
// which runs no hostPath backend but reports its configuration. Errors wrap
// backend.ErrInvalidSpec.
func CheckPathPattern(pattern string) error {
	if _, err := dirvol.ParsePattern(pattern); err != nil {
		return fmt.Errorf("%w: %w", backend.ErrInvalidSpec, err)
	}
	return nil
}

// New checks cfg and returns its Provisioner. Errors wrap
// backend.ErrInvalidSpec or backend.ErrUnavailable.
func New(cfg Config, opts Options) (*Provisioner, error) {
	p := &Provisioner{
		path:       filepath.Clean(cfg.Path),
		volumeType: cfg.VolumeType,
		node:       cfg.NodeName,
		patterns:   cfg.LocalPathPatterns,
	}
	if p.volumeType == "" {
		p.volumeType = VolumeTypeLocal
	}
	switch {
	case p.volumeType != VolumeTypeLocal && p.volumeType != VolumeTypeHostPath:
		return nil, fmt.Errorf("%w: volumeType %q is not one of Local, HostPath", backend.ErrInvalidSpec, cfg.VolumeType)
	case p.node == "" || strings.Contains(p.node, "/"):
		return nil, fmt.Errorf("%w: node name %q names no node: the node agent runs with NODE_NAME", backend.ErrInvalidSpec, p.node)
	case !filepath.IsAbs(cfg.HostPathRoot):
		return nil, fmt.Errorf("%w: the host path root %q is not an absolute path", backend.ErrInvalidSpec, cfg.HostPathRoot)
	case !filepath.IsAbs(cfg.Path):
		return nil, fmt.Errorf("%w: path %q is not absolute", backend.ErrInvalidSpec, cfg.Path)
	}
	root, base, err := confine(cfg.HostPathRoot, p.path)
	if err != nil {
		return nil, err
	}
	p.store, err = dirvol.New(dirvol.Config{
		FS:        dirvol.LocalFS{},
		Root:      root,
		Base:      base,
		Pattern:   cfg.PathPattern,
		Directory: cfg.Directory,
		OnDelete:  cfg.OnDelete,
		Capacity:  cfg.Capacity,
		Options:   opts,
		Counts:    p.onNode,
		VolumeDir: p.volumeDir,
		OwnDir:    p.ownDir,
		Locate:    p.locate,
	})
	if err != nil {
		return nil, err
	}
	// New checks a configuration, without a context of a call.
	if _, err := p.store.Probe(context.Background()); err != nil {
		return nil, err
	}
	return p, nil
}

// confine resolves root and path, creating path inside root when missing,
// and returns the resolved root and path relative to it.
func confine(root, path string) (string, string, error) {
	resolvedRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", "", fmt.Errorf("%w: cannot resolve the host path root: %w", backend.ErrUnavailable, err)
	}
	if err := createInside(root, path); err != nil {
		return "", "", err
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", "", fmt.Errorf("%w: cannot resolve path: %w", backend.ErrUnavailable, err)
	}
	base, err := filepath.Rel(resolvedRoot, resolved)
	if err != nil || base == ".." || strings.HasPrefix(base, "../") {
		return "", "", fmt.Errorf("%w: path %q resolves to %q, outside the host path root %q", backend.ErrInvalidSpec, path, resolved, resolvedRoot)
	}
	info, err := os.Stat(resolved)
	if err != nil {
		return "", "", fmt.Errorf("%w: cannot stat path: %w", backend.ErrUnavailable, err)
	}
	if !info.IsDir() {
		return "", "", fmt.Errorf("%w: path %q is not a directory", backend.ErrInvalidSpec, path)
	}
	return resolvedRoot, base, nil
}

// createInside creates a missing path that lies below root, through os.Root
// so no symlink can carry the creation out of root. A path elsewhere is left
// to the resolution check.
func createInside(root, path string) error {
	rel, err := filepath.Rel(filepath.Clean(root), path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("%w: cannot open the host path root: %w", backend.ErrUnavailable, err)
	}
	defer r.Close()
	if err := r.MkdirAll(rel, 0o755); err != nil {
		return fmt.Errorf("%w: cannot create path %q: %w", backend.ErrInvalidSpec, path, err)
	}
	return nil
}

// Provision creates the claim's directory and returns its PersistentVolume.
func (p *Provisioner) Provision(ctx context.Context, opts provisioning.ProvisionOptions) (*v1.PersistentVolume, provisioning.ProvisioningState, error) {
	hostname := p.node
	if node := opts.SelectedNode; node != nil {
		if node.Name != p.node {
			return nil, provisioning.ProvisioningReschedule, fmt.Errorf("cannot provision on node %s: this provisioner's volumes live on node %s", node.Name, p.node)
		}
		if label, ok := node.Labels[hostnameLabel]; ok {
			hostname = label
		}
	}
	req, err := dirvol.ParseRequest(opts)
	if err == nil {
		err = req.CheckNodePath(p.path)
	}
	if err == nil {
		err = req.ApplyLocalPathPatterns(opts.StorageClass, p.patterns)
	}
	if err != nil {
		return nil, provisioning.ProvisioningFinished, err
	}
	var mountOptions []string
	if opts.StorageClass != nil {
		mountOptions = slices.Clone(opts.StorageClass.MountOptions)
	}
	if p.volumeType == VolumeTypeHostPath && len(mountOptions) > 0 {
		return nil, provisioning.ProvisioningFinished, errors.New("hostPath volumes take no mount options: remove mountOptions from the StorageClass or use volumeType Local")
	}
	dir, err := p.store.Create(ctx, req)
	if err != nil {
		return nil, provisioning.ProvisioningFinished, err
	}
	pv := dirvol.NewPV(opts, req, p.source(dir))
	if pv.Annotations == nil {
		pv.Annotations = map[string]string{}
	}
	maps.Copy(pv.Annotations, p.annotations())
	pv.Spec.MountOptions = mountOptions
	pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
			Key:      hostnameLabel,
			Operator: v1.NodeSelectorOpIn,
			Values:   []string{hostname},
		}}}},
	}}
	return pv, provisioning.ProvisioningFinished, nil
}

// source is the volume source of the directory dir below Path.
func (p *Provisioner) source(dir string) v1.PersistentVolumeSource {
	volumePath := filepath.Join(p.path, dir)
	if p.volumeType == VolumeTypeLocal {
		return v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: volumePath}}
	}
	// Directory, not DirectoryOrCreate: a vanished directory must fail the
	// mount, not come back empty.
	directory := v1.HostPathDirectory
	return v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: volumePath, Type: &directory}}
}

// annotations are those of every volume: the node.
func (p *Provisioner) annotations() map[string]string {
	return map[string]string{backend.AnnNode: p.node}
}

// Delete applies the onDelete policy to the directory the PersistentVolume
// names, which must lie below Path on this provisioner's node.
func (p *Provisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	return p.store.Delete(ctx, pv)
}

// Unsaved lists the directories made for PersistentVolumes this provisioner
// was not told exist, each with the source and node Provision gave it.
func (p *Provisioner) Unsaved(ctx context.Context) ([]provisioning.UnsavedVolume, error) {
	return p.store.Unsaved(ctx, func(dir string) *v1.PersistentVolume {
		return &v1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Annotations: p.annotations()},
			Spec:       v1.PersistentVolumeSpec{PersistentVolumeSource: p.source(dir)},
		}
	})
}

// Saved settles the record of an unsaved volume whose PersistentVolume, saved,
// exists: it is compared by the directory it resolves to, so a local and a
// hostPath source of one path are one volume. A saved volume this provisioner
// cannot place (another node, outside Path, another kind of source) keeps the
// record: nothing is deleted in doubt.
func (p *Provisioner) Saved(ctx context.Context, volume, saved *v1.PersistentVolume) error {
	return p.store.Saved(ctx, volume, saved)
}

// ReleaseRemoved applies the onDelete policy given with each volume of
// removed, as Delete does, to its directory below Path: the
// PersistentVolumes of this node that the manager deleted while the node was
// gone. A directory whose PersistentVolume exists, that a record of an
// unsaved volume names, or whose owner marker names another volume is left
// alone, and so is the directory of a deleted PersistentVolume that is not
// in removed. It returns the names that need no more work, released or with
// no directory here, for the caller to drop; the others are to be asked
// again. Options.Volumes is required.
func (p *Provisioner) ReleaseRemoved(ctx context.Context, removed []backend.RemovedVolume) ([]string, error) {
	return p.store.Release(ctx, removed)
}

// Budget returns the capacity budget and what this provisioner's volumes use
// of it.
func (p *Provisioner) Budget() (provisioning.Budget, error) {
	return p.store.Budget()
}

// Probe reaches Path and reports the space of the file system that holds it.
func (p *Provisioner) Probe(ctx context.Context) (provisioning.Space, error) {
	return p.store.Probe(ctx)
}

// ownDir returns the directory of a PersistentVolume of this provisioner's
// node, or of none: one pinned to another node, by its annotation or by the
// affinity another provisioner gave it, names a directory of that node.
func (p *Provisioner) ownDir(pv *v1.PersistentVolume) (string, error) {
	if node := backend.VolumeNode(pv); node != "" && node != p.node {
		return "", fmt.Errorf("it lives on node %q, this provisioner reaches node %q", node, p.node)
	}
	return p.volumeDir(pv)
}

// onNode reports whether a PersistentVolume lives on this provisioner's
// node, so that capacity counts per node.
func (p *Provisioner) onNode(pv *v1.PersistentVolume) bool {
	return backend.VolumeNode(pv) == p.node
}

// locate returns where the directory dir below Path is on the node.
func (p *Provisioner) locate(dir string) (string, string) {
	return backend.HostNode(p.node), path.Join(p.path, dir)
}

// volumeDir returns the directory below Path that a PersistentVolume names.
func (p *Provisioner) volumeDir(pv *v1.PersistentVolume) (string, error) {
	return VolumeDir(p.path, pv)
}

// VolumeDir returns the directory below base that pv, a local or hostPath
// PersistentVolume, names, as a backend of base reads it: an error says
// why pv is not one of its volumes.
func VolumeDir(base string, pv *v1.PersistentVolume) (string, error) {
	volumePath, ok := backend.HostVolumePath(pv)
	if !ok {
		return "", errors.New("it is neither a local nor a hostPath volume")
	}
	return dirvol.RelDir(base, volumePath)
}
