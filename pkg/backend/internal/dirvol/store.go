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

package dirvol

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

const (
	// markerSuffix names the file beside each volume directory that records
	// which PersistentVolume owns it. It lives beside, not inside, so the
	// volume starts empty (databases refuse non-empty data directories).
	markerSuffix = ".provfleet-volume"
	// parentMode is for the folders a pattern creates above volumes.
	parentMode = 0o755
	// archiveTimeFormat is a UTC timestamp without characters some file
	// servers refuse.
	archiveTimeFormat = "20060102T150405Z"
	// trashDir is the folder at the top of the base that deleted volume
	// directories are moved into, under the lock, before their files are
	// deleted outside it. CheckDir refuses hidden names, so no pattern or
	// PersistentVolume can name it or what it holds.
	trashDir = ".provfleet-deleting"
)

// Config configures a Store.
type Config struct {
	// FS is the file system that holds Root: LocalFS for the host's.
	FS Filesystem
	// Root is an absolute directory of FS no operation ever leaves.
	Root string
	// Base is where volume directories go, relative to Root ("." for Root).
	Base string
	// Pattern is the default path pattern; empty means the PV name.
	Pattern string
	// Directory is the mode and owner of a new volume directory, unless the
	// class of its claim sets them.
	Directory backend.Directory
	OnDelete  backend.OnDeletePolicy
	Capacity  backend.Capacity
	Options   Options
	// Counts reports whether a listed volume of Options.ProvisionerNames
	// counts towards Capacity (hostpath: those of its own node); nil means
	// every one.
	Counts func(*corev1.PersistentVolume) bool
	// VolumeDir returns the directory below Base that a PersistentVolume
	// points to, and an error for a volume elsewhere.
	VolumeDir func(*corev1.PersistentVolume) (string, error)
	// ShareWith is a Store of the same volumes on another base (hostpath: a
	// node's further base directories), whose lock and records of volumes
	// being provisioned this one shares, so that Capacity counts the
	// volumes of every base; nil shares nothing.
	ShareWith *Store
	// OwnDir is VolumeDir for the volumes Delete and Saved act on, which
	// may be fewer (hostpath: those of its own node); nil means VolumeDir.
	OwnDir func(*corev1.PersistentVolume) (string, error)
	// Adopt gives a claim the existing directory, without owner marker, that
	// its pattern renders when a released, retained PersistentVolume made
	// for an earlier claim of the same namespace and name names exactly it
	// (see adoptable); without it such a directory is refused.
	Adopt bool
	// Holds reports whether the directory of a volume VolumeDir accepts is
	// certainly on FS (hostpath: pinned to its own node), as adoption's
	// proof requires; nil means every one.
	Holds func(*corev1.PersistentVolume) bool
	// Locate returns where the directory dir below Base is, as
	// PersistentVolumes say it: the NFS server as backend.NFSServer names
	// it ("" for the host's file system) and the absolute path in slash
	// form.
	Locate func(dir string) (server, volumePath string)
}

// Options are what a Store needs from the process that runs it.
type Options struct {
	// ProvisionerNames are the names of the volumes that count towards
	// Capacity (pv.kubernetes.io/provisioned-by); the first tags new records.
	ProvisionerNames []string
	// Volumes finds the cluster's PersistentVolumes; nil means only volumes
	// provisioned since the Store was made are known.
	Volumes Volumes
	// Now stamps archived directories; nil means time.Now.
	Now func() time.Time
}

// Volumes is what a Store reads of the cluster's PersistentVolumes, to count
// capacity, refuse colliding directories and prune its reservations.
type Volumes interface {
	// List returns every PersistentVolume.
	List() ([]*corev1.PersistentVolume, error)
	// Exists reports whether the PersistentVolume name exists.
	Exists(name string) (bool, error)
	// Overlapping returns the PersistentVolumes whose path is volumePath,
	// lies inside it or contains it, on NFS server server (as
	// backend.NFSServer names it; "" for the host's file system).
	Overlapping(server, volumePath string) ([]*corev1.PersistentVolume, error)
}

// Store creates and removes volume directories below one base directory. It is
// safe for concurrent use.
type Store struct {
	cfg     Config
	pattern *Pattern
	now     func() time.Time

	*shared
	// purging are the directories in trashDir whose files a delete is
	// deleting, so no other deletes them too.
	purging map[string]bool
	// journalMade is set once the first probe or operation made the record
	// folder.
	journalMade atomic.Bool

	// step, set by tests, is told of each step below as it is taken, to
	// order or pause operations; an error stops the operation there, as a
	// crash would.
	step func(name string) error
}

// The steps a Store tells its step hook of.
const (
	stepRecordSynced  = "record synced"
	stepJournalSynced = "record folder synced"
	stepVolumeMade    = "volume made"
	stepDelete        = "delete"
)

// did tells the step hook, if any, that step name is reached.
func (s *Store) did(name string) error {
	if s.step == nil {
		return nil
	}
	return s.step(name)
}

// shared is what the Stores of one set of bases share (Config.ShareWith).
type shared struct {
	// mu serialises directory operations with the capacity and collision
	// checks they depend on.
	mu sync.Mutex
	// reservations are the directories of volumes being provisioned, or
	// provisioned but whose PersistentVolume is not yet known, by PV name.
	reservations map[string]*reservation
	// grown are the sizes volumes were expanded to, by PV name, counted
	// until their listed PersistentVolume shows that size.
	grown map[string]resource.Quantity
}

type reservation struct {
	// base is the Config.Base that dir lies below.
	base string
	dir  string
	size resource.Quantity
	done bool
}

// New checks a Store's configuration without reaching its file system, which
// Probe does: errors wrap backend.ErrInvalidSpec.
func New(cfg Config) (*Store, error) {
	if cfg.OnDelete == "" {
		cfg.OnDelete = backend.OnDeleteDelete
	}
	if !cfg.OnDelete.Known() {
		return nil, fmt.Errorf("%w: onDelete %q is not one of Delete, Retain, Archive", backend.ErrInvalidSpec, cfg.OnDelete)
	}
	if cfg.Capacity.Storage.Sign() < 0 || cfg.Capacity.MaxVolumes < 0 {
		return nil, fmt.Errorf("%w: capacity may not be negative", backend.ErrInvalidSpec)
	}
	if cfg.FS == nil {
		return nil, fmt.Errorf("%w: no file system", backend.ErrInvalidSpec)
	}
	cfg.FS = withFaults(cfg.FS)
	if cfg.VolumeDir == nil || cfg.Locate == nil {
		return nil, fmt.Errorf("%w: no volume directory mapping", backend.ErrInvalidSpec)
	}
	if cfg.OwnDir == nil {
		cfg.OwnDir = cfg.VolumeDir
	}
	pattern, err := ParsePattern(cfg.Pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", backend.ErrInvalidSpec, err)
	}
	s := &Store{cfg: cfg, pattern: pattern, now: cfg.Options.Now, shared: &shared{reservations: map[string]*reservation{}, grown: map[string]resource.Quantity{}}, purging: map[string]bool{}}
	if cfg.ShareWith != nil {
		s.shared = cfg.ShareWith.shared
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Probe reaches the base and reports the space of its file system; errors
// wrap backend.ErrUnavailable, or backend.ErrInvalidSpec for a base that is
// not a directory inside the root. The first probe or operation that
// reaches the base makes the record folder; later ones only require it (see
// openJournal), so a base whose file system is no longer mounted there is
// reported rather than filled.
func (s *Store) Probe(ctx context.Context) (provisioning.Space, error) {
	base, err := s.openBase(ctx)
	if err != nil {
		return provisioning.Space{}, err
	}
	defer base.Close()
	if err := s.prepareJournal(ctx, base); err != nil {
		return provisioning.Space{}, err
	}
	space, err := base.Space(ctx)
	if err != nil {
		return provisioning.Space{}, fmt.Errorf("%w: cannot read the free space of %q: %w", backend.ErrUnavailable, s.cfg.Base, err)
	}
	return space, nil
}

// prepareJournal makes or requires the record folder, as openJournal.
func (s *Store) prepareJournal(ctx context.Context, base Dir) error {
	journal, err := s.openJournal(ctx, base)
	if errors.Is(err, backend.ErrUnavailable) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: cannot open the volume records in %q: %w", backend.ErrUnavailable, s.cfg.Base, err)
	}
	if err := journal.Close(); err != nil {
		return fmt.Errorf("%w: cannot close the volume records in %q: %w", backend.ErrUnavailable, s.cfg.Base, err)
	}
	return nil
}

// openBase opens the base anew for each operation, so a base replaced by a
// symlink leading out of the root is refused at the moment of use.
func (s *Store) openBase(ctx context.Context) (Dir, error) {
	return s.cfg.FS.OpenBase(ctx, s.cfg.Root, s.cfg.Base)
}

// Volume is the directory Create gave a claim.
type Volume struct {
	// Dir is the directory below the base.
	Dir string
	// AdoptedFrom is the released PersistentVolume whose directory the
	// claim was given (Config.Adopt), as the Store read it; nil for a
	// directory made.
	AdoptedFrom *corev1.PersistentVolume
}

// Create renders the claim's directory, checks it against capacity and every
// other volume, records it and creates it, or adopts it (Config.Adopt).
// Calling it again for the same PV returns the same directory. The record is
// kept until Forget or a delete.
func (s *Store) Create(ctx context.Context, req Request) (Volume, error) {
	logger := klog.FromContext(ctx).WithValues("pv", req.PVName, "claim", klog.KObj(req.Claim))
	s.mu.Lock()
	defer s.mu.Unlock()

	dir, err := s.dirFor(req)
	if err != nil {
		return Volume{}, err
	}
	logger = logger.WithValues("dir", dir)
	if err := s.prune(); err != nil {
		return Volume{}, err
	}
	adopted, err := s.checkOverlapOrAdopt(ctx, req, dir)
	if err != nil {
		return Volume{}, err
	}
	if err := s.checkRoom(req.PVName, req.Size); err != nil {
		return Volume{}, err
	}
	base, err := s.openBase(ctx)
	if err != nil {
		return Volume{}, fmt.Errorf("cannot create directory %q: %w", dir, err)
	}
	defer base.Close()
	res := s.reservations[req.PVName]
	if res == nil {
		if err := checkSpace(ctx, base, req.Size); err != nil {
			return Volume{}, err
		}
		res = &reservation{base: s.cfg.Base, dir: dir, size: req.Size}
		s.reservations[req.PVName] = res
	}
	if err := s.create(ctx, base, req, dir, adopted); err != nil {
		if !res.done {
			delete(s.reservations, req.PVName)
		}
		if full(err) {
			return Volume{}, fmt.Errorf("%w: cannot create directory %q: %w", provisioning.ErrNoRoom, dir, err)
		}
		return Volume{}, fmt.Errorf("cannot create directory %q: %w", dir, s.notAdopted(err, adopted))
	}
	res.done = true
	if adopted != nil {
		logger.Info("Volume directory adopted", "oldPV", klog.KObj(adopted))
	}
	logger.V(2).Info("Volume directory ready")
	return Volume{Dir: dir, AdoptedFrom: adopted}, nil
}

// full reports whether err is a file system out of space or over quota, a
// state the checks before cannot rule out (a file system that reports no
// size, another writer) and that may pass.
func full(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// dirFor keeps the directory of an earlier call for the same PV, so a claim
// whose metadata changed between retries does not get a second directory.
func (s *Store) dirFor(req Request) (string, error) {
	if res, ok := s.reservations[req.PVName]; ok {
		if res.base != s.cfg.Base {
			return "", fmt.Errorf("the volume is being provisioned in another base directory, %q", res.base)
		}
		return res.dir, nil
	}
	pattern := req.Pattern
	if pattern == nil {
		pattern = s.pattern
	}
	return pattern.Render(req.PVName, req.Claim)
}

// prune forgets finished reservations whose PersistentVolume now exists:
// from then on the volume is what counts. It looks up each reservation, not
// every volume, so its cost does not grow with the cluster.
func (s *Store) prune() error {
	if s.cfg.Options.Volumes == nil {
		return nil
	}
	for name, res := range s.reservations {
		if !res.done {
			continue
		}
		exists, err := s.cfg.Options.Volumes.Exists(name)
		if err != nil {
			return fmt.Errorf("cannot check whether a provisioned volume was saved: %w", err)
		}
		if exists {
			delete(s.reservations, name)
		}
	}
	return nil
}

// checkOverlap refuses a directory that is, contains or lies inside the
// directory of another volume, known or being provisioned, but the volume
// handedOn, whose directory pvName adopted ("" for none). The Event this
// error becomes is read by the claim's owner, so it names no other volume.
func (s *Store) checkOverlap(ctx context.Context, pvName, dir, handedOn string) error {
	others, err := s.overlapping(ctx, pvName, dir)
	if err != nil {
		return err
	}
	for _, pv := range others {
		if pv.Name != handedOn {
			return errOverlap(dir)
		}
	}
	return s.checkReserved(pvName, dir)
}

func errOverlap(dir string) error {
	return fmt.Errorf("directory %q is, contains or lies inside the directory of another volume", dir)
}

// overlapping returns the known volumes but pvName whose directory is,
// contains or lies inside dir.
func (s *Store) overlapping(ctx context.Context, pvName, dir string) ([]*corev1.PersistentVolume, error) {
	volumes := s.cfg.Options.Volumes
	if volumes == nil {
		return nil, nil
	}
	server, volumePath := s.cfg.Locate(dir)
	pvs, err := volumes.Overlapping(server, volumePath)
	if err != nil {
		return nil, fmt.Errorf("cannot check directory %q against other volumes: %w", dir, err)
	}
	var others []*corev1.PersistentVolume
	for _, pv := range pvs {
		if pv.Name == pvName {
			continue
		}
		// VolumeDir confirms the candidate: a volume of another base,
		// such as the base itself or one of its parents, is not ours to
		// refuse.
		if other, err := s.cfg.VolumeDir(pv); err == nil && backend.Overlaps(dir, other) {
			klog.FromContext(ctx).V(2).Info("Directory overlaps another volume", "dir", dir, "otherPV", klog.KObj(pv), "otherDir", other)
			others = append(others, pv)
		}
	}
	return others, nil
}

// checkReserved refuses a directory that is, contains or lies inside the
// directory of a volume being provisioned.
func (s *Store) checkReserved(pvName, dir string) error {
	for name, res := range s.reservations {
		if name != pvName && res.base == s.cfg.Base && backend.Overlaps(dir, res.dir) {
			return fmt.Errorf("directory %q is, contains or lies inside the directory of a volume being provisioned", dir)
		}
	}
	return nil
}

// checkRoom refuses a volume that does not fit the capacity budget, with an
// error wrapping provisioning.ErrNoRoom unless it is larger than the whole
// budget: the claim waits for room only if room can ever be enough.
// Callers hold s.mu.
func (s *Store) checkRoom(pvName string, size resource.Quantity) error {
	limits := s.cfg.Capacity
	if limits.Storage.IsZero() && limits.MaxVolumes == 0 {
		return nil
	}
	used, count, err := s.use(pvName)
	if err != nil {
		return err
	}
	if limits.MaxVolumes > 0 && count >= int(limits.MaxVolumes) {
		return fmt.Errorf("%w: capacity exhausted: %d of %d volumes in use", provisioning.ErrNoRoom, count, limits.MaxVolumes)
	}
	if limits.Storage.IsZero() {
		return nil
	}
	if size.Cmp(limits.Storage) > 0 {
		return fmt.Errorf("capacity exhausted: %s of %s in use, the claim requests %s, more than the whole budget", used.String(), limits.Storage.String(), size.String())
	}
	total := used.DeepCopy()
	total.Add(size)
	if total.Cmp(limits.Storage) > 0 {
		return fmt.Errorf("%w: capacity exhausted: %s of %s in use, the claim requests %s", provisioning.ErrNoRoom, used.String(), limits.Storage.String(), size.String())
	}
	return nil
}

// use counts what the volumes but pvName's use of the capacity budget: this
// provisioner's listed volumes and the reservations not yet listed. Callers
// hold s.mu.
func (s *Store) use(pvName string) (resource.Quantity, int, error) {
	var pvs []*corev1.PersistentVolume
	if s.cfg.Options.Volumes != nil {
		var err error
		if pvs, err = s.cfg.Options.Volumes.List(); err != nil {
			return resource.Quantity{}, 0, fmt.Errorf("cannot count the volumes in use: %w", err)
		}
	}
	var used resource.Quantity
	count := 0
	listed := map[string]bool{}
	for _, pv := range pvs {
		listed[pv.Name] = true
		if pv.Name == pvName || !s.counts(pv) {
			continue
		}
		used.Add(s.sizeOf(pv))
		count++
	}
	for name := range s.grown {
		if !listed[name] {
			delete(s.grown, name)
		}
	}
	for name, res := range s.reservations {
		if name == pvName || listed[name] {
			continue
		}
		used.Add(res.size)
		count++
	}
	return used, count, nil
}

// sizeOf is what a listed volume counts towards the budget: its capacity,
// or the size it was expanded to while its PersistentVolume does not show
// that yet. Callers hold s.mu.
func (s *Store) sizeOf(pv *corev1.PersistentVolume) resource.Quantity {
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	grown, ok := s.grown[pv.Name]
	switch {
	case !ok:
	case size.Cmp(grown) >= 0:
		delete(s.grown, pv.Name)
	default:
		size = grown
	}
	return size
}

// Expand counts pv, a volume of this provisioner, at size from now on, when
// that fits the storage limit of the capacity budget with every other
// volume; the directory itself needs nothing, as no file system limits it.
// A refusal wraps provisioning.ErrNoRoom. Expanding again to the same size
// succeeds; a smaller size replaces a larger one not yet written to the
// PersistentVolume, as when a claim's request is lowered after a refusal.
func (s *Store) Expand(pv *corev1.PersistentVolume, size resource.Quantity) error {
	limit := s.cfg.Capacity.Storage
	if limit.IsZero() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	used, _, err := s.use(pv.Name)
	if err != nil {
		return err
	}
	room := limit.DeepCopy()
	room.Sub(used)
	if size.Cmp(room) > 0 {
		return fmt.Errorf("%w: capacity budget exhausted: the other volumes use %s of %s, the volume would grow to %s", provisioning.ErrNoRoom, used.String(), limit.String(), size.String())
	}
	s.grown[pv.Name] = size
	return nil
}

// Budget returns the capacity budget and what the volumes use of it now,
// as Create counts it; zero limits when there is no budget, without
// counting.
func (s *Store) Budget() (provisioning.Budget, error) {
	limits := s.cfg.Capacity
	if limits.Storage.IsZero() && limits.MaxVolumes == 0 {
		return provisioning.Budget{}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	used, count, err := s.use("")
	if err != nil {
		return provisioning.Budget{}, err
	}
	return provisioning.Budget{
		UsedBytes: used.Value(), LimitBytes: limits.Storage.Value(),
		UsedVolumes: int64(count), LimitVolumes: int64(limits.MaxVolumes),
	}, nil
}

// counts reports whether a listed volume counts towards Capacity.
func (s *Store) counts(pv *corev1.PersistentVolume) bool {
	if !slices.Contains(s.cfg.Options.ProvisionerNames, pv.Annotations[provisioning.AnnDynamicallyProvisioned]) {
		return false
	}
	return s.cfg.Counts == nil || s.cfg.Counts(pv)
}

// checkSpace refuses a volume larger than the space left on the base's file
// system, as checkRoom refuses one beyond the capacity budget: with an error
// wrapping provisioning.ErrNoRoom unless it is larger than the whole file
// system. A file system that reports no size is not checked.
func checkSpace(ctx context.Context, base Dir, size resource.Quantity) error {
	space, err := base.Space(ctx)
	if err != nil {
		return fmt.Errorf("%w: cannot read the free space: %w", backend.ErrUnavailable, err)
	}
	if space.TotalBytes == 0 || size.CmpInt64(space.AvailableBytes) <= 0 {
		return nil
	}
	available := resource.NewQuantity(space.AvailableBytes, resource.BinarySI)
	total := resource.NewQuantity(space.TotalBytes, resource.BinarySI)
	if size.CmpInt64(space.TotalBytes) > 0 {
		return fmt.Errorf("not enough free space: %s of %s available, the claim requests %s, more than the whole file system", available, total, size.String())
	}
	return fmt.Errorf("%w: not enough free space: %s of %s available, the claim requests %s", provisioning.ErrNoRoom, available, total, size.String())
}

// errNotOurs refuses a directory that exists without being this volume's.
var errNotOurs = errors.New("the directory is not this volume's")

// create records dir for the request's PV, then makes dir and its owner
// marker, with the mode and owner settings. A record of a directory that is
// not the volume's would let Delete remove someone else's, so it is dropped
// when the marker was not taken, and so is the record of a directory that
// was removed again.
func (s *Store) create(ctx context.Context, base Dir, req Request, dir string, adopted *corev1.PersistentVolume) error {
	claim := func(ctx context.Context, base Dir) (bool, error) {
		if adopted != nil {
			return s.adoptVolume(ctx, base, dir, req.PVName)
		}
		return s.makeVolume(ctx, base, dir, req.PVName, req.Directory.Or(s.cfg.Directory))
	}
	return s.recordAnd(ctx, base, req, dir, adopted, claim)
}

// recordAnd records dir for the request's PV, then claims it with claim,
// which reports whether the owner marker is the PV's, as create says.
func (s *Store) recordAnd(ctx context.Context, base Dir, req Request, dir string, adopted *corev1.PersistentVolume,
	claim func(context.Context, Dir) (bool, error)) error {
	written, err := s.writeRecord(ctx, base, req, dir, adopted)
	switch {
	case errors.Is(err, backend.ErrUnavailable):
		return err
	case errors.Is(err, backend.ErrModeRefused):
		return fmt.Errorf("cannot record the volume: %w", err)
	case err != nil:
		return fmt.Errorf("%w: cannot record the volume: %w", backend.ErrUnavailable, err)
	}
	claimed, err := claim(ctx, base)
	// An earlier record may have a marker this call failed to read: keep it,
	// unless the directory is certainly not the volume's, or gone.
	if err != nil && !claimed && (written || errors.Is(err, errNotOurs) || errors.As(err, new(*undoneError))) {
		if ferr := forgetRecord(ctx, base, req.PVName, dir); ferr != nil {
			return errors.Join(err, fmt.Errorf("cannot drop the record: %w", ferr))
		}
	}
	return err
}

// makeVolume makes dir and its owner marker, and reports whether the marker
// is the PV's. The marker is created exclusively first, so two processes
// sharing a base cannot both take one directory.
func (s *Store) makeVolume(ctx context.Context, base Dir, dir, pvName string, settings backend.Directory) (bool, error) {
	parent, parents, leaf, err := s.markLeaf(ctx, base, dir, pvName)
	if err != nil {
		return false, err
	}
	defer parent.Close()
	mode := backend.DefaultDirectoryMode
	if settings.Mode != nil {
		mode = *settings.Mode
	}
	err = parent.Mkdir(ctx, leaf, mode.Perm())
	switch {
	case errors.Is(err, fs.ErrExist):
		// The marker is ours, so an existing directory is ours too, from an
		// earlier call; OpenDir below checks it is a real directory.
	case err != nil:
		return true, err
	}
	if err := s.did(stepVolumeMade); err != nil {
		return true, err
	}
	volume, err := parent.OpenDir(ctx, leaf)
	if err != nil {
		return true, err
	}
	err = setOwnerAndMode(ctx, volume, settings, mode)
	if cerr := volume.Close(); err == nil && cerr != nil {
		return true, cerr
	}
	if errors.As(err, new(*ownerRefusedError)) {
		return s.undoVolume(ctx, base, parent, parents, leaf, err)
	}
	return true, err
}

// markLeaf makes the folders above dir and creates its owner marker
// naming pvName, or checks that an existing one names it, and returns the
// folder that holds dir, open, the folders' names and dir's own.
func (s *Store) markLeaf(ctx context.Context, base Dir, dir, pvName string) (Dir, []string, string, error) {
	components := strings.Split(dir, "/")
	parents, leaf := components[:len(components)-1], components[len(components)-1]
	parent, err := createDir(ctx, base, parents)
	if err != nil {
		s.removeEmptyParents(ctx, base, parents)
		return nil, nil, "", err
	}
	err = claimMarker(ctx, parent, leaf, pvName)
	if errors.Is(err, errEmptyMarker) {
		err = s.takeEmptyMarker(ctx, base, parent, dir, leaf, pvName)
	}
	if err != nil {
		parent.Close()
		s.removeEmptyParents(ctx, base, parents)
		return nil, nil, "", err
	}
	return parent, parents, leaf, nil
}

// ownerRefusedError is a chown the file system refused, with what to do.
type ownerRefusedError struct {
	uid, gid int
	err      error
}

func (e *ownerRefusedError) Error() string {
	return fmt.Sprintf("cannot give the directory to uid %d, gid %d (-1: unchanged): %v; only root may: "+
		"run the manager as root for a hostPath backend, export the NFS share with no_root_squash (which gives root on the export to every client that reaches the server), "+
		"or remove uid and gid from the ProvisionerConfig and the StorageClass and give pods access through mode",
		e.uid, e.gid, e.err)
}

func (e *ownerRefusedError) Unwrap() error { return e.err }

// undoneError is the error of a volume directory that was made and then
// removed again, with its owner marker.
type undoneError struct {
	err error
}

func (e *undoneError) Error() string {
	return e.err.Error() + " (the directory was removed again)"
}

func (e *undoneError) Unwrap() error { return e.err }

// setOwnerAndMode gives the directory its owner first, since a chown may
// clear the setuid and setgid bits, then its mode: Mkdir's is subject to
// the umask.
func setOwnerAndMode(ctx context.Context, volume Dir, settings backend.Directory, mode fs.FileMode) error {
	if owner := ownerOf(settings); owner != NoOwner {
		uid, gid := owner.UID, owner.GID
		err := volume.Chown(ctx, uid, gid)
		if errors.Is(err, fs.ErrPermission) {
			return &ownerRefusedError{uid: uid, gid: gid, err: err}
		}
		if err != nil {
			return fmt.Errorf("cannot give the directory to uid %d, gid %d (-1: unchanged): %w", uid, gid, err)
		}
	}
	if err := volume.Chmod(ctx, mode); err != nil {
		return fmt.Errorf("cannot set mode %s: %w", backend.FormatMode(mode), err)
	}
	return nil
}

// undoVolume removes the directory leaf in parent that was just made, then
// its owner marker and the folders above it that are now empty, so a volume
// refused its owner leaves nothing behind. Once both are gone it reports the
// marker no longer the PV's.
func (s *Store) undoVolume(ctx context.Context, base, parent Dir, parents []string, leaf string, cause error) (bool, error) {
	if err := parent.Remove(ctx, leaf); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return true, errors.Join(cause, fmt.Errorf("cannot remove the directory again: %w", err))
	}
	if err := parent.Remove(ctx, markerName(leaf)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return true, errors.Join(cause, fmt.Errorf("cannot remove the owner marker again: %w", err))
	}
	s.removeEmptyParents(ctx, base, parents)
	return false, &undoneError{err: cause}
}

// Why a directory is not this volume's.
var (
	errExists       = fmt.Errorf("%w: it already exists", errNotOurs)
	errOtherVolumes = fmt.Errorf("%w: it belongs to another volume", errNotOurs)
	// errEmptyMarker is a marker that names no volume: one whose create
	// was carried out and its data never written, by a process killed in
	// between or an NFS server whose reply to CREATE was lost.
	errEmptyMarker = fmt.Errorf("%w: its owner marker is empty", errNotOurs)
)

// takeEmptyMarker writes pvName into the empty owner marker of leaf in
// parent (dir below base), when nothing else can be making that
// directory: the directory does not exist, and no record but pvName's
// names it. Every create writes its record before its marker, so an empty
// marker that no other record explains is what an earlier try of this
// volume left, or debris of a create that was abandoned; taking it is
// what a retried create must do to ever succeed. Otherwise the marker is
// left alone and the directory refused as another volume's.
func (s *Store) takeEmptyMarker(ctx context.Context, base, parent Dir, dir, leaf, pvName string) error {
	if _, err := parent.Lstat(ctx, leaf); !errors.Is(err, fs.ErrNotExist) {
		return errOtherVolumes
	}
	other, err := s.otherRecord(ctx, base, dir, pvName)
	if err != nil {
		return fmt.Errorf("cannot tell whose the empty owner marker is: %w", err)
	}
	if other != "" {
		return fmt.Errorf("%w: another volume, %s, is being made there", errOtherVolumes, other)
	}
	if err := parent.RewriteFile(ctx, markerName(leaf), []byte(pvName), 0o600); err != nil {
		return fmt.Errorf("cannot write the empty owner marker: %w", err)
	}
	klog.FromContext(ctx).Info("Took an empty owner marker an earlier try left", "pv", pvName, "dir", dir)
	return nil
}

// otherRecord returns the name of a PersistentVolume other than pvName
// whose record names dir, if any.
func (s *Store) otherRecord(ctx context.Context, base Dir, dir, pvName string) (string, error) {
	journal, err := s.openJournal(ctx, base)
	if err != nil {
		return "", err
	}
	defer journal.Close()
	names, err := journal.ReadNames(ctx)
	if err != nil {
		return "", fmt.Errorf("cannot list the volume records: %w", err)
	}
	for _, name := range names {
		record, err := readRecord(ctx, journal, name)
		if err != nil {
			// Incomplete or damaged: no create in flight wrote it, since
			// a record is whole on disk before its marker is made.
			continue
		}
		if record.Dir == dir && record.PVName != pvName {
			return record.PVName, nil
		}
	}
	return "", nil
}

// claimMarker records pvName as the owner of leaf in parent, or checks that
// an existing marker names it. An existing directory without a marker was not
// made for this PV, so it is refused.
func claimMarker(ctx context.Context, parent Dir, leaf, pvName string) error {
	created, err := takeMarker(ctx, parent, leaf, pvName)
	if err != nil || !created {
		return err
	}
	if _, err := parent.Lstat(ctx, leaf); !errors.Is(err, fs.ErrNotExist) {
		if rmErr := parent.Remove(ctx, markerName(leaf)); rmErr != nil {
			return fmt.Errorf("directory already exists and cannot remove owner marker: %w", rmErr)
		}
		return errExists
	}
	return nil
}

// takeMarker creates the owner marker of leaf in parent naming pvName, or
// checks that an existing one names it, and reports whether it created it.
// It is created exclusively, so two processes sharing a base cannot both
// take one directory.
func takeMarker(ctx context.Context, parent Dir, leaf, pvName string) (bool, error) {
	f, err := parent.CreateFile(ctx, markerName(leaf), []byte(pvName), 0o600)
	if errors.Is(err, fs.ErrExist) {
		owner, err := readMarker(ctx, parent, leaf)
		if err != nil {
			return false, err
		}
		switch owner {
		case pvName:
			return false, nil
		case "":
			return false, errEmptyMarker
		}
		return false, errOtherVolumes
	}
	if err != nil {
		return false, fmt.Errorf("cannot create owner marker: %w", err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("cannot write owner marker: %w", err)
	}
	return true, nil
}

// maxMarkerSize bounds what is read of an owner marker: longer than any PV
// name, so a longer marker names none.
const maxMarkerSize = 1 << 10

func readMarker(ctx context.Context, parent Dir, leaf string) (string, error) {
	owner, _, err := parent.ReadFile(ctx, markerName(leaf), maxMarkerSize)
	if err != nil {
		return "", fmt.Errorf("cannot read owner marker: %w", err)
	}
	return string(owner), nil
}

func markerName(leaf string) string {
	return "." + leaf + markerSuffix
}

// openDir opens the directory components below d one at a time, never
// through a symlink.
func openDir(ctx context.Context, d Dir, components []string) (Dir, error) {
	return walkDir(ctx, d, components, openChild)
}

// createDir is openDir creating the missing components; it refuses to
// descend into another volume's directory.
func createDir(ctx context.Context, d Dir, components []string) (Dir, error) {
	return walkDir(ctx, d, components, createChild)
}

// walkDir opens the directory components below d, each with child. For no
// component it returns d, which its caller keeps open and closes.
func walkDir(ctx context.Context, d Dir, components []string, child func(ctx context.Context, cur Dir, name string) (Dir, error)) (Dir, error) {
	var cur Dir = borrowed{d}
	for _, c := range components {
		next, err := child(ctx, cur, c)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// borrowed is a Dir its holder must not close: the one walkDir was given.
type borrowed struct {
	Dir
}

func (borrowed) Close() error { return nil }

func createChild(ctx context.Context, cur Dir, name string) (Dir, error) {
	if _, err := cur.Lstat(ctx, markerName(name)); err == nil {
		return nil, fmt.Errorf("%q is the directory of another volume", name)
	}
	if err := cur.Mkdir(ctx, name, parentMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return openChild(ctx, cur, name)
}

func openChild(ctx context.Context, cur Dir, name string) (Dir, error) {
	return cur.OpenDir(ctx, name)
}

// errUnmarked refuses to release a directory without an owner marker.
var errUnmarked = errors.New("the directory has no owner marker")

// removal says how a directory is released: by which onDelete policy, and
// whether one without an owner marker may go.
type removal struct {
	onDelete backend.OnDeletePolicy
	unmarked bool
	// undecided, when set, refuses to release an existing directory: its
	// fate is not known.
	undecided error
	// adoptedFrom is the volume whose directory this one adopted
	// (backend.AnnAdoptedFrom): it handed the directory on, so it does not
	// hold up the release.
	adoptedFrom string
}

// DeleteAt applies the policy recorded on a PersistentVolume (see
// backend.VolumeOnDelete), which may opt in to the release of an unmarked
// directory with backend.AnnDeleteUnmarked, to its directory dir, as
// DeleteByName does.
func (s *Store) DeleteAt(ctx context.Context, pv *corev1.PersistentVolume, dir string) error {
	onDelete, err := backend.VolumeOnDelete(pv, s.cfg.OnDelete)
	if err != nil {
		return fmt.Errorf("cannot delete volume %s: %w", pv.Name, err)
	}
	return s.deleteDir(ctx, pv.Name, dir, removal{
		onDelete: onDelete, unmarked: pv.Annotations[backend.AnnDeleteUnmarked] == "true",
		adoptedFrom: pv.Annotations[backend.AnnAdoptedFrom],
	})
}

// DeleteUndecided is Delete for a PersistentVolume whose fate is not known:
// a missing directory is deleted already, an existing one is kept and cause
// returned.
func (s *Store) DeleteUndecided(ctx context.Context, pv *corev1.PersistentVolume, cause error) error {
	dir, err := s.cfg.OwnDir(pv)
	if err != nil {
		return fmt.Errorf("cannot delete volume %s: %w", pv.Name, err)
	}
	return s.deleteDir(ctx, pv.Name, dir, removal{undecided: cause})
}

// DeleteByName applies the store's onDelete policy to the directory of PV
// pvName, dir below the base, as read from the PersistentVolume, then drops
// its record. A missing directory is deleted already. A directory another
// volume still uses, or whose owner marker names another PV, is refused,
// and so is one without an owner marker unless the policy is Retain.
func (s *Store) DeleteByName(ctx context.Context, pvName, dir string) error {
	return s.deleteDir(ctx, pvName, dir, removal{onDelete: s.cfg.OnDelete})
}

// deleteDir releases dir as how says, under the lock. A deleted directory
// leaves its place under the lock and its files are purged after, so a
// large volume does not hold up other claims.
func (s *Store) deleteDir(ctx context.Context, pvName, dir string, how removal) error {
	if err := CheckDir(dir); err != nil {
		return fmt.Errorf("directory %q refused: %w", dir, err)
	}
	s.mu.Lock()
	err := s.releaseLocked(ctx, pvName, dir, how)
	s.mu.Unlock()
	if err != nil || how.onDelete != backend.OnDeleteDelete {
		return err
	}
	if err := s.purge(ctx); err != nil {
		return fmt.Errorf("cannot delete the files of directory %q, moved to %s: %w", dir, trashDir, err)
	}
	return nil
}

// releaseLocked releases a checked dir, under the lock: a deleted
// directory is only moved into trashDir.
func (s *Store) releaseLocked(ctx context.Context, pvName, dir string, how removal) error {
	logger := klog.FromContext(ctx).WithValues("pv", pvName, "dir", dir, "onDelete", how.onDelete)
	if err := s.checkOverlap(ctx, pvName, dir, how.adoptedFrom); err != nil {
		return fmt.Errorf("refusing to remove: %w", err)
	}
	found, err := s.releaseMarked(ctx, dir, pvName, how)
	if errors.Is(err, errUnmarked) {
		return fmt.Errorf("refusing to remove directory %q: %w; it may hold retained or archived data, "+
			"or data of a volume made by hand: set the annotation %s: \"true\" on the PersistentVolume to release it anyway",
			dir, err, backend.AnnDeleteUnmarked)
	}
	if err != nil {
		return fmt.Errorf("cannot remove directory %q: %w", dir, err)
	}
	delete(s.reservations, pvName)
	if err := s.forget(ctx, pvName, dir); err != nil {
		return err
	}
	if !found {
		// Success keeps Delete idempotent, unless the record folder is gone
		// too: then the base itself is not what it was.
		if err := s.checkJournal(ctx); err != nil {
			return err
		}
		logger.Info("Volume directory not found, nothing to remove")
		return nil
	}
	logger.V(2).Info("Volume directory released")
	return nil
}

// checkJournal reports an error when the record folder is missing.
func (s *Store) checkJournal(ctx context.Context) error {
	base, err := s.openBase(ctx)
	if err != nil {
		return err
	}
	defer base.Close()
	journal, err := s.openJournal(ctx, base)
	if err != nil {
		return err
	}
	return journal.Close()
}

// releaseMarked applies the policy to a directory whose owner marker, if
// any, names pvName, and reports whether the directory existed.
func (s *Store) releaseMarked(ctx context.Context, dir, pvName string, how removal) (bool, error) {
	base, err := s.openBase(ctx)
	if err != nil {
		return false, err
	}
	defer base.Close()
	components := strings.Split(dir, "/")
	parents, leaf := components[:len(components)-1], components[len(components)-1]
	parent, err := openDir(ctx, base, parents)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer parent.Close()
	owner, err := readMarker(ctx, parent, leaf)
	marked := true
	switch {
	case errors.Is(err, fs.ErrNotExist):
		marked = false
	case err != nil:
		return false, err
	case owner != pvName:
		return false, errors.New("directory belongs to another volume")
	}
	info, err := parent.Lstat(ctx, leaf)
	found := err == nil
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return false, err
	case !info.IsDir():
		return false, fmt.Errorf("%q is not a directory (%s)", leaf, info.Mode().Type())
	case how.undecided != nil:
		return false, how.undecided
	case !marked && !how.unmarked && how.onDelete != backend.OnDeleteRetain:
		return false, errUnmarked
	default:
		if err := s.applyPolicy(ctx, base, parent, leaf, how.onDelete); err != nil {
			return false, err
		}
	}
	if err := dropBeside(ctx, base, parent, leaf); err != nil {
		return false, err
	}
	s.removeEmptyParents(ctx, base, parents)
	return found, nil
}

// dropBeside removes what lies beside the released directory leaf in
// parent: the half copy a clone left, if any, moved into the trash
// whatever the policy (it was never a volume), then the owner marker.
func dropBeside(ctx context.Context, base, parent Dir, leaf string) error {
	if err := dropCopy(ctx, base, parent, leaf); err != nil {
		return err
	}
	if err := parent.Remove(ctx, markerName(leaf)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot remove owner marker: %w", err)
	}
	return nil
}

func dropCopy(ctx context.Context, base, parent Dir, leaf string) error {
	_, err := parent.Lstat(ctx, copyingName(leaf))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("cannot look up the copy of a clone: %w", err)
	}
	if err := moveAside(ctx, base, parent, copyingName(leaf)); err != nil {
		return fmt.Errorf("cannot remove the copy of a clone: %w", err)
	}
	return nil
}

// applyPolicy applies the onDelete policy to the existing directory leaf in
// parent, below base.
func (s *Store) applyPolicy(ctx context.Context, base, parent Dir, leaf string, onDelete backend.OnDeletePolicy) error {
	switch onDelete {
	case backend.OnDeleteRetain:
		return nil
	case backend.OnDeleteArchive:
		archived := archivePrefix + leaf + "-" + s.now().UTC().Format(archiveTimeFormat)
		if err := checkFree(ctx, parent, archived); err != nil {
			return err
		}
		return parent.Rename(ctx, leaf, archived)
	case backend.OnDeleteArchiveAsNFSSubdir:
		return s.archiveAtTop(ctx, base, parent, leaf)
	default:
		return moveAside(ctx, base, parent, leaf)
	}
}

// archiveAtTop moves the directory leaf in parent to archived-<leaf> at the
// top of base, as nfs-subdir-external-provisioner archives, or, where that
// name is taken, to archived-<leaf>-<UTC timestamp>, where
// nfs-subdir-external-provisioner's rename would fail on every retry.
func (s *Store) archiveAtTop(ctx context.Context, base, parent Dir, leaf string) error {
	archived := backend.NFSSubdirArchive(leaf)
	if _, err := base.Lstat(ctx, archived); !errors.Is(err, fs.ErrNotExist) {
		archived += "-" + s.now().UTC().Format(archiveTimeFormat)
		if err := checkFree(ctx, base, archived); err != nil {
			return err
		}
	}
	klog.FromContext(ctx).V(2).Info("Archiving the directory at the top of the base", "archive", archived)
	return parent.Move(ctx, leaf, base, archived)
}

// checkFree refuses to archive onto an existing name: rename(2) replaces an
// empty directory silently.
func checkFree(ctx context.Context, dir Dir, name string) error {
	if _, err := dir.Lstat(ctx, name); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot archive: %q already exists", name)
	}
	return nil
}

// moveAside moves the directory leaf in parent, below base, into trashDir
// under a random name, so it collides with nothing. The move goes from
// handle to handle, so no symlink can redirect it. One on another file
// system than the base cannot be moved there and is deleted in place.
func moveAside(ctx context.Context, base, parent Dir, leaf string) error {
	trash, err := createDir(ctx, base, []string{trashDir})
	if err != nil {
		return fmt.Errorf("cannot open %s: %w", trashDir, err)
	}
	defer trash.Close()
	err = parent.Move(ctx, leaf, trash, rand.Text())
	if errors.Is(err, syscall.EXDEV) {
		return parent.RemoveAll(ctx, leaf)
	}
	if err != nil {
		return fmt.Errorf("cannot move the directory to %s: %w", trashDir, err)
	}
	return nil
}

// purge deletes the directories in trashDir: the one a delete just moved
// there, and any a process that stopped before deleting them left. It runs
// outside the lock; each directory is deleted by one purge only.
func (s *Store) purge(ctx context.Context) error {
	trash, names, err := s.takeTrash(ctx)
	if err != nil || trash == nil {
		return err
	}
	defer trash.Close()
	defer s.dropTrash(ctx, names)
	for _, name := range names {
		if err := s.did(stepDelete); err != nil {
			return err
		}
		if err := trash.RemoveAll(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// takeTrash opens trashDir, if there is one, and takes the directories in it
// that no other purge has taken.
func (s *Store) takeTrash(ctx context.Context) (Dir, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	base, err := s.openBase(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer base.Close()
	trash, err := openDir(ctx, base, []string{trashDir})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("cannot open %s: %w", trashDir, err)
	}
	entries, err := trash.ReadNames(ctx)
	if err != nil {
		trash.Close()
		return nil, nil, fmt.Errorf("cannot list %s: %w", trashDir, err)
	}
	var names []string
	for _, name := range entries {
		if !s.purging[name] {
			s.purging[name] = true
			names = append(names, name)
		}
	}
	return trash, names, nil
}

// dropTrash gives back the directories a purge took, and removes trashDir
// once no purge is under way: a move into it holds the lock too.
func (s *Store) dropTrash(ctx context.Context, names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		delete(s.purging, name)
	}
	if len(s.purging) > 0 {
		return
	}
	base, err := s.openBase(ctx)
	if err != nil {
		return
	}
	defer base.Close()
	// Fails while a directory is left in it, which the next purge retries.
	_ = base.Remove(ctx, trashDir)
}

// removeEmptyParents removes the folders of parents that are now empty,
// deepest first, never the base. A folder that is not empty ends the walk.
func (s *Store) removeEmptyParents(ctx context.Context, base Dir, parents []string) {
	for i := len(parents); i > 0; i-- {
		dir, err := openDir(ctx, base, parents[:i-1])
		if err != nil {
			return
		}
		err = removeEmptyDir(ctx, dir, parents[i-1])
		dir.Close()
		if err != nil {
			return
		}
	}
}

// removeEmptyDir removes an empty folder unless it is a volume: an empty
// volume is still somebody's.
func removeEmptyDir(ctx context.Context, parent Dir, name string) error {
	if _, err := parent.Lstat(ctx, markerName(name)); err == nil {
		return fmt.Errorf("%q is a volume", name)
	}
	info, err := parent.Lstat(ctx, name)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%q is not a directory", name)
	}
	return parent.Remove(ctx, name)
}
