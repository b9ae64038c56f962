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
	"io"
	"io/fs"
)

const (
	// MaxCopyDepth is how deep below its top a tree may go to be copied.
	// Every path of PATH_MAX (4096) bytes, the longest the kernel walks,
	// holds at most 2048 components, so any tree a program reaches by
	// paths is copied whole; a deeper one was built to be, and is refused
	// rather than cost the walk's per-level state (a name and a listing
	// position, about 300 bytes) without bound.
	MaxCopyDepth = 2048
	// copyWindow is how many of the deepest directories of the walk, on
	// each side, stay open below the tops. A climb beyond them reopens its
	// ancestors by name from the top, so a chain of depth d costs about
	// d*d/(2*copyWindow) opens, and the descriptors stay few.
	copyWindow = 4
	// copyChunk is the buffer files are copied through, reused for each.
	copyChunk = 1 << 20
	// maxRelists is how many times a directory's listing starts again
	// when its position expired (the source directory changed under the
	// copy) before the copy fails: a directory that keeps changing would
	// hold the copy forever.
	maxRelists = 8
	// maxSkippedNames is how many names of skipped special files a copy
	// keeps for its report.
	maxSkippedNames = 5
	// copiedModeMask keeps the permission and sticky bits of what is
	// copied. Setuid and setgid are dropped: the copy belongs to the
	// provisioner's user, often root, and a tenant's setuid file must not
	// become a setuid file of root's.
	copiedModeMask = fs.ModePerm | fs.ModeSticky
)

// CopyDir is what CopyTree needs of the directories it reads and writes,
// with the meaning of Dir's methods of the same names: Dir is one, and a
// Filesystem may give a cheaper one of its own (by file handles).
type CopyDir[D any] interface {
	OpenDir(ctx context.Context, name string) (D, error)
	Lstat(ctx context.Context, name string) (fs.FileInfo, error)
	ReadPage(ctx context.Context, from ListPos, limit int) ([]ListEntry, error)
	OpenRead(ctx context.Context, name string) (Reader, error)
	Readlink(ctx context.Context, name string) (string, error)
	Mkdir(ctx context.Context, name string, perm fs.FileMode) error
	CreateFile(ctx context.Context, name string, data []byte, perm fs.FileMode) (File, error)
	Symlink(ctx context.Context, target, name string) error
	Remove(ctx context.Context, name string) error
	Chmod(ctx context.Context, perm fs.FileMode) error
	Chown(ctx context.Context, uid, gid int) error
	Close() error
}

// DescriptorFree is a CopyDir whose open directories hold no descriptor
// (file handles of an NFS server): CopyTree keeps every directory of its
// walk open, a few hundred bytes each at most MaxCopyDepth deep, rather
// than reopen by name those beyond copyWindow, so that a chain of depth d
// costs d opens on each side instead of about d*d/(2*copyWindow).
type DescriptorFree interface {
	HoldsNoDescriptor()
}

// Owner is the user and group what a copy makes is given; -1 leaves
// either the copier's.
type Owner struct {
	UID, GID int
}

// NoOwner leaves what a copy makes to the copier.
var NoOwner = Owner{UID: -1, GID: -1}

// Copied is what CopyTree copied, and the special files it skipped.
type Copied struct {
	Dirs, Files, Links int64
	// Bytes is the data of the files copied.
	Bytes int64
	// Skipped counts the FIFOs, sockets and devices left out, and
	// SkippedNames holds the first few of their names.
	Skipped      int64
	SkippedNames []string
}

// ErrTooLarge is wrapped by the error of a copy whose source holds more
// data than the copy may write.
var ErrTooLarge = errors.New("the source holds more data than the new volume's size")

// CopyTree copies everything in src into dst, an empty directory, and
// writes at most limit bytes of file data: a source holding more fails
// with an error wrapping ErrTooLarge. A file counts its size, not the
// blocks it takes: a sparse file is written whole, holes as zeros, and one
// larger than limit is refused before any of it is read.
//
// Directories, regular files and symlinks are copied, symlinks as links
// with their target verbatim, never followed; FIFOs, sockets and devices
// are skipped and counted. Directories and files keep their permission and
// sticky bits (copiedModeMask), not their owners or times: what is made
// belongs to owner (symlinks to the caller). The source is only read, and may change under
// the copy: an entry gone between its listing and its copy is skipped, and
// one listed twice copied once.
//
// A tenant wrote the source, so the walk is bounded whatever its shape:
// it is iterative, holds one page of names (RemoveBatch) at a time and,
// per level, a name and a listing position (ReadPage resumes a directory
// where the walk left it, or lists it again from its start, at most
// maxRelists times, when the position expired), refuses a tree deeper than MaxCopyDepth, holds
// open the tops and the copyWindow deepest directories on each side (all
// of them for a DescriptorFree src), one
// file to read and one to write, and copies through one buffer of
// copyChunk bytes. A climb past the open window reopens the directories
// by name from the top, never through "..". The caller keeps src and dst
// open and closes them.
func CopyTree[D CopyDir[D]](ctx context.Context, src, dst D, limit int64, owner Owner) (Copied, error) {
	c := &treeCopy[D]{limit: limit, owner: owner, buf: make([]byte, copyChunk), window: copyWindow}
	if _, ok := any(src).(DescriptorFree); ok {
		c.window = MaxCopyDepth + 1
	}
	c.levels = []copyLevel[D]{{src: src, dst: dst, open: true}}
	defer c.closeAll()
	for len(c.levels) > 0 {
		if err := ctx.Err(); err != nil {
			return c.copied, err
		}
		if err := c.step(ctx); err != nil {
			return c.copied, err
		}
	}
	return c.copied, nil
}

// copyLevel is a directory of the walk: its name in its parent (none for
// the tops), where its listing resumes, the mode its copy gets once
// filled, and its two sides while open.
type copyLevel[D any] struct {
	name string
	next ListPos
	// relists counts the listings started again after next expired.
	relists  int
	mode     fs.FileMode
	src, dst D
	open     bool
}

// treeCopy is the state of one CopyTree.
type treeCopy[D CopyDir[D]] struct {
	limit int64
	// window is how many of the deepest directories stay open.
	window int
	owner  Owner
	buf    []byte
	levels []copyLevel[D]
	copied Copied
}

// step copies the next page of the deepest directory, descending into the
// first directory it meets, or finishes that directory when its listing
// is done.
func (c *treeCopy[D]) step(ctx context.Context) error {
	depth := len(c.levels) - 1
	cur, err := c.reopen(ctx, depth)
	if errors.Is(err, fs.ErrNotExist) && depth > 0 {
		// Gone from the source since the walk descended.
		c.pop()
		return nil
	}
	if err != nil {
		return err
	}
	entries, err := cur.src.ReadPage(ctx, cur.next, RemoveBatch)
	if errors.Is(err, ErrListPosExpired) && cur.next != (ListPos{}) && cur.relists < maxRelists {
		// What was listed before is copied, and is skipped when listed
		// again.
		cur.next = ListPos{}
		cur.relists++
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot list a directory of the source: %w", err)
	}
	if len(entries) == 0 {
		return c.finish(ctx)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		child, err := c.entry(ctx, cur, e.Name)
		if err != nil {
			return err
		}
		c.levels[depth].next = e.Next
		if child != nil {
			return c.push(*child)
		}
	}
	return nil
}

// entry copies the entry name of the directory level, and returns the
// level of a directory to descend into.
func (c *treeCopy[D]) entry(ctx context.Context, level *copyLevel[D], name string) (*copyLevel[D], error) {
	info, err := level.src.Lstat(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot look up %q in the source: %w", name, err)
	}
	mode := info.Mode() & copiedModeMask
	switch {
	case info.IsDir():
		return c.dir(ctx, level, name, mode)
	case info.Mode().IsRegular():
		return nil, c.file(ctx, level, name, info.Size(), mode)
	case info.Mode()&fs.ModeSymlink != 0:
		return nil, c.link(ctx, level, name)
	}
	c.copied.Skipped++
	if len(c.copied.SkippedNames) < maxSkippedNames {
		c.copied.SkippedNames = append(c.copied.SkippedNames, name)
	}
	return nil, nil
}

// dir makes the copy of the directory name, owner-writable until it is
// filled, and opens both sides.
func (c *treeCopy[D]) dir(ctx context.Context, level *copyLevel[D], name string, mode fs.FileMode) (*copyLevel[D], error) {
	if len(c.levels) > MaxCopyDepth {
		return nil, fmt.Errorf("the source holds directories more than %d levels deep, the most a copy goes (a path of 4096 bytes has at most that many components)", MaxCopyDepth)
	}
	err := level.dst.Mkdir(ctx, name, 0o700)
	if errors.Is(err, fs.ErrExist) {
		// Listed again (a listing that shifted as the source changed):
		// copied already.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot make directory %q: %w", name, err)
	}
	src, err := level.src.OpenDir(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, level.dst.Remove(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot open %q in the source: %w", name, err)
	}
	dst, err := level.dst.OpenDir(ctx, name)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("cannot open the copy of %q: %w", name, err), src.Close())
	}
	if c.owner != NoOwner {
		if err := dst.Chown(ctx, c.owner.UID, c.owner.GID); err != nil {
			return nil, errors.Join(fmt.Errorf("cannot give the copy of %q its owner: %w", name, err), src.Close(), dst.Close())
		}
	}
	c.copied.Dirs++
	return &copyLevel[D]{name: name, mode: mode, src: src, dst: dst, open: true}, nil
}

// file copies the regular file name a chunk at a time, stopping at the
// limit.
func (c *treeCopy[D]) file(ctx context.Context, level *copyLevel[D], name string, size int64, mode fs.FileMode) error {
	if size > c.limit-c.copied.Bytes {
		return c.tooLarge(name)
	}
	r, err := level.src.OpenRead(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot open %q in the source: %w", name, err)
	}
	defer r.Close()
	w, err := level.dst.CreateFile(ctx, name, nil, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot create %q: %w", name, err)
	}
	err = c.pour(ctx, r, w, name)
	if err == nil && c.owner != NoOwner {
		err = w.Chown(ctx, c.owner.UID, c.owner.GID)
	}
	if err == nil {
		err = w.Chmod(ctx, mode)
	}
	if cerr := w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("cannot close %q: %w", name, cerr)
	}
	if err == nil {
		c.copied.Files++
	}
	return err
}

// pour copies r into w until r ends or the limit is passed.
func (c *treeCopy[D]) pour(ctx context.Context, r Reader, w File, name string) error {
	for off := int64(0); ; {
		n, err := r.ReadAt(ctx, c.buf, off)
		if n > 0 {
			if int64(n) > c.limit-c.copied.Bytes {
				return c.tooLarge(name)
			}
			if werr := w.Write(ctx, c.buf[:n]); werr != nil {
				return fmt.Errorf("cannot write %q: %w", name, werr)
			}
			off += int64(n)
			c.copied.Bytes += int64(n)
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("cannot read %q in the source: %w", name, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (c *treeCopy[D]) tooLarge(name string) error {
	return fmt.Errorf("%w: %d bytes copied and %q does not fit in the %d bytes the new volume requests", ErrTooLarge, c.copied.Bytes, name, c.limit)
}

// link copies the symlink name as a link to the same target.
func (c *treeCopy[D]) link(ctx context.Context, level *copyLevel[D], name string) error {
	target, err := level.src.Readlink(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read symlink %q in the source: %w", name, err)
	}
	err = level.dst.Symlink(ctx, target, name)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot make symlink %q: %w", name, err)
	}
	c.copied.Links++
	return nil
}

// push makes child the deepest level and closes the one that leaves the
// window.
func (c *treeCopy[D]) push(child copyLevel[D]) error {
	c.levels = append(c.levels, child)
	if leaving := len(c.levels) - 1 - c.window; leaving > 0 {
		return c.close(leaving)
	}
	return nil
}

// finish gives the deepest directory's copy its mode, now that it is
// filled, and climbs out of it. The tops keep theirs: the caller sets the
// volume's.
func (c *treeCopy[D]) finish(ctx context.Context) error {
	depth := len(c.levels) - 1
	if depth > 0 {
		if err := c.levels[depth].dst.Chmod(ctx, c.levels[depth].mode); err != nil {
			return fmt.Errorf("cannot set the mode of the copy of %q: %w", c.levels[depth].name, err)
		}
	}
	c.pop()
	return nil
}

// pop drops the deepest level, closing it.
func (c *treeCopy[D]) pop() {
	depth := len(c.levels) - 1
	if depth > 0 {
		_ = c.close(depth)
	}
	c.levels = c.levels[:depth]
}

// reopen returns the level depth, open: when the walk climbed past the
// window, it opens it and the window's levels above it by name from the
// nearest open ancestor.
func (c *treeCopy[D]) reopen(ctx context.Context, depth int) (*copyLevel[D], error) {
	if c.levels[depth].open {
		return &c.levels[depth], nil
	}
	from := depth
	for !c.levels[from].open {
		from--
	}
	for i := from + 1; i <= depth; i++ {
		parent := &c.levels[i-1]
		src, err := parent.src.OpenDir(ctx, c.levels[i].name)
		if err != nil {
			return nil, fmt.Errorf("cannot open %q in the source again: %w", c.levels[i].name, err)
		}
		dst, err := parent.dst.OpenDir(ctx, c.levels[i].name)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("cannot open the copy of %q again: %w", c.levels[i].name, err), src.Close())
		}
		c.levels[i].src, c.levels[i].dst, c.levels[i].open = src, dst, true
		if leaving := i - c.window; leaving > 0 && c.levels[leaving].open {
			if err := c.close(leaving); err != nil {
				return nil, err
			}
		}
	}
	return &c.levels[depth], nil
}

// close closes both sides of the level i, never a top.
func (c *treeCopy[D]) close(i int) error {
	level := &c.levels[i]
	if !level.open {
		return nil
	}
	var zero D
	err := errors.Join(level.src.Close(), level.dst.Close())
	level.src, level.dst, level.open = zero, zero, false
	return err
}

// closeAll closes every level still open but the tops.
func (c *treeCopy[D]) closeAll() {
	for i := len(c.levels) - 1; i > 0; i-- {
		_ = c.close(i)
	}
}
