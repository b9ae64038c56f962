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
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
)

// copyReadCases are those of the operations a copy reads the source with.
func copyReadCases() map[string]contractCase {
	return map[string]contractCase{
		"list pages resumed from each position": {op: checkPages},
		"read a file at offsets": {op: func(ctx context.Context, d dirvol.Dir) error {
			r, err := d.OpenRead(ctx, "file")
			if err != nil {
				return err
			}
			defer r.Close()
			part := make([]byte, 3)
			n, err := r.ReadAt(ctx, part, 2)
			if err != nil {
				return err
			}
			whole := make([]byte, 10)
			m, end := r.ReadAt(ctx, whole, 0)
			return errors.Join(expect("middle", string(part[:n]), "nte"), expect("whole", string(whole[:m]), "content"), expect("end", end, io.EOF))
		}},
		"open a symlink for reading": {op: func(ctx context.Context, d dirvol.Dir) error {
			return openRead(ctx, d, "link-within")
		}, wantErr: errAny},
		"open a directory for reading": {op: func(ctx context.Context, d dirvol.Dir) error {
			return openRead(ctx, d, "dir")
		}, wantErr: errAny},
		"open a missing file for reading": {op: func(ctx context.Context, d dirvol.Dir) error {
			return openRead(ctx, d, "missing")
		}, wantErr: fs.ErrNotExist},
		"read the targets of links": {op: func(ctx context.Context, d dirvol.Dir) error {
			up, err := d.Readlink(ctx, "link-up")
			if err != nil {
				return err
			}
			within, err := d.Readlink(ctx, "link-dir")
			return errors.Join(err, expect("link-up", up, "../beside"), expect("link-dir", within, "dir"))
		}},
		"read a file as a link": {op: func(ctx context.Context, d dirvol.Dir) error {
			_, err := d.Readlink(ctx, "file")
			return err
		}, wantErr: errAny},
		"read a missing link": {op: func(ctx context.Context, d dirvol.Dir) error {
			_, err := d.Readlink(ctx, "missing")
			return err
		}, wantErr: fs.ErrNotExist},
	}
}

// copyWriteCases are those of the operations a copy writes with, and of
// the copy itself.
func copyWriteCases() map[string]contractCase {
	return map[string]contractCase{
		"make a link leading out, not followed": {op: func(ctx context.Context, d dirvol.Dir) error {
			return d.Symlink(ctx, "../../../elsewhere", "new-link")
		}, want: without(nil, "new-link"), check: func(host string) error {
			target, err := os.Readlink(filepath.Join(host, "new-link"))
			return errors.Join(err, expect("target", target, "../../../elsewhere"))
		}},
		"make a link over a name": {op: func(ctx context.Context, d dirvol.Dir) error {
			return d.Symlink(ctx, "dir", "file")
		}, wantErr: fs.ErrExist},
		"copy a directory": {op: func(ctx context.Context, d dirvol.Dir) error {
			if err := d.Mkdir(ctx, "copy", 0o700); err != nil {
				return err
			}
			return withDir(ctx, d, "dir", func(from dirvol.Dir) error {
				return withDir(ctx, d, "copy", func(into dirvol.Dir) error {
					copied, err := from.CopyTo(ctx, into, 1<<20, dirvol.NoOwner)
					return errors.Join(err, expect("files copied", copied.Files, 1), expect("bytes copied", copied.Bytes, int64(len("inner"))))
				})
			})
		}, want: without(nil, "copy/", "copy/inner"), check: func(host string) error {
			data, err := os.ReadFile(filepath.Join(host, "copy", "inner"))
			return errors.Join(err, expect("copied data", string(data), "inner"))
		}},
	}
}

// openRead opens name for reading and closes it.
func openRead(ctx context.Context, d dirvol.Dir, name string) error {
	r, err := d.OpenRead(ctx, name)
	if err != nil {
		return err
	}
	return r.Close()
}

// checkPages lists d by pages of two names, each resumed from the position
// after the last, and checks that resuming after the first entry of a page
// names its second next.
func checkPages(ctx context.Context, d dirvol.Dir) error {
	var names []string
	var from dirvol.ListPos
	for range len(initialTree) + 1 {
		page, err := d.ReadPage(ctx, from, 2)
		if err != nil || len(page) == 0 {
			slices.Sort(names)
			return errors.Join(err, expect("names", fmt.Sprint(names), "[dir file link-dir link-file link-out link-up link-within]"))
		}
		if len(page) > 2 {
			return fmt.Errorf("a page of %d names for a limit of 2", len(page))
		}
		for _, e := range page {
			names = append(names, e.Name)
		}
		// Resuming after the first entry of the page names the second
		// next.
		if len(page) == 2 {
			next, err := d.ReadPage(ctx, page[0].Next, 1)
			if err != nil || len(next) != 1 || next[0].Name != page[1].Name {
				return fmt.Errorf("resumed after %q: %v, %w; want %q", page[0].Name, next, err, page[1].Name)
			}
		}
		from = page[len(page)-1].Next
	}
	return errors.New("the listing does not end")
}
