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
	"io/fs"
	"math"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// Filesystem is where a Store keeps its volume directories: the host's file
// system (LocalFS) or a file server reached over the network.
type Filesystem interface {
	// OpenBase opens base, a slash-separated path relative to root, as a Dir
	// no operation leaves; root, an absolute path, bounds the walk to base.
	// A Store calls it for each operation, so a base that was replaced or
	// unmounted since is noticed. Errors wrap backend.ErrUnavailable when
	// root or base cannot be reached or does not exist, and
	// backend.ErrInvalidSpec when they are not directories inside root.
	OpenBase(ctx context.Context, root, base string) (Dir, error)
}

// Dir is an open directory. Every name is one component of a path: never
// empty, ".", ".." or holding a "/", which are refused with an error
// wrapping fs.ErrInvalid. No method follows a symlink: a symlink named is
// refused where a directory or a file is expected, and is itself what Lstat,
// Rename, Move, Remove and RemoveAll act on. Errors wrap fs.ErrNotExist for a
// missing name and fs.ErrExist for one that Mkdir or CreateFile finds taken.
// A Dir is safe for use by one goroutine at a time.
type Dir interface {
	// OpenDir opens the directory name, and fails on anything else.
	OpenDir(ctx context.Context, name string) (Dir, error)
	// Lstat describes the entry name.
	Lstat(ctx context.Context, name string) (fs.FileInfo, error)
	// Mkdir makes the directory name with the permission bits perm, less
	// whatever the file system masks.
	Mkdir(ctx context.Context, name string, perm fs.FileMode) error
	// CreateFile creates the regular file name, which must not exist,
	// holding data, and opens it for writing more. A create that failed
	// leaves no file where the file system still answers. A file system
	// whose create may be retried (NFS) tells a retry by name, data and
	// perm, so two callers creating one name with different data never
	// both succeed. A file system that made the file but refuses to set
	// perm fails with an error wrapping backend.ErrModeRefused.
	CreateFile(ctx context.Context, name string, data []byte, perm fs.FileMode) (File, error)
	// RewriteFile replaces the content of the existing regular file name
	// with data, gives it the permission bits perm and makes both durable:
	// how an empty file that an earlier create left is reused. Anything
	// but a regular file is refused.
	RewriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error
	// ReadFile reads at most limit bytes of the regular file name, and
	// describes the file it read.
	ReadFile(ctx context.Context, name string, limit int64) ([]byte, fs.FileInfo, error)
	// ReadNames lists the names in the directory, in no given order.
	ReadNames(ctx context.Context) ([]string, error)
	// ReadSomeNames lists at most limit (at least one) names in the
	// directory, in no given order, from the start of its listing: the
	// same names come again until they are removed, and none means the
	// directory is empty. Its memory is bounded however many names the
	// directory holds.
	ReadSomeNames(ctx context.Context, limit int) ([]string, error)
	// ReadPage lists at most limit (at least one) entries of the
	// directory, in no given order, from the position from (the zero
	// ListPos: the start); each entry comes with the position after it,
	// from which a later call resumes, on this Dir or another opened on
	// the same directory. None means the end. Its memory is bounded
	// however many names the directory holds, and it keeps no state
	// between calls. A position the file system no longer honours (an
	// NFS cookie of a directory that changed since) fails with an error
	// wrapping ErrListPosExpired: the listing starts again from the zero
	// ListPos.
	ReadPage(ctx context.Context, from ListPos, limit int) ([]ListEntry, error)
	// OpenRead opens the regular file name for reading, and fails on
	// anything else, a symlink included.
	OpenRead(ctx context.Context, name string) (Reader, error)
	// Readlink returns the target of the symlink name, and fails on
	// anything else or a target longer than MaxLinkTarget bytes.
	Readlink(ctx context.Context, name string) (string, error)
	// Symlink makes the symlink name pointing to target, verbatim.
	Symlink(ctx context.Context, target, name string) error
	// CopyTo copies everything in this directory into into, an empty Dir
	// of the same Filesystem, as CopyTree does, through the cheapest
	// directories the Filesystem has (by file handles over NFS): it holds
	// what CopyTree holds, whatever the tree's shape. Another Filesystem's
	// Dir may be refused.
	CopyTo(ctx context.Context, into Dir, limit int64, owner Owner) (Copied, error)
	// Rename renames oldName to newName in this directory. Like rename(2)
	// it replaces an existing file or empty directory newName.
	Rename(ctx context.Context, oldName, newName string) error
	// Move renames oldName in this directory to newName in to, a Dir of the
	// same Filesystem. Across devices it fails with an error wrapping
	// syscall.EXDEV, and the entry stays where it was.
	Move(ctx context.Context, oldName string, to Dir, newName string) error
	// Remove removes the file, symlink or empty directory name.
	Remove(ctx context.Context, name string) error
	// RemoveAll removes name and everything below it; a missing name is no
	// error. It reports success only once name is gone, and holds what
	// RemoveTree does in memory and open files, whatever the tree's shape.
	RemoveAll(ctx context.Context, name string) error
	// Chmod sets the permission bits of the directory itself, with
	// fs.ModeSetuid, fs.ModeSetgid and fs.ModeSticky where perm has them.
	Chmod(ctx context.Context, perm fs.FileMode) error
	// Chown gives the directory itself to user uid and group gid; -1 leaves
	// either as it is. A change the file system refuses (a caller not root,
	// an NFS export squashing root) fails with an error wrapping
	// fs.ErrPermission.
	Chown(ctx context.Context, uid, gid int) error
	// Space reports the space of the file system that holds the directory:
	// what an unprivileged user may still write, and its size.
	Space(ctx context.Context) (provisioning.Space, error)
	// Sync makes the directory's entries durable: names created, renamed or
	// removed in it survive a crash of the machine or the server.
	Sync(ctx context.Context) error
	// Close releases the directory.
	Close() error
}

// File is a file opened for writing by Dir.CreateFile.
type File interface {
	// Write appends all of data.
	Write(ctx context.Context, data []byte) error
	// Chmod sets the file's permission bits, whatever the umask.
	Chmod(ctx context.Context, perm fs.FileMode) error
	// Chown gives the file to user uid and group gid, as Dir.Chown gives
	// a directory.
	Chown(ctx context.Context, uid, gid int) error
	// Sync makes what was written durable.
	Sync(ctx context.Context) error
	// Close releases the file.
	Close() error
}

// Reader is a regular file opened for reading by Dir.OpenRead.
type Reader interface {
	// ReadAt reads into p from offset off, as io.ReaderAt does: fewer
	// bytes than p holds come with an error, io.EOF at the end.
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	// Close releases the file.
	Close() error
}

// MaxLinkTarget bounds what Readlink returns: Linux's PATH_MAX, more
// than any symlink a local file system holds.
const MaxLinkTarget = 4096

// ListPos is where Dir.ReadPage resumes a listing; the zero ListPos is
// its start. Only the Filesystem that gave it knows what it means: a
// directory offset, or an NFS cookie and its verifier.
type ListPos struct {
	Cookie   uint64
	Verifier [8]byte
}

// ErrListPosExpired is wrapped by the error of a Dir.ReadPage from a
// position the file system no longer honours.
var ErrListPosExpired = errors.New("the listing's position is no longer honoured: the directory changed")

// ListEntry is a name Dir.ReadPage listed, and the position after it.
type ListEntry struct {
	Name string
	Next ListPos
}

// NewSpace is the space of a file system that reports available and total
// bytes unsigned; figures beyond an int64 are cut to its maximum.
func NewSpace(available, total uint64) provisioning.Space {
	clamp := func(n uint64) int64 { return int64(min(n, math.MaxInt64)) }
	return provisioning.Space{AvailableBytes: clamp(available), TotalBytes: clamp(total)}
}
