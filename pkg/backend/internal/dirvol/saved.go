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

	"k8s.io/klog/v2"
)

// Saved settles the record of directory dir of PV pvName once that
// PersistentVolume exists and uses directory savedDir below the base. One
// directory: the record is dropped. Two apart: dir is a second directory made
// for the same PV (by an earlier attempt under another pattern) and is
// removed like a deleted volume. One inside the other: dir cannot go without
// touching the saved volume's data, so the record is kept and an error
// returned.
func (s *Store) Saved(ctx context.Context, pvName, dir, savedDir string) error {
	switch {
	case dir == savedDir:
		return s.Forget(ctx, pvName, dir)
	case overlaps(dir, savedDir):
		return fmt.Errorf("cannot tell directory %q of PV %s apart from its saved directory %q: one lies inside the other", dir, pvName, savedDir)
	}
	klog.FromContext(ctx).Info("Removing a second directory made for a saved volume", "pv", pvName, "dir", dir, "savedDir", savedDir)
	return s.Remove(ctx, pvName, dir)
}
