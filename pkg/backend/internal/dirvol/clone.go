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
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// copyingSuffix ends the name of the directory a clone is copied into,
// beside its volume directory, and renamed to it once complete: a hidden
// name, which CheckDir refuses, so no pattern or PersistentVolume names it.
const copyingSuffix = ".provfleet-copying"

// copyingName is where the copy of the volume directory leaf is made.
func copyingName(leaf string) string {
	return "." + leaf + copyingSuffix
}

// stepCopied is the step between a clone's copy and its rename into place.
const stepCopied = "copied"

// CloneSource is the volume a clone copies: its PersistentVolume and its
// directory below the same base, whose owner marker must name it.
type CloneSource struct {
	PVName string
	Dir    string
}

// Clone is Create for a volume that is a copy of source: the claim's
// directory is checked, counted against the capacity budget and recorded
// as Create does, then source is copied (CopyTree, at most the request's
// size) into a hidden directory beside it, which is renamed into place
// once complete and given the mode and owner Create would give it. It runs
// outside the lock, as long as the copy takes; what it copies gets the
// owner the volume's directory gets, if any. Only the rename says the
// copy is complete, so a volume directory is never half a copy.
//
// Calling it again for the same PV returns the directory without copying
// again once a copy completed, and otherwise removes what an earlier try
// copied and copies from scratch: the source may have changed since. A
// copy that fails or is cut short (ctx, a crash) keeps the record, owner
// marker and reservation: DropClone, or the delete of the recorded volume
// that reclaim makes, removes them with the half copy. The source's
// directory gone before the copy completed fails it.
func (s *Store) Clone(ctx context.Context, req Request, source CloneSource) (Volume, Copied, error) {
	if err := CheckDir(source.Dir); err != nil {
		return Volume{}, Copied{}, fmt.Errorf("the source's directory %q refused: %w", source.Dir, err)
	}
	dir, done, err := s.startClone(ctx, req, source)
	if err != nil || done {
		return Volume{Dir: dir}, Copied{}, err
	}
	copied, err := s.copyInto(ctx, req, source, dir)
	if err != nil {
		return Volume{}, copied, fmt.Errorf("cannot copy the source's directory %q into %q: %w", source.Dir, dir, err)
	}
	s.mu.Lock()
	if res := s.reservations[req.PVName]; res != nil {
		res.done = true
	}
	s.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("Volume directory copied", "pv", req.PVName, "dir", dir, "sourcePV", source.PVName,
		"files", copied.Files, "bytes", copied.Bytes, "skipped", copied.Skipped)
	return Volume{Dir: dir}, copied, nil
}

// DropClone removes what Clone made for the request, the half copy
// included, and its record and reservation, whatever the onDelete policy:
// no claim ever had that volume. The directory is the one Clone chose, or
// its pattern's after a restart; any other an earlier process chose is
// removed by the delete of its recorded volume.
func (s *Store) DropClone(ctx context.Context, req Request) error {
	s.mu.Lock()
	dir, err := s.dirFor(req)
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("cannot drop the clone %s: %w", req.PVName, err)
	}
	return s.deleteDir(ctx, req.PVName, dir, removal{onDelete: backend.OnDeleteDelete})
}

// startClone checks, counts and records the clone's directory as Create
// does, and takes its owner marker, under the lock; it reports whether an
// earlier call completed the copy.
func (s *Store) startClone(ctx context.Context, req Request, source CloneSource) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, err := s.dirFor(req)
	if err != nil {
		return "", false, err
	}
	if backend.Overlaps(dir, source.Dir) {
		return "", false, fmt.Errorf("directory %q is, contains or lies inside the directory of the source, %q", dir, source.Dir)
	}
	if err := s.prune(); err != nil {
		return "", false, err
	}
	if err := s.checkOverlap(ctx, req.PVName, dir, ""); err != nil {
		return "", false, err
	}
	if err := s.checkRoom(req.PVName, req.Size); err != nil {
		return "", false, err
	}
	base, err := s.openBase(ctx)
	if err != nil {
		return "", false, fmt.Errorf("cannot create directory %q: %w", dir, err)
	}
	defer base.Close()
	res := s.reservations[req.PVName]
	if res == nil {
		if err := checkSpace(ctx, base, req.Size); err != nil {
			return "", false, err
		}
		res = &reservation{base: s.cfg.Base, dir: dir, size: req.Size}
		s.reservations[req.PVName] = res
	}
	err = s.recordAnd(ctx, base, req, dir, nil, func(ctx context.Context, base Dir) (bool, error) {
		parent, _, _, err := s.markLeaf(ctx, base, dir, req.PVName)
		if err != nil {
			return false, err
		}
		return true, parent.Close()
	})
	if err != nil {
		if !res.done {
			delete(s.reservations, req.PVName)
		}
		if full(err) {
			return "", false, fmt.Errorf("%w: cannot create directory %q: %w", provisioning.ErrNoRoom, dir, err)
		}
		return "", false, fmt.Errorf("cannot create directory %q: %w", dir, err)
	}
	done, err := isDir(ctx, base, dir)
	res.done = res.done || done
	return dir, done, err
}

// isDir reports whether dir below base is a directory.
func isDir(ctx context.Context, base Dir, dir string) (bool, error) {
	parent, leaf, err := openParent(ctx, base, dir)
	if err != nil {
		return false, err
	}
	defer parent.Close()
	info, err := parent.Lstat(ctx, leaf)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	return info.IsDir(), nil
}

// openParent opens the folder that holds dir below base, and returns it
// with dir's own name.
func openParent(ctx context.Context, base Dir, dir string) (Dir, string, error) {
	components := strings.Split(dir, "/")
	parent, err := openDir(ctx, base, components[:len(components)-1])
	return parent, components[len(components)-1], err
}

// copyInto copies source into a fresh hidden directory beside dir, then
// renames it to dir.
func (s *Store) copyInto(ctx context.Context, req Request, source CloneSource, dir string) (Copied, error) {
	base, err := s.openBase(ctx)
	if err != nil {
		return Copied{}, err
	}
	defer base.Close()
	parent, leaf, err := openParent(ctx, base, dir)
	if err != nil {
		return Copied{}, err
	}
	defer parent.Close()
	copying := copyingName(leaf)
	if err := parent.RemoveAll(ctx, copying); err != nil {
		return Copied{}, fmt.Errorf("cannot remove what an earlier try copied: %w", err)
	}
	if err := parent.Mkdir(ctx, copying, 0o700); err != nil {
		return Copied{}, err
	}
	into, err := parent.OpenDir(ctx, copying)
	if err != nil {
		return Copied{}, err
	}
	defer into.Close()
	settings := req.Directory.Or(s.cfg.Directory)
	copied, err := s.copySource(ctx, base, source, into, req.Size.Value(), ownerOf(settings))
	if err != nil {
		return copied, err
	}
	mode := backend.DefaultDirectoryMode
	if settings.Mode != nil {
		mode = *settings.Mode
	}
	if err := setOwnerAndMode(ctx, into, settings, mode); err != nil {
		return copied, err
	}
	if err := s.did(stepCopied); err != nil {
		return copied, err
	}
	// Rename replaces an empty directory: nothing but the copy may be dir.
	if _, err := parent.Lstat(ctx, leaf); !errors.Is(err, fs.ErrNotExist) {
		return copied, fmt.Errorf("cannot put the copy in place: %q exists (%w)", leaf, errors.Join(err, fs.ErrExist))
	}
	if err := parent.Rename(ctx, copying, leaf); err != nil {
		return copied, fmt.Errorf("cannot put the copy in place: %w", err)
	}
	return copied, parent.Sync(ctx)
}

// copySource opens the source's directory, once its owner marker proves it
// the source volume's, copies it into into, and checks that it is still
// there: a source deleted under the copy reads as emptied, not as gone.
func (s *Store) copySource(ctx context.Context, base Dir, source CloneSource, into Dir, limit int64, owner Owner) (Copied, error) {
	parent, leaf, err := openParent(ctx, base, source.Dir)
	if err != nil {
		return Copied{}, fmt.Errorf("cannot open the source: %w", err)
	}
	defer parent.Close()
	if err := checkSourceMarker(ctx, parent, leaf, source.PVName); err != nil {
		return Copied{}, err
	}
	from, err := parent.OpenDir(ctx, leaf)
	if err != nil {
		return Copied{}, fmt.Errorf("cannot open the source: %w", err)
	}
	defer from.Close()
	copied, err := from.CopyTo(ctx, into, limit, owner)
	if err != nil {
		return copied, err
	}
	if err := checkSourceMarker(ctx, parent, leaf, source.PVName); err != nil {
		return copied, fmt.Errorf("the source was deleted during the copy: %w", err)
	}
	if _, err := parent.Lstat(ctx, leaf); err != nil {
		return copied, fmt.Errorf("the source was deleted during the copy: %w", err)
	}
	return copied, nil
}

// ownerOf is the owner settings give a volume's directory, and what a
// clone copies into it, so that the claim's pods may write what they find.
func ownerOf(settings backend.Directory) Owner {
	owner := NoOwner
	if settings.UID != nil {
		owner.UID = int(*settings.UID)
	}
	if settings.GID != nil {
		owner.GID = int(*settings.GID)
	}
	return owner
}

// checkSourceMarker refuses a source directory whose owner marker does not
// name its PersistentVolume: a PersistentVolume's path is written by
// whoever may write PersistentVolumes, and only a volume this store made
// is copied.
func checkSourceMarker(ctx context.Context, parent Dir, leaf, pvName string) error {
	owner, err := readMarker(ctx, parent, leaf)
	if err != nil {
		return fmt.Errorf("the source's directory %q is not a volume of this store: %w", leaf, err)
	}
	if owner != pvName {
		return fmt.Errorf("the source's directory %q is not the directory of volume %s", leaf, pvName)
	}
	return nil
}
