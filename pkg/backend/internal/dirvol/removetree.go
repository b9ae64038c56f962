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
	"strconv"
)

// RemoveBatch is how many names a tree removal lists at a time: what it
// holds in memory however wide a directory is.
const RemoveBatch = 256

// TreeDir is what RemoveTree needs of a directory, with the meaning of
// Dir's methods of the same names: Dir is one, and a Filesystem may give a
// cheaper one of its own (nfsfs, by file handles).
type TreeDir[D any] interface {
	OpenDir(ctx context.Context, name string) (D, error)
	Lstat(ctx context.Context, name string) (fs.FileInfo, error)
	ReadSomeNames(ctx context.Context, limit int) ([]string, error)
	Move(ctx context.Context, oldName string, to D, newName string) error
	Remove(ctx context.Context, name string) error
	Close() error
}

// RemoveTree removes name in parent and everything below it, as
// Dir.RemoveAll does, with memory and open directories bounded whatever
// the tree's shape: a tenant writes the tree, and a deep or wide one must
// not cost the process what other tenants need.
//
// A recursive walk holds a directory open, or a path, per level: a chain
// of directories 40,000 deep exhausts the descriptors, or keeps depth
// times path bytes alive. This walk never goes deeper than two levels
// below parent instead: it empties name (the top) one entry at a time,
// and the directories it finds in a directory of the top are renamed up
// into the top, under names of its own, and emptied in their turn. So it
// holds parent, the top and one directory of it open, each opened from
// the one above by one name (no path, never through ".."), and at most
// RemoveBatch names. Every step is a removal or a rename that the file
// system keeps, so a call that ends (its context done, an error) leaves a
// smaller or flatter tree that the next call goes on with, instead of
// starting over.
//
// A missing name is no error, nor an entry that vanishes under the walk;
// success means name itself was removed, never that it looked empty.
func RemoveTree[D TreeDir[D]](ctx context.Context, parent D, name string) error {
	info, err := parent.Lstat(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot look up %q: %w", name, err)
	}
	if info.IsDir() {
		if err := emptyTop(ctx, parent, name); err != nil {
			return err
		}
	}
	if err := parent.Remove(ctx, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot remove %q: %w", name, err)
	}
	return nil
}

// emptyTop removes everything in the directory name of parent.
func emptyTop[D TreeDir[D]](ctx context.Context, parent D, name string) error {
	top, err := parent.OpenDir(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot open %q: %w", name, err)
	}
	defer top.Close()
	r := &treeRemoval[D]{top: top, prefix: ".provfleet-removing-" + rand.Text() + "-"}
	if err := drain(ctx, top, r.clearTop); err != nil {
		return fmt.Errorf("cannot empty %q: %w", name, err)
	}
	return nil
}

// treeRemoval empties top, the directory a RemoveTree removes.
type treeRemoval[D TreeDir[D]] struct {
	top D
	// prefix and hoisted name the directories renamed up into top: a
	// random prefix no tenant can have chosen, and a count.
	prefix  string
	hoisted uint64
}

// drain lists dir a batch at a time and clears each name listed, until dir
// lists nothing. clearName reports whether it removed or moved something: a
// listing that names only entries already gone, twice running, is a
// server's stale answer, and ends the walk instead of spinning.
func drain[D TreeDir[D]](ctx context.Context, dir D, clearName func(context.Context, string) (bool, error)) error {
	stalled := false
	for {
		names, err := dir.ReadSomeNames(ctx, RemoveBatch)
		if err != nil {
			return fmt.Errorf("cannot list: %w", err)
		}
		if len(names) == 0 {
			return nil
		}
		progress := false
		for _, name := range names {
			if err := ctx.Err(); err != nil {
				return err
			}
			cleared, err := clearName(ctx, name)
			if err != nil {
				return err
			}
			progress = progress || cleared
		}
		if !progress && stalled {
			return fmt.Errorf("the listing keeps naming %d entries that are gone", len(names))
		}
		stalled = !progress
	}
}

// clearTop removes the entry name of the top, emptying it first when it
// is a directory.
func (r *treeRemoval[D]) clearTop(ctx context.Context, name string) (bool, error) {
	info, err := r.top.Lstat(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot look up %q: %w", name, err)
	}
	if info.IsDir() {
		if err := r.hoistFrom(ctx, name); err != nil {
			return false, err
		}
	}
	if err := r.top.Remove(ctx, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("cannot remove %q: %w", name, err)
	}
	return true, nil
}

// hoistFrom empties the directory name of the top: its files are
// removed, its directories renamed up into the top.
func (r *treeRemoval[D]) hoistFrom(ctx context.Context, name string) error {
	dir, err := r.top.OpenDir(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot open %q: %w", name, err)
	}
	defer dir.Close()
	err = drain(ctx, dir, func(ctx context.Context, child string) (bool, error) {
		return r.clearBelow(ctx, dir, child)
	})
	if err != nil {
		return fmt.Errorf("cannot empty %q: %w", name, err)
	}
	return nil
}

// clearBelow removes the entry name of dir, a directory of the top, or
// renames it up into the top when it is a directory.
func (r *treeRemoval[D]) clearBelow(ctx context.Context, dir D, name string) (bool, error) {
	info, err := dir.Lstat(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot look up %q: %w", name, err)
	}
	if !info.IsDir() {
		err := dir.Remove(ctx, name)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("cannot remove %q: %w", name, err)
		}
		return true, nil
	}
	r.hoisted++
	err = dir.Move(ctx, name, r.top, r.prefix+strconv.FormatUint(r.hoisted, 10))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	// Renaming a directory to another parent needs write permission on
	// it (its ".." changes); one that is empty is removed in place.
	if rmErr := dir.Remove(ctx, name); rmErr == nil || errors.Is(rmErr, fs.ErrNotExist) {
		return true, nil
	}
	return false, fmt.Errorf("cannot move %q up to be removed: %w", name, err)
}
