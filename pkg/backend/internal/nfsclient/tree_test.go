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
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/willscott/go-nfs-client/nfs"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
)

// openRoot returns the handle of the export's root.
func openRoot(t *testing.T, c *Client) Handle {
	t.Helper()
	root, err := c.Open(t.Context(), ".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// randomBytes are n bytes no two chunks of which are alike.
func randomBytes(n int) []byte {
	data := make([]byte, n)
	r := rand.New(rand.NewPCG(1, uint64(n))) //nolint:gosec // test data
	for i := range data {
		data[i] = byte(r.Uint32()) //nolint:gosec // any byte will do
	}
	return data
}

// TestTreeByHandles: a tree made by handles holds what was asked, its
// links stored as given and never followed, and reads back across chunks.
func TestTreeByHandles(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	ctx := t.Context()
	root := openRoot(t, c)
	dir, err := c.MkdirIn(ctx, root, "dir", 0o750)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.MkdirIn(ctx, dir, "sub", 0o700)
	if err != nil {
		t.Fatal(err)
	}
	content := randomBytes(5*maxTransfer + 123)
	f, err := c.CreateIn(ctx, sub, "data", 0o640)
	if err != nil {
		t.Fatal(err)
	}
	// Two writes, the second across chunks from an offset inside the first.
	if err := c.WriteFileAt(ctx, f, content[:1000], 0); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFileAt(ctx, f, content[500:], 500); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(ctx, f); err != nil {
		t.Fatal(err)
	}
	readOnly, err := c.CreateIn(ctx, dir, "read-only", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFileAt(ctx, readOnly, []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	if err := c.SetMode(ctx, readOnly, 0o400); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(e.outside, "secret")
	for name, target := range map[string]string{"relative": "sub/data", "absolute": outside, "up": "../../outside/secret", "dangling": "missing"} {
		if err := c.Symlink(ctx, dir, name, target); err != nil {
			t.Fatalf("Symlink %s: %v", name, err)
		}
	}

	wantHost := map[string]string{
		"dir":           "dir drwxr-x---",
		"dir/absolute":  "link " + outside,
		"dir/dangling":  "link missing",
		"dir/read-only": "file -r-------- kept",
		"dir/relative":  "link sub/data",
		"dir/sub":       "dir drwx------",
		"dir/sub/data":  fmt.Sprintf("file -rw-r----- %d bytes", len(content)),
		"dir/up":        "link ../../outside/secret",
	}
	if diff := cmp.Diff(wantHost, hostTree(t, filepath.Join(e.dir))); diff != "" {
		t.Errorf("export (-want +got):\n%s", diff)
	}
	onHost, err := os.ReadFile(filepath.Join(e.dir, "dir", "sub", "data"))
	if err != nil || !bytes.Equal(onHost, content) {
		t.Errorf("the file on the host differs from what was written (%v)", err)
	}

	got := make([]byte, len(content))
	if n, err := c.ReadAt(ctx, f, got, 0); err != nil || n != len(content) || !bytes.Equal(got, content) {
		t.Errorf("ReadAt of the whole file: %d bytes, %v, equal: %v", n, err, bytes.Equal(got, content))
	}
	for name, target := range map[string]string{"relative": "sub/data", "absolute": outside, "up": "../../outside/secret"} {
		link, err := c.LookupIn(ctx, dir, name)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.Readlink(ctx, link); err != nil || got != target {
			t.Errorf("Readlink %s: %q, %v; want %q", name, got, err, target)
		}
	}
	if data, err := os.ReadFile(outside); err != nil || string(data) != "secret" {
		t.Errorf("the file outside is %q (%v), want it untouched", data, err)
	}
}

// hostTree tells each entry under dir: its type, mode and, for a file,
// its content or size, for a link its target.
func hostTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			got[rel] = "dir " + info.Mode().String()
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			got[rel] = "link " + target
			return err
		default:
			data, err := os.ReadFile(p)
			got[rel] = "file " + info.Mode().String() + " " + string(data)
			if len(data) > 100 {
				got[rel] = fmt.Sprintf("file %s %d bytes", info.Mode(), len(data))
			}
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestReadAtEnds: ReadAt reads as io.ReaderAt does at and past the end.
func TestReadAtEnds(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	content := randomBytes(2*maxTransfer + 10)
	if err := os.WriteFile(filepath.Join(e.dir, "f"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := c.LookupIn(t.Context(), openRoot(t, c), "f")
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(content))
	tests := map[string]struct {
		off     int64
		n       int
		want    []byte
		wantErr error
	}{
		"a chunk and a bit": {off: 1, n: maxTransfer + 2, want: content[1 : maxTransfer+3]},
		"up to the end":     {off: size - 20, n: 20, want: content[size-20:]},
		"across the end":    {off: size - 20, n: 3 * maxTransfer, want: content[size-20:], wantErr: io.EOF},
		"at the end":        {off: size, n: 10, want: []byte{}, wantErr: io.EOF},
		"past the end":      {off: size + 100, n: 10, want: []byte{}, wantErr: io.EOF},
		"nothing":           {off: 0, n: 0, want: []byte{}},
		"a negative offset": {off: -1, n: 10, want: []byte{}, wantErr: fs.ErrInvalid},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := make([]byte, tc.n)
			n, err := c.ReadAt(t.Context(), f, p, tc.off)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if !bytes.Equal(p[:n], tc.want) {
				t.Errorf("read %d bytes, want %d, equal: %v", n, len(tc.want), bytes.Equal(p[:n], tc.want))
			}
		})
	}
}

// TestTreeByHandlesRefuses: what is not a name, a taken name, a target no
// link can hold, and a transfer on what is not a file fail, and change
// nothing.
func TestTreeByHandlesRefuses(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	ctx := t.Context()
	root := openRoot(t, c)
	if err := os.Mkdir(filepath.Join(e.dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file", filepath.Join(e.dir, "link")); err != nil {
		t.Fatal(err)
	}
	lookup := func(name string) Handle {
		h, err := c.LookupIn(ctx, root, name)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	dir, file, link := lookup("dir"), lookup("file"), lookup("link")
	before := hostTree(t, e.dir)
	ignore := func(_ Handle, err error) error { return err }
	tests := map[string]struct {
		err  error
		want error
	}{
		"mkdir of dot dot":           {ignore(c.MkdirIn(ctx, root, "..", 0o755)), fs.ErrInvalid},
		"mkdir of a path":            {ignore(c.MkdirIn(ctx, root, "dir/sub", 0o755)), fs.ErrInvalid},
		"mkdir over a directory":     {ignore(c.MkdirIn(ctx, root, "dir", 0o755)), fs.ErrExist},
		"mkdir over a link":          {ignore(c.MkdirIn(ctx, root, "link", 0o755)), fs.ErrExist},
		"create of nothing":          {ignore(c.CreateIn(ctx, root, "", 0o644)), fs.ErrInvalid},
		"create over a file":         {ignore(c.CreateIn(ctx, root, "file", 0o644)), fs.ErrExist},
		"create over a link":         {ignore(c.CreateIn(ctx, root, "link", 0o644)), fs.ErrExist},
		"symlink over a file":        {c.Symlink(ctx, root, "file", "x"), fs.ErrExist},
		"symlink of dot":             {c.Symlink(ctx, root, ".", "x"), fs.ErrInvalid},
		"symlink to nothing":         {c.Symlink(ctx, root, "new", ""), fs.ErrInvalid},
		"symlink holding a NUL":      {c.Symlink(ctx, root, "new", "a\x00b"), fs.ErrInvalid},
		"symlink too long":           {c.Symlink(ctx, root, "new", string(make([]byte, maxLinkBytes+1))), fs.ErrInvalid},
		"readlink of a file":         {func() error { _, err := c.Readlink(ctx, file); return err }(), fs.ErrInvalid},
		"read of a directory":        {func() error { _, err := c.ReadAt(ctx, dir, make([]byte, 1), 0); return err }(), fs.ErrInvalid},
		"read of a link":             {func() error { _, err := c.ReadAt(ctx, link, make([]byte, 1), 0); return err }(), fs.ErrInvalid},
		"write to a link":            {c.WriteFileAt(ctx, link, []byte("x"), 0), fs.ErrInvalid},
		"write at a negative offset": {c.WriteFileAt(ctx, file, []byte("x"), -1), fs.ErrInvalid},
		"commit of a directory":      {c.Commit(ctx, dir), fs.ErrInvalid},
		"mode of a link":             {c.SetMode(ctx, link, 0o777), fs.ErrInvalid},
		"listing of no names":        {func() error { _, _, _, err := c.ReadDirPage(ctx, dir, DirCursor{}, 0); return err }(), fs.ErrInvalid},
	}
	for name, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: %v, want an error wrapping %v", name, tt.err, tt.want)
		}
	}
	if diff := cmp.Diff(before, hostTree(t, e.dir)); diff != "" {
		t.Errorf("export after the refusals (-want +got):\n%s", diff)
	}
}

// TestLookupInTellsTypes: a handle's attributes tell every type of file, a
// regular file's size and each one's permission bits.
func TestLookupInTellsTypes(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	at := func(name string) string { return filepath.Join(e.dir, name) }
	if err := os.WriteFile(at("file"), make([]byte, 1234), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(at("dir"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file", at("link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(at("fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", at("socket"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	want := map[string]Attr{
		"file":   {Mode: 0o640, Size: 1234},
		"dir":    {Mode: fs.ModeDir | 0o750},
		"link":   {Mode: fs.ModeSymlink | 0o777, Size: 4},
		"fifo":   {Mode: fs.ModeNamedPipe | 0o600},
		"socket": {Mode: fs.ModeSocket},
	}
	// A device node needs privilege to make.
	if err := syscall.Mknod(at("device"), syscall.S_IFCHR|0o600, 1<<8|3); err == nil {
		want["device"] = Attr{Mode: fs.ModeDevice | fs.ModeCharDevice | 0o600}
	}
	root := openRoot(t, c)
	got := map[string]Attr{}
	for name := range want {
		h, err := c.LookupIn(t.Context(), root, name)
		if err != nil {
			t.Fatal(err)
		}
		got[name] = Attr{Mode: h.Attr().Mode, Size: h.Attr().Size}
		if name == "dir" || name == "socket" {
			got[name] = Attr{Mode: h.Attr().Mode&^fs.ModePerm&want[name].Mode | h.Attr().Mode&want[name].Mode.Perm()}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
}

// TestReadDirPage: a listing of 10,000 names goes page by page, none of
// more names than asked, until it is done, each name once.
func TestReadDirPage(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	const files, limit = 10_000, 100
	var want []string
	for i := range files {
		name := fmt.Sprintf("f%05d", i)
		want = append(want, name)
		if err := os.WriteFile(filepath.Join(e.dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := openRoot(t, c)
	var got []string
	var cursor DirCursor
	pages := 0
	for done := false; !done; pages++ {
		if pages > files {
			t.Fatal("the listing does not end")
		}
		var entries []DirEntry
		var err error
		entries, cursor, done, err = c.ReadDirPage(t.Context(), root, cursor, limit)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if len(entries) > limit || (len(entries) == 0 && !done) {
			t.Fatalf("page %d: %d names for a limit of %d", pages, len(entries), limit)
		}
		for _, e := range entries {
			got = append(got, e.Name)
		}
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if pages < files/limit {
		t.Errorf("%d pages, want at least %d", pages, files/limit)
	}
}

// TestReadDirPageFromAnEntry: a listing resumed from the cursor of any
// entry of a page goes on with the names after it, each once.
func TestReadDirPageFromAnEntry(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	const files = 30
	for i := range files {
		if err := os.WriteFile(filepath.Join(e.dir, fmt.Sprintf("f%02d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := openRoot(t, c)
	first, _, _, err := c.ReadDirPage(t.Context(), root, DirCursor{}, files)
	if err != nil || len(first) != files {
		t.Fatalf("first page: %d names, %v; want %d", len(first), err, files)
	}
	for _, at := range []int{0, 7, files - 2} {
		var got []string
		for cursor, done := first[at].Next, false; !done; {
			var entries []DirEntry
			if entries, cursor, done, err = c.ReadDirPage(t.Context(), root, cursor, 4); err != nil {
				t.Fatalf("from entry %d: %v", at, err)
			}
			for _, e := range entries {
				got = append(got, e.Name)
			}
		}
		var want []string
		for _, e := range first[at+1:] {
			want = append(want, e.Name)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("listed from entry %d (-want +got):\n%s", at, diff)
		}
	}
}

// TestReadDirPageCursorExpired: a cursor the server no longer honours, as
// after the directory changed, fails with ErrCursorExpired; listed again
// from the start, the directory shows its new name.
func TestReadDirPageCursorExpired(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	c := e.dial(t, Options{})
	ctx := t.Context()
	for _, dir := range []string{"big", "other1", "other2"} {
		if err := os.Mkdir(filepath.Join(e.dir, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		if err := os.WriteFile(filepath.Join(e.dir, "big", fmt.Sprintf("f%03d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := openRoot(t, c)
	lookup := func(name string) Handle {
		h, err := c.LookupIn(ctx, root, name)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	big := lookup("big")
	_, cursor, done, err := c.ReadDirPage(ctx, big, DirCursor{}, 50)
	if err != nil || done {
		t.Fatalf("first page: done %v, %v", done, err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "big", "new"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// go-nfs keeps the listings of two directories: two others push out
	// the first, which it lists again with the new name.
	for _, other := range []string{"other1", "other2"} {
		if _, _, _, err := c.ReadDirPage(ctx, lookup(other), DirCursor{}, 50); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := c.ReadDirPage(ctx, big, cursor, 50); !errors.Is(err, ErrCursorExpired) {
		t.Fatalf("page after the change: %v, want ErrCursorExpired", err)
	}
	count := 0
	for cursor, done := (DirCursor{}), false; !done; {
		var entries []DirEntry
		if entries, cursor, done, err = c.ReadDirPage(ctx, big, cursor, 50); err != nil {
			t.Fatal(err)
		}
		count += len(entries)
	}
	if count != 301 {
		t.Errorf("listed again: %d names, want 301", count)
	}
}

// TestCallsSentAgainAfterALostReply: a MKDIR or SYMLINK whose reply was
// lost is sent again and succeeds for what the first made, once.
func TestCallsSentAgainAfterALostReply(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	lose := &nfsserver.LoseReplies{Upstream: e.server.Addr(), Procedures: []uint32{nfs.NFSProc3Mkdir, nfs.NFSProc3Symlink}, Count: 1}
	c := behindFront(t, front(t, e, lose.Answer))
	ctx := t.Context()
	root := openRoot(t, c)
	dir, err := c.MkdirIn(ctx, root, "dir", 0o750)
	if err != nil {
		t.Fatalf("MkdirIn: %v", err)
	}
	if err := c.Symlink(ctx, dir, "link", "../target"); err != nil {
		t.Fatalf("Symlink: %v", err)
	}
	for _, proc := range lose.Procedures {
		if lose.Lost(proc) != 1 {
			t.Errorf("procedure %d: %d replies lost, want 1", proc, lose.Lost(proc))
		}
	}
	want := map[string]string{"dir": "dir drwxr-x---", "dir/link": "link ../target"}
	if diff := cmp.Diff(want, hostTree(t, e.dir)); diff != "" {
		t.Errorf("export (-want +got):\n%s", diff)
	}

}

// TestCreateInAfterALostReply: a CREATE whose reply was lost is sent again
// and CreateIn succeeds for the file the first made, EXCLUSIVE or GUARDED.
func TestCreateInAfterALostReply(t *testing.T) {
	tests := map[string]struct {
		exclusive bool
		// wantCreates are the modes of the CREATEs sent.
		wantCreates []uint32
	}{
		"exclusive": {exclusive: true, wantCreates: []uint32{exclusiveMode, exclusiveMode}},
		"guarded":   {wantCreates: []uint32{exclusiveMode, guardedMode, guardedMode}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			script := &nfsserver.CreateScript{Exclusive: tt.exclusive, LoseReplies: 1}
			dirOnHost, client := scripted(t, nfsserver.Options{}, script)
			c := client()
			ctx := t.Context()
			f, err := c.CreateIn(ctx, openRoot(t, c), "file", 0o640)
			if err != nil {
				t.Fatalf("CreateIn: %v", err)
			}
			if err := c.WriteFileAt(ctx, f, []byte("content"), 0); err != nil {
				t.Fatal(err)
			}
			var modes []uint32
			for _, create := range script.Creates() {
				modes = append(modes, create.How)
			}
			if diff := cmp.Diff(tt.wantCreates, modes); diff != "" {
				t.Errorf("CREATEs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(hostFile{"content", 0o640}, readHostFile(t, filepath.Join(dirOnHost, "file"))); diff != "" {
				t.Errorf("file made (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSentAgainMeetsAnotherObject: a call sent again after a lost reply
// that meets what the first could not have made fails as taken.
func TestSentAgainMeetsAnotherObject(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	lose := &nfsserver.LoseReplies{Upstream: e.server.Addr(), Procedures: []uint32{nfs.NFSProc3Symlink}, Count: 1}
	c := behindFront(t, front(t, e, lose.Answer))
	if err := os.Symlink("elsewhere", filepath.Join(e.dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := c.Symlink(t.Context(), openRoot(t, c), "link", "target"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Symlink over a link to elsewhere: %v, want fs.ErrExist", err)
	}
	if target, err := os.Readlink(filepath.Join(e.dir, "link")); err != nil || target != "elsewhere" {
		t.Errorf("the link points to %q (%v), want it untouched", target, err)
	}
}
