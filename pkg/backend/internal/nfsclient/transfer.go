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
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/willscott/go-nfs-client/nfs"
)

// maxUncommitted bounds the files written UNSTABLE and not committed yet
// whose verifiers the client keeps: a copy has a few open at a time.
const maxUncommitted = 64

// transferSizes returns the READ and WRITE sizes of the server, asking
// FSINFO once for the client's life; a server that refuses FSINFO is sent
// maxTransfer.
func (c *Client) transferSizes(ctx context.Context) (transferSizes, error) {
	if c.sizes != (transferSizes{}) {
		return c.sizes, nil
	}
	d, err := c.call(ctx, nfs.NFSProc3FSInfo, "FSINFO", ".", c.root)
	var status *StatusError
	switch {
	case errors.As(err, &status) && !status.stale():
		c.sizes = transferSizes{read: maxTransfer, write: maxTransfer}
		return c.sizes, nil
	case err != nil:
		return transferSizes{}, err
	}
	sizes, err := fsinfoReply(d)
	if err != nil {
		return transferSizes{}, err
	}
	c.sizes = sizes
	return sizes, nil
}

// checkRegular refuses a handle that is not of a regular file: reading a
// FIFO could block the server, and a directory has no data.
func checkRegular(file Handle, op string) error {
	if !file.attr.Mode.IsRegular() {
		return fmt.Errorf("cannot %s a file that is %s: %w", op, typeName(file.attr.Mode), fs.ErrInvalid)
	}
	return nil
}

// ReadAt reads len(p) bytes of the regular file from offset off, as
// io.ReaderAt does: fewer only at the end of the file, with io.EOF. It
// sends READs of the server's rtmax at most (FSINFO, within 4 to 64 KiB)
// and copies each reply into p: a reply with more data than asked, or with
// none before the end of the file, fails it.
func (c *Client) ReadAt(ctx context.Context, file Handle, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("cannot read at offset %d: %w", off, fs.ErrInvalid)
	}
	if err := checkRegular(file, "read"); err != nil {
		return 0, err
	}
	var n int
	err := c.do(ctx, func(ctx context.Context) error {
		var err error
		n, err = c.readAt(ctx, file.fh, p, off)
		return err
	})
	return n, err
}

func (c *Client) readAt(ctx context.Context, fh []byte, p []byte, off int64) (int, error) {
	sizes, err := c.transferSizes(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for n < len(p) {
		asked := min(sizes.read, len(p)-n)
		d, err := c.call(ctx, nfs.NFSProc3Read, "READ", "a file by handle", fh, uint64(off)+uint64(n), uint32(asked)) //nolint:gosec // off is not negative, asked is at most a chunk
		if err != nil {
			return n, err
		}
		data, eof, err := readReply(d, asked)
		if err != nil {
			return n, fmt.Errorf("cannot read a file by handle: %w", err)
		}
		n += copy(p[n:], data)
		switch {
		case eof && n < len(p):
			return n, io.EOF
		case len(data) == 0 && !eof:
			return n, errors.New("cannot read a file by handle: the server returned no data before the end of the file")
		}
	}
	return n, nil
}

// WriteFileAt writes data into the regular file from offset off, in
// UNSTABLE WRITEs of the server's wtmax at most (FSINFO, within 4 to 64
// KiB): the server may keep them in memory until Commit. It remembers the
// server's write verifier until then; a verifier that changes between two
// writes of the file fails with an error wrapping ErrWriteVerifierChanged.
// At most 64 files may be written and not committed at a time.
func (c *Client) WriteFileAt(ctx context.Context, file Handle, data []byte, off int64) error {
	if off < 0 {
		return fmt.Errorf("cannot write at offset %d: %w", off, fs.ErrInvalid)
	}
	if err := checkRegular(file, "write"); err != nil {
		return err
	}
	return c.do(ctx, func(ctx context.Context) error {
		sizes, err := c.transferSizes(ctx)
		if err != nil {
			return err
		}
		return c.writeChunks(ctx, file.fh, "a file by handle", uint64(off), data, chunking{size: sizes.write, how: unstable}, func(w written) error { //nolint:gosec // off is not negative
			return c.keepVerifier(file.fh, w)
		})
	})
}

// keepVerifier remembers the verifier of an UNSTABLE write of fh, which
// must be the verifier of the file's earlier uncommitted writes. A write
// the server made FILE_SYNC needs none.
func (c *Client) keepVerifier(fh []byte, w written) error {
	if w.committed == fileSync {
		return nil
	}
	kept, ok := c.uncommitted[string(fh)]
	switch {
	case ok && kept != w.verifier:
		delete(c.uncommitted, string(fh))
		return fmt.Errorf("cannot write a file by handle: %w", ErrWriteVerifierChanged)
	case !ok && len(c.uncommitted) >= maxUncommitted:
		return fmt.Errorf("cannot write a file by handle: %d files are written and not committed", maxUncommitted)
	}
	if c.uncommitted == nil {
		c.uncommitted = map[string]writeVerifier{}
	}
	c.uncommitted[string(fh)] = w.verifier
	return nil
}

// Commit asks the server to put what was written to the file on stable
// storage (COMMIT). When the server's verifier is no longer the one of the
// file's UNSTABLE writes, the server restarted and may have lost them: the
// error wraps ErrWriteVerifierChanged, and the caller writes the file
// again. Either way, once the server answered, the file has no
// uncommitted writes; a COMMIT whose reply was lost may be sent again.
func (c *Client) Commit(ctx context.Context, file Handle) error {
	if err := checkRegular(file, "commit"); err != nil {
		return err
	}
	return c.do(ctx, func(ctx context.Context) error {
		const toTheEnd = uint32(0)
		d, err := c.call(ctx, nfs.NFSProc3Commit, "COMMIT", "a file by handle", file.fh, uint64(0), toTheEnd)
		if err != nil {
			return err
		}
		kept, ok := c.uncommitted[string(file.fh)]
		delete(c.uncommitted, string(file.fh))
		verifier, err := commitReply(d)
		switch {
		case err != nil:
			return err
		case ok && verifier != kept:
			return fmt.Errorf("cannot commit a file by handle: %w", ErrWriteVerifierChanged)
		}
		return nil
	})
}
