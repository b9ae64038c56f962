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
	"slices"

	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/pkg/backend"
)

// Release applies, as DeleteByName does, the onDelete policy given with each
// volume of removed to the directory below the base whose owner marker
// names it: the PersistentVolumes someone else deleted while this store
// could not, such as those of a node that was gone. It leaves alone a
// directory whose PersistentVolume exists, or that a record names (its
// PersistentVolume may still come), and every directory whose marker names
// another volume, so a deleted PersistentVolume that is not in removed keeps
// its directory.
//
// It returns the names that need no more work, released or with no
// directory here, in the order given; a name whose directory is left, or
// that may be in a folder the walk could not read, is not among them, and
// the caller asks again later. Options.Volumes is required.
func (s *Store) Release(ctx context.Context, removed []backend.RemovedVolume) ([]string, error) {
	if len(removed) == 0 {
		return nil, nil
	}
	if s.cfg.Options.Volumes == nil {
		return nil, errors.New("cannot release volumes: the store does not know which PersistentVolumes exist")
	}
	volumes, walkErr := s.findVolumes(ctx)
	if walkErr != nil && volumes == nil {
		return nil, fmt.Errorf("cannot find the volume directories: %w", walkErr)
	}
	pvNames, policies, refused := byName(removed)
	// left counts the directories of each name that are still there; a
	// name with none found has none only if the walk read every folder.
	left := map[string]int{}
	if walkErr == nil {
		for _, name := range pvNames {
			left[name] = 0
		}
	}
	for _, v := range volumes {
		if _, ok := policies[v.pvName]; ok {
			left[v.pvName]++
		}
	}
	errs := []error{walkErr, refused}
	purge := false
	for _, v := range volumes {
		if left[v.pvName] == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		onDelete := policies[v.pvName]
		done, err := s.releaseUnclaimed(ctx, v, onDelete)
		if err != nil {
			errs = append(errs, fmt.Errorf("cannot release directory %q of PV %s: %w", v.dir, v.pvName, err))
		}
		if done {
			left[v.pvName]--
			purge = purge || onDelete == backend.OnDeleteDelete
		}
	}
	if purge {
		if err := s.purge(ctx); err != nil {
			errs = append(errs, fmt.Errorf("cannot delete the files of released directories, moved to %s: %w", trashDir, err))
		}
	}
	return doneNames(pvNames, left), errors.Join(errs...)
}

// byName returns the names of removed, in order, and their policies, but
// for those whose policy is none of Delete, Retain and Archive: nothing is
// released in doubt, and their names are not done.
func byName(removed []backend.RemovedVolume) ([]string, map[string]backend.OnDeletePolicy, error) {
	pvNames := make([]string, 0, len(removed))
	policies := map[string]backend.OnDeletePolicy{}
	var errs []error
	for _, volume := range removed {
		if !volume.OnDelete.Known() {
			errs = append(errs, fmt.Errorf("cannot release PV %s: onDelete %q is not one of Delete, Retain, Archive", volume.PVName, volume.OnDelete))
			continue
		}
		pvNames = append(pvNames, volume.PVName)
		policies[volume.PVName] = volume.OnDelete
	}
	return pvNames, policies, errors.Join(errs...)
}

// doneNames returns the names of pvNames known to have no directory left,
// once each.
func doneNames(pvNames []string, left map[string]int) []string {
	var done []string
	for _, name := range pvNames {
		count, known := left[name]
		if !known || count > 0 || slices.Contains(done, name) {
			continue
		}
		done = append(done, name)
	}
	return done
}

// releaseUnclaimed applies onDelete to the volume directory v under
// the lock, unless its PersistentVolume exists or may still come, and
// reports whether it is released. A Create holds the lock from its record
// to its directory, so a volume being provisioned is on record here.
func (s *Store) releaseUnclaimed(ctx context.Context, v found, onDelete backend.OnDeletePolicy) (bool, error) {
	logger := klog.FromContext(ctx).WithValues("pv", v.pvName, "dir", v.dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	exists, err := s.cfg.Options.Volumes.Exists(v.pvName)
	if err != nil {
		return false, fmt.Errorf("cannot check whether the PersistentVolume exists: %w", err)
	}
	if exists {
		logger.V(2).Info("PersistentVolume exists, leaving its directory alone")
		return false, nil
	}
	recorded, err := s.recorded(ctx, v)
	if err != nil {
		return false, err
	}
	if recorded {
		logger.V(2).Info("Volume on record, whose PersistentVolume may still come, leaving its directory alone")
		return false, nil
	}
	if err := s.releaseLocked(ctx, v.pvName, v.dir, removal{onDelete: onDelete}); err != nil {
		return false, err
	}
	return true, nil
}
