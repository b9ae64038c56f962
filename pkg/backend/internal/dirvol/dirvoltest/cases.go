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

package dirvoltest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
)

func lookupCases() map[string]contractCase {
	return map[string]contractCase{
		"open a directory": {op: func(ctx context.Context, d dirvol.Dir) error {
			return withDir(ctx, d, "dir", func(sub dirvol.Dir) error {
				names, err := sub.ReadNames(ctx)
				return errors.Join(err, expect("names", fmt.Sprint(names), "[inner]"))
			})
		}},
		"open a symlink to a directory outside": {op: func(ctx context.Context, d dirvol.Dir) error {
			return withDir(ctx, d, "link-out", func(dirvol.Dir) error { return nil })
		}, wantErr: errAny},
		"open a symlink to a directory beside the base": {op: func(ctx context.Context, d dirvol.Dir) error {
			return withDir(ctx, d, "link-up", func(dirvol.Dir) error { return nil })
		}, wantErr: errAny},
		"open a symlink to a directory within the base": {op: func(ctx context.Context, d dirvol.Dir) error {
			return withDir(ctx, d, "link-dir", func(dirvol.Dir) error { return nil })
		}, wantErr: errAny},
		"open a file as a directory": {op: func(ctx context.Context, d dirvol.Dir) error {
			return withDir(ctx, d, "file", func(dirvol.Dir) error { return nil })
		}, wantErr: errAny},
		"open a missing directory": {op: func(ctx context.Context, d dirvol.Dir) error {
			return withDir(ctx, d, "missing", func(dirvol.Dir) error { return nil })
		}, wantErr: fs.ErrNotExist},
		"lstat a symlink describes the link": {op: func(ctx context.Context, d dirvol.Dir) error {
			info, err := d.Lstat(ctx, "link-out")
			if err != nil {
				return err
			}
			return expect("type", info.Mode().Type(), fs.ModeSymlink)
		}},
		"lstat a missing name": {op: func(ctx context.Context, d dirvol.Dir) error {
			_, err := d.Lstat(ctx, "missing")
			return err
		}, wantErr: fs.ErrNotExist},
		"list names": {op: func(ctx context.Context, d dirvol.Dir) error {
			names, err := d.ReadNames(ctx)
			slices.Sort(names)
			return errors.Join(err, expect("names", fmt.Sprint(names), "[dir file link-dir link-file link-out link-up link-within]"))
		}},
		"names that are not one component are refused": {op: checkNames},
	}
}

// someNamesCases are the bounded listing's.
func someNamesCases() map[string]contractCase {
	return map[string]contractCase{
		"list some names": {op: func(ctx context.Context, d dirvol.Dir) error {
			some, err := d.ReadSomeNames(ctx, 3)
			all, _ := d.ReadNames(ctx)
			var errs []error
			for _, name := range some {
				if !slices.Contains(all, name) {
					errs = append(errs, fmt.Errorf("ReadSomeNames listed %q, which is not there", name))
				}
			}
			return errors.Join(append(errs, err, expect("count", len(some), 3))...)
		}},
		"list some names of an empty directory": {op: func(ctx context.Context, d dirvol.Dir) error {
			if err := d.Mkdir(ctx, "empty", 0o755); err != nil {
				return err
			}
			return withDir(ctx, d, "empty", func(sub dirvol.Dir) error {
				names, err := sub.ReadSomeNames(ctx, 3)
				return errors.Join(err, expect("names", len(names), 0))
			})
		}, want: without(nil, "empty/")},
	}
}

// checkNames calls each method that takes a name with what is no name.
func checkNames(ctx context.Context, d dirvol.Dir) error {
	var errs []error
	for _, name := range []string{"", ".", "..", "dir/inner", "../beside", "link-up/keep"} {
		_, lerr := d.Lstat(ctx, name)
		_, cerr := d.CreateFile(ctx, name, nil, 0o600)
		_, _, rerr := d.ReadFile(ctx, name, 10)
		_, lnerr := d.Readlink(ctx, name)
		for op, err := range map[string]error{
			"OpenDir":     withDir(ctx, d, name, func(dirvol.Dir) error { return nil }),
			"Lstat":       lerr,
			"Mkdir":       d.Mkdir(ctx, name, 0o755),
			"CreateFile":  cerr,
			"RewriteFile": d.RewriteFile(ctx, name, nil, 0o600),
			"ReadFile":    rerr,
			"Rename":      d.Rename(ctx, name, "renamed"),
			"Rename to":   d.Rename(ctx, "file", name),
			"Move":        d.Move(ctx, name, d, "moved"),
			"Move to":     d.Move(ctx, "file", d, name),
			"Remove":      d.Remove(ctx, name),
			"RemoveAll":   d.RemoveAll(ctx, name),
			"OpenRead":    openRead(ctx, d, name),
			"Readlink":    lnerr,
			"Symlink":     d.Symlink(ctx, "target", name),
		} {
			switch {
			case err == nil:
				errs = append(errs, fmt.Errorf("%s %q: no error, want fs.ErrInvalid", op, name))
			case !errors.Is(err, fs.ErrInvalid):
				errs = append(errs, fmt.Errorf("%s %q: %w; want fs.ErrInvalid", op, name, err))
			}
		}
	}
	return errors.Join(errs...)
}

func fileCases() map[string]contractCase {
	return map[string]contractCase{
		"create, write, sync and read a file": {op: func(ctx context.Context, d dirvol.Dir) error {
			f, err := d.CreateFile(ctx, "new", []byte("new "), 0o600)
			if err != nil {
				return err
			}
			if err := errors.Join(f.Write(ctx, []byte("content")), f.Sync(ctx), f.Close()); err != nil {
				return err
			}
			data, info, err := d.ReadFile(ctx, "new", 100)
			if err != nil {
				return err
			}
			return errors.Join(expect("content", string(data), "new content"), expect("regular", info.Mode().IsRegular(), true),
				expect("size", info.Size(), int64(len(data))))
		}, want: without(nil, "new")},
		"rewrite a file": {op: func(ctx context.Context, d dirvol.Dir) error {
			if err := d.RewriteFile(ctx, "file", []byte("new"), 0o640); err != nil {
				return err
			}
			data, info, err := d.ReadFile(ctx, "file", 100)
			if err != nil {
				return err
			}
			return errors.Join(expect("content", string(data), "new"), expect("mode", info.Mode(), fs.FileMode(0o640)))
		}},
		"rewrite a symlink to a file within the base":     {op: rewriteFile("link-within"), wantErr: errAny, check: content("file", "content")},
		"rewrite a symlink to a file outside":             {op: rewriteFile("link-file"), wantErr: errAny},
		"rewrite a directory":                             {op: rewriteFile("dir"), wantErr: errAny},
		"rewrite a missing file":                          {op: rewriteFile("missing"), wantErr: fs.ErrNotExist},
		"create over a file":                              {op: createFile("file"), wantErr: fs.ErrExist},
		"create over a symlink to a file within the base": {op: createFile("link-within"), wantErr: fs.ErrExist},
		"create over a directory":                         {op: createFile("dir"), wantErr: fs.ErrExist},
		"create over a symlink to a file outside":         {op: createFile("link-file"), wantErr: fs.ErrExist},
		"create over a symlink to a directory outside":    {op: createFile("link-out"), wantErr: fs.ErrExist},
		"read at most the limit": {op: func(ctx context.Context, d dirvol.Dir) error {
			data, _, err := d.ReadFile(ctx, "file", 3)
			return errors.Join(err, expect("content", string(data), "con"))
		}},
		"read a symlink to a file outside":         {op: readFile("link-file"), wantErr: errAny},
		"read a symlink to a file within the base": {op: readFile("link-within"), wantErr: errAny},
		"read a directory":                         {op: readFile("dir"), wantErr: errAny},
		"read a missing file":                      {op: readFile("missing"), wantErr: fs.ErrNotExist},
	}
}

func createFile(name string) func(ctx context.Context, d dirvol.Dir) error {
	return func(ctx context.Context, d dirvol.Dir) error {
		f, err := d.CreateFile(ctx, name, nil, 0o600)
		if err != nil {
			return err
		}
		return errors.Join(errors.New("created"), f.Close())
	}
}

// content checks that the file name in the base holds want.
func content(name, want string) func(host string) error {
	return func(host string) error {
		data, err := os.ReadFile(filepath.Join(host, name))
		return errors.Join(err, expect("content of "+name, string(data), want))
	}
}

func rewriteFile(name string) func(ctx context.Context, d dirvol.Dir) error {
	return func(ctx context.Context, d dirvol.Dir) error {
		return d.RewriteFile(ctx, name, []byte("rewritten"), 0o600)
	}
}

func readFile(name string) func(ctx context.Context, d dirvol.Dir) error {
	return func(ctx context.Context, d dirvol.Dir) error {
		_, _, err := d.ReadFile(ctx, name, 100)
		return err
	}
}

func dirCases() map[string]contractCase {
	return map[string]contractCase{
		"make a directory": {op: func(ctx context.Context, d dirvol.Dir) error {
			if err := d.Mkdir(ctx, "new", 0o755); err != nil {
				return err
			}
			info, err := d.Lstat(ctx, "new")
			return errors.Join(err, expect("directory", info != nil && info.IsDir(), true))
		}, want: without(nil, "new/")},
		"make a directory over a file":                           {op: mkdir("file"), wantErr: fs.ErrExist},
		"make a directory over a directory":                      {op: mkdir("dir"), wantErr: fs.ErrExist},
		"make a directory over a symlink to a directory outside": {op: mkdir("link-out"), wantErr: fs.ErrExist},
		"make a directory over a symlink within the base":        {op: mkdir("link-dir"), wantErr: fs.ErrExist},
		"make a directory over a symlink beside the base":        {op: mkdir("link-up"), wantErr: fs.ErrExist},
		"chmod the directory itself": {op: func(ctx context.Context, d dirvol.Dir) error {
			if err := withDir(ctx, d, "dir", func(sub dirvol.Dir) error { return sub.Chmod(ctx, 0o700) }); err != nil {
				return err
			}
			info, err := d.Lstat(ctx, "dir")
			if err != nil {
				return err
			}
			return expect("mode", info.Mode().Perm(), fs.FileMode(0o700))
		}},
		"chmod keeps the setgid and sticky bits": {op: func(ctx context.Context, d dirvol.Dir) error {
			mode := fs.FileMode(0o770) | fs.ModeSetgid | fs.ModeSticky
			if err := withDir(ctx, d, "dir", func(sub dirvol.Dir) error { return sub.Chmod(ctx, mode) }); err != nil {
				return err
			}
			info, err := d.Lstat(ctx, "dir")
			if err != nil {
				return err
			}
			return expect("mode", info.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSetuid|fs.ModeSticky), mode)
		}, needs: backendtest.SpecialModeBits},
		"sync the directory": {op: func(ctx context.Context, d dirvol.Dir) error { return d.Sync(ctx) }},
	}
}

func mkdir(name string) func(ctx context.Context, d dirvol.Dir) error {
	return func(ctx context.Context, d dirvol.Dir) error { return d.Mkdir(ctx, name, 0o755) }
}

func renameCases() map[string]contractCase {
	return map[string]contractCase{
		"rename a file":                     {op: rename("file"), want: without([]string{"file"}, "renamed")},
		"rename a directory":                {op: rename("dir"), want: without([]string{"dir/", "dir/inner"}, "renamed/", "renamed/inner")},
		"rename a symlink renames the link": {op: rename("link-out"), want: without([]string{"link-out"}, "renamed")},
		"rename a missing name":             {op: rename("missing"), wantErr: fs.ErrNotExist},
		"move a file into a directory":      {op: move("file", "dir/file"), want: without([]string{"file"}, "dir/file")},
		"move a symlink moves the link":     {op: move("link-out", "dir/link"), want: without([]string{"link-out"}, "dir/link")},
		"move a directory into another": {op: func(ctx context.Context, d dirvol.Dir) error {
			if err := d.Mkdir(ctx, "sub", 0o755); err != nil {
				return err
			}
			return withDir(ctx, d, "sub", func(sub dirvol.Dir) error { return d.Move(ctx, "dir", sub, "moved") })
		}, want: without([]string{"dir/", "dir/inner"}, "sub/", "sub/moved/", "sub/moved/inner")},
		"move out of a directory": {op: func(ctx context.Context, d dirvol.Dir) error {
			return withDir(ctx, d, "dir", func(sub dirvol.Dir) error { return sub.Move(ctx, "inner", d, "inner") })
		}, want: without([]string{"dir/inner"}, "inner")},
		"move through a symlink to a directory within the base": {op: move("file", "link-dir/file"), wantErr: errAny},
		"move a missing name": {op: move("missing", "dir/missing"), wantErr: fs.ErrNotExist},
	}
}

// rename renames name in the base to "renamed".
func rename(name string) func(ctx context.Context, d dirvol.Dir) error {
	return func(ctx context.Context, d dirvol.Dir) error { return d.Rename(ctx, name, "renamed") }
}

// move moves name in the base to dir/newName.
func move(name, to string) func(ctx context.Context, d dirvol.Dir) error {
	dir, newName := path.Split(to)
	return func(ctx context.Context, d dirvol.Dir) error {
		return withDir(ctx, d, path.Clean(dir), func(sub dirvol.Dir) error { return d.Move(ctx, name, sub, newName) })
	}
}

func removeCases() map[string]contractCase {
	return map[string]contractCase{
		"remove a file":                        {op: remove("file"), want: without([]string{"file"})},
		"remove a symlink removes the link":    {op: remove("link-out"), want: without([]string{"link-out"})},
		"remove a directory that is not empty": {op: remove("dir"), wantErr: errAny},
		"remove an empty directory": {op: func(ctx context.Context, d dirvol.Dir) error {
			return errors.Join(d.Mkdir(ctx, "empty", 0o755), d.Remove(ctx, "empty"))
		}},
		"remove a missing name": {op: remove("missing"), wantErr: fs.ErrNotExist},
		"remove a tree":         {op: removeAll("dir"), want: without([]string{"dir/", "dir/inner"})},
		"remove a tree through a symlink removes the link":                 {op: removeAll("link-out"), want: without([]string{"link-out"})},
		"remove a tree through a symlink beside the base removes the link": {op: removeAll("link-up"), want: without([]string{"link-up"})},
		"remove a tree through a symlink within the base removes the link": {op: removeAll("link-dir"), want: without([]string{"link-dir"})},
		"remove a missing tree": {op: removeAll("missing")},
	}
}

func remove(name string) func(ctx context.Context, d dirvol.Dir) error {
	return func(ctx context.Context, d dirvol.Dir) error { return d.Remove(ctx, name) }
}

func removeAll(name string) func(ctx context.Context, d dirvol.Dir) error {
	return func(ctx context.Context, d dirvol.Dir) error { return d.RemoveAll(ctx, name) }
}

// ownerCases give a directory to its own owner, which anyone may do, and to
// another, which only root may: the host's view of the owner is checked.
func ownerCases() map[string]contractCase {
	uid, gid := os.Geteuid(), os.Getegid()
	other := contractCase{
		op:      chownDir(12345, 23456),
		wantErr: fs.ErrPermission,
		check:   ownerOfDir(uid, gid),
	}
	if uid == 0 {
		other = contractCase{op: chownDir(12345, 23456), check: ownerOfDir(12345, 23456)}
	}
	return map[string]contractCase{
		"chown the directory itself to its owner":                          {op: chownDir(uid, gid), check: ownerOfDir(uid, gid)},
		"chown the directory itself, group only":                           {op: chownDir(-1, gid), check: ownerOfDir(uid, gid)},
		"chown the directory itself to another owner, which only root may": other,
	}
}

// chownDir gives "dir" in the base to uid and gid.
func chownDir(uid, gid int) func(ctx context.Context, d dirvol.Dir) error {
	return func(ctx context.Context, d dirvol.Dir) error {
		return withDir(ctx, d, "dir", func(sub dirvol.Dir) error { return sub.Chown(ctx, uid, gid) })
	}
}

// ownerOfDir checks the owner of "dir" in the base on the host.
func ownerOfDir(uid, gid int) func(host string) error {
	return func(host string) error {
		info, err := os.Lstat(filepath.Join(host, "dir"))
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("no owner in %T", info.Sys())
		}
		return errors.Join(expect("uid", int(st.Uid), uid), expect("gid", int(st.Gid), gid))
	}
}
