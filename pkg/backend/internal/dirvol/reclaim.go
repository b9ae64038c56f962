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
	"fmt"

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
// One directory: the record is dropped. Two apart: the recorded one is a
// second directory made for the same PV (by an earlier attempt under another
// pattern) and is removed like a deleted volume. One inside the other: it
// cannot go without touching the saved volume's data, so the record is kept
// and an error returned. A volume OwnDir refuses keeps the record too:
// nothing is deleted in doubt.
func (s *Store) Saved(ctx context.Context, volume, saved *corev1.PersistentVolume) error {
	dir, err := s.cfg.OwnDir(volume)
	if err != nil {
		return fmt.Errorf("cannot drop the record of volume %s: %w", volume.Name, err)
	}
	savedDir, err := s.cfg.OwnDir(saved)
	if err != nil {
		return fmt.Errorf("cannot drop the record of volume %s: its PersistentVolume: %w", volume.Name, err)
	}
	switch {
	case dir == savedDir:
		return s.Forget(ctx, volume.Name, dir)
	case backend.Overlaps(dir, savedDir):
		return fmt.Errorf("cannot tell directory %q of PV %s apart from its saved directory %q: one lies inside the other", dir, volume.Name, savedDir)
	}
	klog.FromContext(ctx).Info("Removing a second directory made for a saved volume", "pv", volume.Name, "dir", dir, "savedDir", savedDir)
	return s.DeleteByName(ctx, volume.Name, dir)
}
