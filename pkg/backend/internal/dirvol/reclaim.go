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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/pkg/backend"
)

// Delete applies the onDelete policy to the directory a PersistentVolume
// names, which OwnDir must place below the base.
func (s *Store) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	dir, err := s.cfg.OwnDir(pv)
	if err != nil {
		return fmt.Errorf("cannot delete volume %s: %w", pv.Name, err)
	}
	return s.DeleteAt(ctx, pv, dir)
}

// Saved settles the record of an unsaved volume whose PersistentVolume,
// saved, exists, by the directory below the base that OwnDir finds in each.
// A saved volume of another node makes the recorded directory one an
// earlier try made on this node: deleteUnused removes it when empty.
// One directory: the record is dropped. Two apart: the recorded one is a
// second directory made for the same PV (by an earlier attempt under another
// pattern) and is removed like a deleted volume. One inside the other, or a
// saved PersistentVolume that names no directory of this store (another
// server, base or source): the recorded directory may hold the volume's
// data, so it is kept and its record dropped (keepUnmatched). A record
// kept instead would be deleted by the reclaim that follows the
// PersistentVolume's deletion, even under a Retain policy.
func (s *Store) Saved(ctx context.Context, volume, saved *corev1.PersistentVolume) error {
	dir, err := s.cfg.OwnDir(volume)
	if err != nil {
		return fmt.Errorf("cannot drop the record of volume %s: %w", volume.Name, err)
	}
	savedDir, err := s.cfg.OwnDir(saved)
	switch {
	case errors.Is(err, backend.ErrOtherNode):
		return s.deleteUnused(ctx, volume.Name, dir)
	case err != nil:
		return s.keepUnmatched(ctx, volume.Name, dir, fmt.Sprintf("its saved PersistentVolume names no directory of this store: %v", err))
	case dir == savedDir:
		return s.Forget(ctx, volume.Name, dir)
	case backend.Overlaps(dir, savedDir):
		return s.keepUnmatched(ctx, volume.Name, dir, fmt.Sprintf("it and the saved directory %q lie one inside the other", savedDir))
	}
	klog.FromContext(ctx).Info("Removing a second directory made for a saved volume", "pv", volume.Name, "dir", dir, "savedDir", savedDir)
	return s.DeleteByName(ctx, volume.Name, dir)
}

// deleteUnused deletes dir, made here for PV pvName whose PersistentVolume
// lives on another node: a directory an earlier try placed on this node
// before the claim went to another (this node was removed, or its agent
// cut off, meanwhile). Empty, it never held data, and it goes whatever the
// onDelete policy, as a create undone would; holding files, it may be a
// volume's after all (a node renamed under its disk), so it is kept.
func (s *Store) deleteUnused(ctx context.Context, pvName, dir string) error {
	empty, err := s.isEmpty(ctx, dir)
	if err != nil {
		return fmt.Errorf("cannot tell whether directory %q, made for PV %s of another node, holds files: %w", dir, pvName, err)
	}
	if !empty {
		return s.keepUnmatched(ctx, pvName, dir, "it holds files, and its saved PersistentVolume lives on another node")
	}
	klog.FromContext(ctx).Info("Removing an empty directory made for a volume that lives on another node", "pv", pvName, "dir", dir)
	return s.deleteDir(ctx, pvName, dir, removal{onDelete: backend.OnDeleteDelete})
}

// keepUnmatched keeps dir, made for PV pvName, which Saved cannot tell apart
// from the directory of the saved PersistentVolume, and drops its record:
// the record is what reclaim deletes once a claim has no PersistentVolume,
// and this one had. The log says where the directory is, for an admin to
// remove it by hand if it is no volume's.
func (s *Store) keepUnmatched(ctx context.Context, pvName, dir, why string) error {
	klog.FromContext(ctx).Info("Keeping a directory made for a volume whose PersistentVolume may use it, and dropping its record so that nothing deletes it",
		"pv", pvName, "dir", dir, "reason", why)
	return s.Forget(ctx, pvName, dir)
}

// isEmpty reports whether dir holds no entry, or is missing.
func (s *Store) isEmpty(ctx context.Context, dir string) (bool, error) {
	if err := CheckDir(dir); err != nil {
		return false, fmt.Errorf("directory %q refused: %w", dir, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	base, err := s.openBase(ctx)
	if err != nil {
		return false, err
	}
	defer base.Close()
	d, err := openDir(ctx, base, strings.Split(dir, "/"))
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer d.Close()
	names, err := d.ReadSomeNames(ctx, 1)
	if err != nil {
		return false, err
	}
	return len(names) == 0, nil
}
