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

package nfsclient

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/willscott/go-nfs-client/nfs"
)

// DirCursor is where a listing by ReadDirPage goes on: the cookie of an
// entry and the server's cookie verifier. The zero DirCursor is the start
// of a listing. Only the server knows what a cookie means: one made up, or
// kept too long, is answered with ErrCursorExpired or a listing that
// starts elsewhere.
type DirCursor struct {
	Cookie   uint64
	Verifier [nfs.NFS3_COOKIEVERFSIZE]byte
}

// DirEntry is a name ReadDirPage listed, and the cursor that goes on
// after it.
type DirEntry struct {
	Name string
	Next DirCursor
}

// maxNamelessPages bounds the READDIR replies one ReadDirPage reads that
// hold no name: a server sends "." and ".." alone in a page at most once.
const maxNamelessPages = 4

// ReadDirPage lists at most limit names of the directory dir from cursor
// on, "." and ".." left out, each name one path element with the cursor
// after it, and returns the cursor to go on from after the page and
// whether the listing is done. It returns fewer
// names than limit when the server's page held fewer, and keeps at most
// limit names and one reply whatever the server sends, so a directory of
// any size is listed in bounded memory, a page per call. A cursor the
// server no longer honours (the directory changed) fails with an error
// wrapping ErrCursorExpired: list again from the zero DirCursor.
func (c *Client) ReadDirPage(ctx context.Context, dir Handle, cursor DirCursor, limit int) ([]DirEntry, DirCursor, bool, error) {
	if limit < 1 {
		return nil, cursor, false, fmt.Errorf("cannot list %d names: %w", limit, fs.ErrInvalid)
	}
	var page dirPage
	err := c.do(ctx, func(ctx context.Context) error {
		var err error
		page, err = c.readDirPage(ctx, dir.fh, cursor, limit)
		return err
	})
	if err != nil {
		return nil, cursor, false, err
	}
	entries := make([]DirEntry, len(page.names))
	for i, name := range page.names {
		entries[i] = DirEntry{Name: name, Next: DirCursor{Cookie: page.cookies[i], Verifier: page.verifier}}
	}
	return entries, DirCursor{Cookie: page.last, Verifier: page.verifier}, page.eof, nil
}

// readDirPage reads READDIR replies from cursor until one holds a name or
// ends the listing, each required to move the listing on.
func (c *Client) readDirPage(ctx context.Context, fh []byte, cursor DirCursor, limit int) (dirPage, error) {
	for range maxNamelessPages {
		d, err := c.call(ctx, procReadDir, "READDIR", "a directory by handle", fh, cursor.Cookie, cursor.Verifier, uint32(readDirBytes))
		if err != nil {
			return dirPage{}, err
		}
		page, err := readDirReply(d, limit)
		switch {
		case err != nil:
			return dirPage{}, err
		case page.eof:
			if page.entries == 0 {
				page.last = cursor.Cookie
			}
			return page, nil
		case page.entries == 0 || page.last == cursor.Cookie:
			return dirPage{}, fmt.Errorf("cannot list a directory by handle: the server's READDIR does not move on from cookie %d", cursor.Cookie)
		case len(page.names) > 0:
			return page, nil
		}
		cursor = DirCursor{Cookie: page.last, Verifier: page.verifier}
	}
	return dirPage{}, fmt.Errorf("cannot list a directory by handle: %d READDIR replies in a row hold no name", maxNamelessPages)
}
