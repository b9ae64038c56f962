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
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

// found is a volume directory the walk found: dir below the base, and the
// PersistentVolume its owner marker names.
type found struct {
	dir, pvName string
}

// findVolumes walks the base for volume directories. A base whose record
// folder is missing is not the one volumes were made in, and is not walked.
// The walk goes as deep as a pattern renders, never through a symlink, into
// no hidden, archived or marked volume directory, so it reads no volume's
// data (a retained directory, its marker dropped, is walked like a pattern
// folder); a folder it cannot read is reported and the others walked.
func (s *Store) findVolumes(ctx context.Context) ([]found, error) {
	base, err := s.openBase(ctx)
	if err != nil {
		return nil, err
	}
	defer base.Close()
	if err := s.prepareJournal(ctx, base); err != nil {
		return nil, err
	}
	w := &volumeWalk{}
	w.folder(ctx, base, nil)
	return w.volumes, errors.Join(w.errs...)
}

// volumeWalk collects the volume directories of the folders it walks, and
// what it could not read.
type volumeWalk struct {
	volumes []found
	errs    []error
}

// folder collects the volumes in folder, the directory parents below the
// base, then walks its subfolders.
func (w *volumeWalk) folder(ctx context.Context, folder Dir, parents []string) {
	names, err := folder.ReadNames(ctx)
	if err != nil {
		w.errs = append(w.errs, fmt.Errorf("cannot list %q: %w", path.Join(append([]string{"."}, parents...)...), err))
		return
	}
	slices.Sort(names)
	leaves := map[string]bool{}
	for _, name := range names {
		if leaf, ok := markerLeaf(name); ok && CheckDir(path.Join(path.Join(parents...), leaf)) == nil {
			leaves[leaf] = true
			w.volume(ctx, folder, parents, leaf)
		}
	}
	// A volume one level further down would have more components than a
	// pattern may render.
	if len(parents)+2 > maxDepth {
		return
	}
	for _, name := range names {
		// CheckDir refuses what no pattern renders: hidden folders (the
		// records, the trash) and archived volumes.
		if leaves[name] || CheckDir(path.Join(path.Join(parents...), name)) != nil {
			continue
		}
		w.subfolder(ctx, folder, parents, name)
	}
}

// subfolder walks the directory name in folder; anything else, a symlink
// included, is left alone.
func (w *volumeWalk) subfolder(ctx context.Context, folder Dir, parents []string, name string) {
	info, err := folder.Lstat(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		w.errs = append(w.errs, fmt.Errorf("cannot look up %q: %w", path.Join(path.Join(parents...), name), err))
		return
	}
	if !info.IsDir() {
		return
	}
	child, err := folder.OpenDir(ctx, name)
	if err != nil {
		w.errs = append(w.errs, fmt.Errorf("cannot open %q: %w", path.Join(path.Join(parents...), name), err))
		return
	}
	defer child.Close()
	w.folder(ctx, child, append(slices.Clone(parents), name))
}

// volume collects the volume leaf in folder if its owner marker names a
// PersistentVolume.
func (w *volumeWalk) volume(ctx context.Context, folder Dir, parents []string, leaf string) {
	dir := path.Join(path.Join(parents...), leaf)
	owner, err := readMarker(ctx, folder, leaf)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		w.errs = append(w.errs, fmt.Errorf("directory %q: %w", dir, err))
		return
	}
	if errs := validation.IsDNS1123Subdomain(owner); len(errs) > 0 {
		klog.FromContext(ctx).V(2).Info("Owner marker names no PersistentVolume, leaving its directory alone", "dir", dir, "reason", strings.Join(errs, "; "))
		return
	}
	w.volumes = append(w.volumes, found{dir: dir, pvName: owner})
}

// markerLeaf returns the volume directory an owner marker's name is of.
func markerLeaf(name string) (string, bool) {
	inner, ok := strings.CutPrefix(name, ".")
	if !ok {
		return "", false
	}
	leaf, ok := strings.CutSuffix(inner, markerSuffix)
	return leaf, ok && leaf != ""
}

// recorded reports whether a record names the volume directory v.
func (s *Store) recorded(ctx context.Context, v found) (bool, error) {
	base, err := s.openBase(ctx)
	if err != nil {
		return false, err
	}
	defer base.Close()
	journal, err := s.openJournal(ctx, base)
	if err != nil {
		return false, err
	}
	defer journal.Close()
	_, err = journal.Lstat(ctx, recordName(v.pvName, v.dir))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("cannot look up the record: %w", err)
	}
}
