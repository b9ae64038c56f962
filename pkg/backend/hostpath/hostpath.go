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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// AffinityKey is the node label volumes are pinned with when the
// configuration names none: the host name.
func AffinityKey(key string) string {
	if key == "" {
		return corev1.LabelHostname
	}
	return key
}

// maxBases bounds Path and AdditionalPaths together, as the API does.
const maxBases = 17

// Config is backend.hostPath of a ProvisionerConfig plus what the node agent
// knows about the node it runs on.
type Config struct {
	// Path is the folder holding the volumes; it must resolve, symlinks
	// included, inside HostPathRoot. It is created when missing.
	Path string
	// AdditionalPaths are further folders, as Path is, none inside another
	// or inside Path: a claim whose StorageClass parameter nodePath names
	// one gets its directory there, and the volumes of each are deleted.
	AdditionalPaths []string
	// StorageClasses are the base directories of the claims of some
	// StorageClasses, each list a class's default first, as
	// local-path-provisioner's storageClassConfigs give: a claim of another
	// class goes in Path or AdditionalPaths. A path may appear in several
	// lists; the distinct paths of all, Path included, are at most 17 and
	// none inside another.
	StorageClasses map[string][]string
	// NodeAffinityKey is the node label volumes are pinned with, the host
	// name when empty; a StorageClass parameter nodeAffinityKey must name
	// the same.
	NodeAffinityKey string
	// VolumeType is Local (the default) or HostPath.
	VolumeType VolumeType
	// NodeName is the node agent's own node, whose filesystem holds Path:
	// required unless Shared. Every volume is pinned to it and carries it in
	// backend.AnnNode.
	NodeName string
	// Shared says that every node mounts Path, one shared file system,
	// there, and NodeName is empty: the volumes are pinned to no node, and
	// the StorageClass parameters nodePath and nodeAffinityKey are ignored,
	// as local-path-provisioner's sharedFileSystemPath ignores them. The
	// VolumeType must be HostPath: a local volume needs node affinity.
	Shared bool
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
	// AdoptRetainedDirectories gives a claim made again the directory its
	// earlier volume of this node retained, when that volume proves it
	// (dirvol.Config.Adopt).
	AdoptRetainedDirectories bool
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
// provisioning.Provisioner, Reclaimer, Prober and Expander and is safe for
// concurrent use.
type Provisioner struct {
	volumeType VolumeType
	// node is "" on a shared file system.
	node        string
	shared      bool
	affinityKey string
	patterns    LocalPathPatterns
	// bases are Path, AdditionalPaths and then the further paths of
	// StorageClasses, each its own store. The stores share their lock and
	// capacity count.
	bases []base
	// cloner copies the clones.
	cloner *dirvol.Cloner
	// defaults are the indexes in bases of Path and AdditionalPaths, and
	// classes those of each class of StorageClasses: where a claim's
	// volume may go.
	defaults []int
	classes  map[string][]int
}

// base is one folder of volumes on the node.
type base struct {
	path  string
	store *dirvol.Store
}

var (
	_ provisioning.Provisioner    = (*Provisioner)(nil)
	_ provisioning.Reclaimer      = (*Provisioner)(nil)
	_ provisioning.Prober         = (*Provisioner)(nil)
	_ provisioning.BudgetReporter = (*Provisioner)(nil)
	_ provisioning.Expander       = (*Provisioner)(nil)

	_ provisioning.DataSourceProvisioner = (*Provisioner)(nil)
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
		volumeType:  cfg.VolumeType,
		node:        cfg.NodeName,
		shared:      cfg.Shared,
		affinityKey: AffinityKey(cfg.NodeAffinityKey),
		patterns:    cfg.LocalPathPatterns,
		cloner:      dirvol.NewCloner(),
	}
	if p.volumeType == "" {
		p.volumeType = VolumeTypeLocal
	}
	switch {
	case p.volumeType != VolumeTypeLocal && p.volumeType != VolumeTypeHostPath:
		return nil, fmt.Errorf("%w: volumeType %q is not one of Local, HostPath", backend.ErrInvalidSpec, cfg.VolumeType)
	case p.shared && p.volumeType != VolumeTypeHostPath:
		return nil, fmt.Errorf("%w: volumes on a shared file system have no node affinity, which a local volume requires: volumeType must be HostPath", backend.ErrInvalidSpec)
	case p.shared && (p.node != "" || len(cfg.AdditionalPaths) > 0):
		return nil, fmt.Errorf("%w: a shared file system is one path of no node", backend.ErrInvalidSpec)
	case !p.shared && (p.node == "" || strings.Contains(p.node, "/")):
		return nil, fmt.Errorf("%w: node name %q names no node: the node agent runs with NODE_NAME", backend.ErrInvalidSpec, p.node)
	case !filepath.IsAbs(cfg.HostPathRoot):
		return nil, fmt.Errorf("%w: the host path root %q is not an absolute path", backend.ErrInvalidSpec, cfg.HostPathRoot)
	}
	paths, err := p.basePaths(cfg)
	if err != nil {
		return nil, err
	}
	var shared *dirvol.Store
	for _, path := range paths {
		store, err := p.newStore(cfg, opts, path, shared)
		if err != nil {
			return nil, err
		}
		shared = store
		p.bases = append(p.bases, base{path: path, store: store})
	}
	return p, nil
}

// basePaths checks the paths of Path, AdditionalPaths and StorageClasses,
// returns the distinct ones cleaned, and notes which of them each class
// and the defaults use.
func (p *Provisioner) basePaths(cfg Config) ([]string, error) {
	var paths []string
	add := func(list []string) ([]int, error) {
		var indexes []int
		for _, path := range list {
			if !filepath.IsAbs(path) {
				return nil, fmt.Errorf("%w: path %q is not absolute", backend.ErrInvalidSpec, path)
			}
			path = filepath.Clean(path)
			i := slices.Index(paths, path)
			if i < 0 || slices.Contains(indexes, i) {
				i = len(paths)
				if err := checkApart(paths, path); err != nil {
					return nil, err
				}
				paths = append(paths, path)
			}
			indexes = append(indexes, i)
		}
		return indexes, nil
	}
	var err error
	if p.defaults, err = add(append([]string{cfg.Path}, cfg.AdditionalPaths...)); err != nil {
		return nil, err
	}
	p.classes = map[string][]int{}
	for _, class := range slices.Sorted(maps.Keys(cfg.StorageClasses)) {
		switch n := len(cfg.StorageClasses[class]); {
		case n == 0:
			return nil, fmt.Errorf("%w: StorageClass %q has no path", backend.ErrInvalidSpec, class)
		case n > 1 && p.shared:
			return nil, fmt.Errorf("%w: a shared file system is one path per StorageClass, %q has %d", backend.ErrInvalidSpec, class, n)
		}
		if p.classes[class], err = add(cfg.StorageClasses[class]); err != nil {
			return nil, err
		}
	}
	if len(paths) > maxBases {
		return nil, fmt.Errorf("%w: %d distinct paths on the node, more than %d", backend.ErrInvalidSpec, len(paths), maxBases)
	}
	return paths, nil
}

// checkApart refuses a path that overlaps one of paths: the volumes of one
// would lie in the other.
func checkApart(paths []string, path string) error {
	for _, earlier := range paths {
		if backend.Overlaps(earlier, path) {
			return fmt.Errorf("%w: paths %q and %q of one node overlap: the volumes of one would lie in the other", backend.ErrInvalidSpec, earlier, path)
		}
	}
	return nil
}

// newStore makes and probes the store of basePath, sharing with the
// store of another base, if any.
func (p *Provisioner) newStore(cfg Config, opts Options, basePath string, shareWith *dirvol.Store) (*dirvol.Store, error) {
	root, rel, err := confine(cfg.HostPathRoot, basePath)
	if err != nil {
		return nil, err
	}
	store, err := dirvol.New(dirvol.Config{
		FS:        dirvol.LocalFS{},
		Root:      root,
		Base:      rel,
		Pattern:   cfg.PathPattern,
		Directory: cfg.Directory,
		OnDelete:  cfg.OnDelete,
		Capacity:  cfg.Capacity,
		Options:   opts,
		ShareWith: shareWith,
		Counts:    p.onNode,
		Adopt:     cfg.AdoptRetainedDirectories,
		Holds:     p.onNode,
		VolumeDir: func(pv *corev1.PersistentVolume) (string, error) { return VolumeDir(basePath, pv) },
		OwnDir:    func(pv *corev1.PersistentVolume) (string, error) { return p.ownDir(basePath, pv) },
		Locate:    func(dir string) (string, string) { return backend.HostNode(p.node), path.Join(basePath, dir) },
	})
	if err != nil {
		return nil, err
	}
	// New checks a configuration, without a context of a call.
	if _, err := store.Probe(context.Background()); err != nil {
		return nil, err
	}
	return store, nil
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
	if errors.Is(err, fs.ErrNotExist) && !lexicallyInside(root, path) {
		// Only a path below the root is made when missing.
		return "", "", fmt.Errorf("%w: path %q lies outside the host path root %q", backend.ErrInvalidSpec, path, root)
	}
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

// lexicallyInside reports whether path, as written, lies in root.
func lexicallyInside(root, path string) bool {
	rel, err := filepath.Rel(filepath.Clean(root), path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// createInside creates a missing path that lies below root, through os.Root
// so no symlink can carry the creation out of root. A path elsewhere is left
// to the resolution check.
func createInside(root, path string) error {
	if !lexicallyInside(root, path) {
		return nil
	}
	rel, _ := filepath.Rel(filepath.Clean(root), path)
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
func (p *Provisioner) Provision(ctx context.Context, opts provisioning.ProvisionOptions) (*corev1.PersistentVolume, provisioning.ProvisioningState, error) {
	// Without a selected node the claim was handed over by a manager that
	// found the node's value of the key to be its name.
	pinned := p.node
	if node := opts.SelectedNode; node != nil && !p.shared {
		if node.Name != p.node {
			return nil, provisioning.ProvisioningReschedule, fmt.Errorf("cannot provision on node %s: this provisioner's volumes live on node %s", node.Name, p.node)
		}
		pinned = backend.NodeLabelValue(node, p.affinityKey)
	}
	req, chosen, err := p.parse(opts)
	if err != nil {
		return nil, provisioning.ProvisioningFinished, err
	}
	b := p.bases[chosen]
	var mountOptions []string
	if opts.StorageClass != nil {
		mountOptions = slices.Clone(opts.StorageClass.MountOptions)
	}
	if p.volumeType == VolumeTypeHostPath && len(mountOptions) > 0 {
		return nil, provisioning.ProvisioningFinished, errors.New("hostPath volumes take no mount options: remove mountOptions from the StorageClass or use volumeType Local")
	}
	vol, state, err := p.volume(ctx, opts, req, b)
	if err != nil || state != provisioning.ProvisioningFinished || vol == nil {
		return nil, state, err
	}
	pv := dirvol.NewPV(opts, req, p.source(b.path, vol.Dir))
	if pv.Annotations == nil {
		pv.Annotations = map[string]string{}
	}
	maps.Copy(pv.Annotations, p.annotations())
	pv.Spec.MountOptions = mountOptions
	if !p.shared {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key:      p.affinityKey,
				Operator: corev1.NodeSelectorOpIn,
				Values:   []string{pinned},
			}}}},
		}}
	}
	if err := dirvol.RecordAdoption(ctx, opts, pv, *vol); err != nil {
		return nil, provisioning.ProvisioningFinished, err
	}
	return pv, provisioning.ProvisioningFinished, nil
}

// volume makes the claim's directory in b: an empty one, a copy of the
// source claim's volume, in the background, or none for a claim that
// abandoned its clone.
func (p *Provisioner) volume(ctx context.Context, opts provisioning.ProvisionOptions, req dirvol.Request, b base) (*dirvol.Volume, provisioning.ProvisioningState, error) {
	switch {
	case opts.Abandoned:
		return nil, provisioning.ProvisioningFinished, p.cloner.Abandon(ctx, b.store, req)
	case opts.DataSource != nil:
		return p.clone(ctx, opts, req, b)
	}
	vol, err := b.store.Create(ctx, req)
	if err != nil {
		return nil, provisioning.ProvisioningFinished, err
	}
	return &vol, provisioning.ProvisioningFinished, nil
}

// parse reads the request of opts and picks the base it goes in. The class
// parameters nodeAffinityKey and nodePath say nothing on a shared file
// system, as with local-path-provisioner's sharedFileSystemPath.
func (p *Provisioner) parse(opts provisioning.ProvisionOptions) (dirvol.Request, int, error) {
	req, err := dirvol.ParseRequest(opts)
	candidates := p.defaults
	if opts.StorageClass != nil {
		if classBases, ok := p.classes[opts.StorageClass.Name]; ok {
			candidates = classBases
		}
	}
	chosen := 0
	if err == nil && !p.shared {
		err = req.CheckNodeAffinityKey(p.affinityKey)
		if err == nil {
			chosen, err = req.NodePathIn(p.paths(candidates))
		}
	}
	if err == nil {
		err = req.ApplyLocalPathPatterns(opts.StorageClass, p.patterns)
	}
	return req, candidates[chosen], err
}

// paths are the base directories of the indexes in bases.
func (p *Provisioner) paths(indexes []int) []string {
	paths := make([]string, len(indexes))
	for i, index := range indexes {
		paths[i] = p.bases[index].path
	}
	return paths
}

// baseOf returns the base whose store holds the directory a
// PersistentVolume names; a volume below none goes to the first, whose store
// refuses it and says why.
func (p *Provisioner) baseOf(pv *corev1.PersistentVolume) base {
	for _, b := range p.bases {
		if _, err := VolumeDir(b.path, pv); err == nil {
			return b
		}
	}
	return p.bases[0]
}

// source is the volume source of the directory dir below the base path.
func (p *Provisioner) source(path, dir string) corev1.PersistentVolumeSource {
	volumePath := filepath.Join(path, dir)
	if p.volumeType == VolumeTypeLocal {
		return corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: volumePath}}
	}
	// Directory, not DirectoryOrCreate: a vanished directory must fail the
	// mount, not come back empty.
	directory := corev1.HostPathDirectory
	return corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: volumePath, Type: &directory}}
}

// annotations are those of every volume: the node, unless shared.
func (p *Provisioner) annotations() map[string]string {
	if p.shared {
		return map[string]string{}
	}
	return map[string]string{backend.AnnNode: p.node}
}

// Delete applies the onDelete policy to the directory the PersistentVolume
// names, which must lie below Path on this provisioner's node.
func (p *Provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	return p.baseOf(pv).store.Delete(ctx, pv)
}

// Unsaved lists the directories made for PersistentVolumes this provisioner
// was not told exist, each with the source and node Provision gave it.
func (p *Provisioner) Unsaved(ctx context.Context) ([]provisioning.UnsavedVolume, error) {
	var all []provisioning.UnsavedVolume
	var errs []error
	for _, b := range p.bases {
		unsaved, err := b.store.Unsaved(ctx, func(dir string) *corev1.PersistentVolume {
			return &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Annotations: p.annotations()},
				Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: p.source(b.path, dir)},
			}
		})
		all = append(all, unsaved...)
		errs = append(errs, err)
	}
	return all, errors.Join(errs...)
}

// Saved settles the record of an unsaved volume whose PersistentVolume, saved,
// exists: it is compared by the directory it resolves to, so a local and a
// hostPath source of one path are one volume. A saved volume of another node
// makes the directory one an earlier try made here: it is removed when empty
// and kept when it holds files. A saved volume this provisioner cannot place
// otherwise (outside Path, another kind of source) keeps the record: nothing
// is deleted in doubt.
func (p *Provisioner) Saved(ctx context.Context, volume, saved *corev1.PersistentVolume) error {
	return p.baseOf(volume).store.Saved(ctx, volume, saved)
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
	// A name is done once no base holds its directory any more.
	var done []string
	var errs []error
	for i, b := range p.bases {
		released, err := b.store.Release(ctx, removed)
		errs = append(errs, err)
		if i == 0 {
			done = released
			continue
		}
		done = slices.DeleteFunc(done, func(name string) bool { return !slices.Contains(released, name) })
	}
	return done, errors.Join(errs...)
}

// Expand counts a volume of this node, or of the shared file system, at
// size in the capacity budget, when it fits; the directory needs nothing,
// since no file system limits its size.
func (p *Provisioner) Expand(_ context.Context, pv *corev1.PersistentVolume, _ *corev1.PersistentVolumeClaim, size resource.Quantity) (resource.Quantity, error) {
	b := p.baseOf(pv)
	if _, err := p.ownDir(b.path, pv); err != nil {
		return resource.Quantity{}, fmt.Errorf("cannot expand volume %s: %w", pv.Name, err)
	}
	// The stores share their count.
	if err := b.store.Expand(pv, size); err != nil {
		return resource.Quantity{}, err
	}
	return size, nil
}

// Budget returns the capacity budget and what this provisioner's volumes use
// of it.
func (p *Provisioner) Budget() (provisioning.Budget, error) {
	// The stores share their count.
	return p.bases[0].store.Budget()
}

// Probe reaches every base and reports the space of the file system that
// holds Path, where new volumes go unless their class says otherwise.
func (p *Provisioner) Probe(ctx context.Context) (provisioning.Space, error) {
	space, err := p.bases[0].store.Probe(ctx)
	if err != nil {
		return provisioning.Space{}, err
	}
	for _, b := range p.bases[1:] {
		if _, err := b.store.Probe(ctx); err != nil {
			return provisioning.Space{}, err
		}
	}
	return space, nil
}

// ownDir returns the directory of a PersistentVolume of this provisioner's
// node, or of none: one pinned to another node, by its annotation or by the
// affinity another provisioner gave it, names a directory of that node.
func (p *Provisioner) ownDir(base string, pv *corev1.PersistentVolume) (string, error) {
	switch node := backend.VolumeNode(pv); {
	case node != "" && p.shared:
		return "", fmt.Errorf("it lives on node %q, this provisioner on a shared file system of no node", node)
	case node != "" && node != p.node:
		return "", fmt.Errorf("%w: it lives on node %q, this provisioner reaches node %q", backend.ErrOtherNode, node, p.node)
	}
	return VolumeDir(base, pv)
}

// onNode reports whether a PersistentVolume lives on this provisioner's
// node, or on no node for a shared file system, so that capacity counts per
// node.
func (p *Provisioner) onNode(pv *corev1.PersistentVolume) bool {
	return backend.VolumeNode(pv) == p.node
}

// VolumeDir returns the directory below base that pv, a local or hostPath
// PersistentVolume, names, as a backend of base reads it: an error says
// why pv is not one of its volumes.
func VolumeDir(base string, pv *corev1.PersistentVolume) (string, error) {
	volumePath, ok := backend.HostVolumePath(pv)
	if !ok {
		return "", errors.New("it is neither a local nor a hostPath volume")
	}
	return dirvol.RelDir(base, volumePath)
}
