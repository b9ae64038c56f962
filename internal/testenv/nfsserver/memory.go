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

package nfsserver

import (
	"errors"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	billy "github.com/go-git/go-billy/v5"
	"github.com/willscott/go-nfs/file"
)

// Memory is a file tree held in memory, which Options.Memory serves: trees
// deeper than the host's paths allow, or too big to write to disk quickly.
// Each node is found from its parent by name, so a path costs its depth and
// a rename one step whatever lies below (go-billy's memfs keeps every file
// by its full path: a chain of directories costs its depth squared, and a
// rename touches every file of the export). Symlinks are kept, never
// followed. Safe for concurrent use.
type Memory struct {
	mu     sync.Mutex
	root   *memNode
	lastID uint64
	// vanished are names the next listing of a directory tells of, which
	// are not there.
	vanished map[*memNode][]string
}

var (
	_ billy.Filesystem = (*Memory)(nil)
	_ billy.Change     = (*Memory)(nil)
)

type memNode struct {
	id       uint64
	mode     os.FileMode
	uid, gid uint32
	modTime  time.Time
	children map[string]*memNode // a directory's
	data     []byte              // a file's
	target   string              // a symlink's
}

// NewMemory returns an empty tree, its root a directory of mode 0777.
func NewMemory() *Memory {
	m := &Memory{vanished: map[*memNode][]string{}}
	m.root = m.newNode(os.ModeDir | 0o777)
	return m
}

func (m *Memory) newNode(mode os.FileMode) *memNode {
	m.lastID++
	n := &memNode{id: m.lastID, mode: mode, modTime: time.Now(), uid: uint32(os.Getuid()), gid: uint32(os.Getgid())} //nolint:gosec // ids fit
	if mode.IsDir() {
		n.children = map[string]*memNode{}
	}
	return n
}

// MakeChain makes, below the existing directory dir, depth directories
// each in the one before, all named name, and in the last the file leaf
// when it is not empty; it builds in steps the depth of dir, however deep
// the chain.
func (m *Memory) MakeChain(dir, name string, depth int, leaf string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.dirNode(dir)
	if err != nil {
		return err
	}
	for range depth {
		next := m.newNode(os.ModeDir | 0o755)
		n.children[name] = next
		n = next
	}
	if leaf != "" {
		n.children[leaf] = m.newNode(0o644)
	}
	return nil
}

// MakeFiles makes count empty files in the existing directory dir, named
// prefix and a number.
func (m *Memory) MakeFiles(dir, prefix string, count int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.dirNode(dir)
	if err != nil {
		return err
	}
	for i := range count {
		n.children[prefix+strconv.Itoa(i)] = m.newNode(0o644)
	}
	return nil
}

// ListVanished has the next listing of the directory dir tell of name,
// which is not there: an entry removed between a client's READDIR and its
// LOOKUP.
func (m *Memory) ListVanished(dir, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.dirNode(dir)
	if err != nil {
		return err
	}
	m.vanished[n] = append(m.vanished[n], name)
	return nil
}

// Count returns how many files, directories and links lie below dir.
func (m *Memory) Count(dir string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.dirNode(dir)
	if err != nil {
		return 0, err
	}
	count := 0
	queue := []*memNode{n}
	for len(queue) > 0 {
		n, queue = queue[len(queue)-1], queue[:len(queue)-1]
		for _, child := range n.children {
			count++
			queue = append(queue, child)
		}
	}
	return count, nil
}

// split cleans name into its elements below the root.
func split(name string) []string {
	clean := path.Clean("/" + name)
	if clean == "/" {
		return nil
	}
	return strings.Split(clean[1:], "/")
}

func pathError(op, name string, err error) error {
	return &os.PathError{Op: op, Path: name, Err: err}
}

// lookup finds name, every element but the last a directory, none
// followed.
func (m *Memory) lookup(name string) (*memNode, error) {
	n := m.root
	for _, elem := range split(name) {
		if !n.mode.IsDir() {
			return nil, pathError("lookup", name, syscall.ENOTDIR)
		}
		child, ok := n.children[elem]
		if !ok {
			return nil, pathError("lookup", name, syscall.ENOENT)
		}
		n = child
	}
	return n, nil
}

func (m *Memory) dirNode(name string) (*memNode, error) {
	n, err := m.lookup(name)
	if err == nil && !n.mode.IsDir() {
		err = pathError("lookup", name, syscall.ENOTDIR)
	}
	return n, err
}

// entry finds the directory holding name, and name's last element.
func (m *Memory) entry(name string) (*memNode, string, error) {
	elems := split(name)
	if len(elems) == 0 {
		return nil, "", pathError("lookup", name, syscall.EINVAL)
	}
	parent, err := m.dirNode(path.Join(elems[:len(elems)-1]...))
	return parent, elems[len(elems)-1], err
}

// Create opens name for reading and writing, made empty or emptied.
func (m *Memory) Create(name string) (billy.File, error) {
	return m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open opens the file name for reading.
func (m *Memory) Open(name string) (billy.File, error) {
	return m.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile opens the regular file name as os.OpenFile does with flag.
func (m *Memory) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, base, err := m.entry(name)
	if err != nil {
		return nil, err
	}
	n, ok := parent.children[base]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathError("open", name, syscall.EEXIST)
	case ok && !n.mode.IsRegular():
		return nil, pathError("open", name, syscall.EISDIR)
	case !ok && flag&os.O_CREATE == 0:
		return nil, pathError("open", name, syscall.ENOENT)
	case !ok:
		n = m.newNode(perm.Perm())
		parent.children[base] = n
	}
	if flag&os.O_TRUNC != 0 {
		n.data = nil
	}
	return &memFile{memory: m, node: n, name: name}, nil
}

// Stat describes name; like Lstat, it follows no symlink.
func (m *Memory) Stat(name string) (os.FileInfo, error) { return m.Lstat(name) }

// Lstat describes name itself.
func (m *Memory) Lstat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, err
	}
	return n.info(path.Base(path.Clean("/" + name))), nil
}

// Rename follows rename(2): it replaces a file, or an empty directory with
// a directory, and refuses to move a directory below itself.
func (m *Memory) Rename(from, to string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fromDir, fromBase, err := m.entry(from)
	if err != nil {
		return err
	}
	n, ok := fromDir.children[fromBase]
	if !ok {
		return pathError("rename", from, syscall.ENOENT)
	}
	toDir, toBase, err := m.entry(to)
	if err != nil {
		return err
	}
	if err := m.replaceable(n, toDir.children[toBase], to); err != nil {
		return err
	}
	if m.below(to, n) {
		return pathError("rename", to, syscall.EINVAL)
	}
	delete(fromDir.children, fromBase)
	toDir.children[toBase] = n
	return nil
}

func (m *Memory) replaceable(n, old *memNode, name string) error {
	switch {
	case old == nil || old == n:
		return nil
	case n.mode.IsDir() && !old.mode.IsDir():
		return pathError("rename", name, syscall.ENOTDIR)
	case !n.mode.IsDir() && old.mode.IsDir():
		return pathError("rename", name, syscall.EISDIR)
	case len(old.children) > 0:
		return pathError("rename", name, syscall.ENOTEMPTY)
	}
	return nil
}

// below reports whether the path name passes through n.
func (m *Memory) below(name string, n *memNode) bool {
	cur := m.root
	for _, elem := range split(name) {
		if cur == n {
			return true
		}
		if cur = cur.children[elem]; cur == nil {
			return false
		}
	}
	return false
}

// Remove removes the file, symlink or empty directory name.
func (m *Memory) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, base, err := m.entry(name)
	if err != nil {
		return err
	}
	n, ok := parent.children[base]
	switch {
	case !ok:
		return pathError("remove", name, syscall.ENOENT)
	case len(n.children) > 0:
		return pathError("remove", name, syscall.ENOTEMPTY)
	}
	delete(parent.children, base)
	return nil
}

// Join joins path elements with slashes.
func (m *Memory) Join(elem ...string) string { return path.Join(elem...) }

// TempFile is not supported: go-nfs never asks for one.
func (m *Memory) TempFile(string, string) (billy.File, error) {
	return nil, billy.ErrNotSupported
}

// ReadDir describes the entries of the directory name, in no order.
func (m *Memory) ReadDir(name string) ([]os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.dirNode(name)
	if err != nil {
		return nil, err
	}
	infos := make([]os.FileInfo, 0, len(n.children))
	for childName, child := range n.children {
		infos = append(infos, child.info(childName))
	}
	for _, name := range m.vanished[n] {
		infos = append(infos, memInfo{name: name, mode: 0o644, sys: file.FileInfo{Nlink: 1, Fileid: m.lastID + 1}})
	}
	delete(m.vanished, n)
	return infos, nil
}

// MkdirAll makes name and the directories missing above it.
func (m *Memory) MkdirAll(name string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, elem := range split(name) {
		if !n.mode.IsDir() {
			return pathError("mkdir", name, syscall.ENOTDIR)
		}
		child, ok := n.children[elem]
		if !ok {
			child = m.newNode(os.ModeDir | perm.Perm())
			n.children[elem] = child
		}
		n = child
	}
	if !n.mode.IsDir() {
		return pathError("mkdir", name, syscall.EEXIST)
	}
	return nil
}

// Symlink makes the symlink link to target.
func (m *Memory) Symlink(target, link string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, base, err := m.entry(link)
	if err != nil {
		return err
	}
	if _, ok := parent.children[base]; ok {
		return pathError("symlink", link, syscall.EEXIST)
	}
	n := m.newNode(os.ModeSymlink | 0o777)
	n.target = target
	parent.children[base] = n
	return nil
}

// Readlink returns the target of the symlink link.
func (m *Memory) Readlink(link string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(link)
	if err != nil {
		return "", err
	}
	if n.mode&os.ModeSymlink == 0 {
		return "", pathError("readlink", link, syscall.EINVAL)
	}
	return n.target, nil
}

// Chroot is not supported: go-nfs never asks for one.
func (m *Memory) Chroot(string) (billy.Filesystem, error) { return nil, billy.ErrNotSupported }

// Root is the tree's root, "/".
func (m *Memory) Root() string { return "/" }

// change applies set to the node name.
func (m *Memory) change(name string, set func(*memNode)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return err
	}
	set(n)
	return nil
}

// Chmod sets the permission bits of name.
func (m *Memory) Chmod(name string, mode os.FileMode) error {
	return m.change(name, func(n *memNode) { n.mode = n.mode.Type() | mode.Perm() })
}

// Lchown sets the owner of name itself; -1 leaves uid or gid as it is.
func (m *Memory) Lchown(name string, uid, gid int) error {
	return m.change(name, func(n *memNode) {
		if uid >= 0 {
			n.uid = uint32(uid) //nolint:gosec // ids fit
		}
		if gid >= 0 {
			n.gid = uint32(gid) //nolint:gosec // ids fit
		}
	})
}

// Chown is Lchown: no symlink is followed.
func (m *Memory) Chown(name string, uid, gid int) error { return m.Lchown(name, uid, gid) }

// Chtimes sets the modification time of name.
func (m *Memory) Chtimes(name string, _, mtime time.Time) error {
	return m.change(name, func(n *memNode) { n.modTime = mtime })
}

func (n *memNode) info(name string) os.FileInfo {
	return memInfo{
		name: name, mode: n.mode, size: int64(len(n.data)), modTime: n.modTime,
		sys: file.FileInfo{Nlink: 1, UID: n.uid, GID: n.gid, Fileid: n.id},
	}
}

type memInfo struct {
	name    string
	mode    os.FileMode
	size    int64
	modTime time.Time
	sys     file.FileInfo
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() os.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return i.modTime }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return i.sys }

// memFile is an open file of a Memory, at an offset.
type memFile struct {
	memory *Memory
	node   *memNode
	name   string
	offset int64
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Write(p []byte) (int, error) {
	f.memory.mu.Lock()
	defer f.memory.mu.Unlock()
	end := f.offset + int64(len(p))
	if end > int64(len(f.node.data)) {
		f.node.data = append(f.node.data, make([]byte, end-int64(len(f.node.data)))...)
	}
	copy(f.node.data[f.offset:], p)
	f.offset = end
	return len(p), nil
}

func (f *memFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.offset)
	f.offset += int64(n)
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.memory.mu.Lock()
	defer f.memory.mu.Unlock()
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Seek(offset int64, whence int) (int64, error) {
	f.memory.mu.Lock()
	defer f.memory.mu.Unlock()
	switch whence {
	case io.SeekCurrent:
		offset += f.offset
	case io.SeekEnd:
		offset += int64(len(f.node.data))
	}
	if offset < 0 {
		return 0, errors.New("negative offset")
	}
	f.offset = offset
	return offset, nil
}

func (f *memFile) Truncate(size int64) error {
	f.memory.mu.Lock()
	defer f.memory.mu.Unlock()
	f.node.data = f.node.data[:min(max(size, 0), int64(len(f.node.data)))]
	if extra := size - int64(len(f.node.data)); extra > 0 {
		f.node.data = append(f.node.data, make([]byte, extra)...)
	}
	return nil
}

func (f *memFile) Close() error  { return nil }
func (f *memFile) Lock() error   { return nil }
func (f *memFile) Unlock() error { return nil }
