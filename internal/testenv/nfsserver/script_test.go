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
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Procedures and statuses the raw calls below use.
const (
	mountProcMnt    = 1
	nfs3ErrNotSupp  = 10004
	statusLostReply = 1 << 31
)

// rawClient makes AUTH_NULL calls on one connection and reads their
// results, for checks of what a server answers, byte for byte.
type rawClient struct {
	conn net.Conn
	r    *bufio.Reader
	xid  uint32
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &rawClient{conn: conn, r: bufio.NewReader(conn)}
}

// call returns the procedure's status and a reader of what follows it;
// statusLostReply when the connection ended instead.
func (c *rawClient) call(t *testing.T, prog, proc uint32, args []byte) (uint32, *xdrReader) {
	t.Helper()
	c.xid++
	record := Words(c.xid, rpcCall, 2, prog, 3, proc, 0, 0, 0, 0)
	if _, err := c.conn.Write(Frame(append(record, args...))); err != nil {
		t.Fatal(err)
	}
	reply, err := readRecord(c.r, maxCallBytes)
	if errors.Is(err, io.EOF) {
		return statusLostReply, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	r := resultOf(reply)
	status := r.word()
	if !r.ok {
		t.Fatalf("malformed reply %x", reply)
	}
	return status, r
}

// mount returns the root handle of "/", as encoded.
func (c *rawClient) mount(t *testing.T) []byte {
	t.Helper()
	status, r := c.call(t, mountProgram, mountProcMnt, opaqueOf("/"))
	handle := r.opaque()
	if status != nfs3OK || !r.ok {
		t.Fatalf("MNT answered %d", status)
	}
	return handle
}

func opaqueOf(s string) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(s))) //nolint:gosec // short test strings
	out = append(out, s...)
	return append(out, make([]byte, (4-len(s)%4)%4)...)
}

// created is the name the CREATEs below create.
const created = "f"

// exclusive is the arguments of an EXCLUSIVE CREATE of created in dir.
func exclusive(dir []byte, verifier string) []byte {
	args := append(append([]byte(nil), dir...), opaqueOf(created)...)
	return append(append(args, Words(createExclusive)...), verifier[:8]...)
}

// guarded is the arguments of a GUARDED CREATE of created in dir, with
// mode when it is not 0.
func guarded(dir []byte, mode uint32) []byte {
	args := append(append([]byte(nil), dir...), opaqueOf(created)...)
	if mode == 0 {
		return append(args, Words(createGuarded, 0, 0, 0, 0, 0, 0)...)
	}
	return append(args, Words(createGuarded, 1, mode, 0, 0, 0, 0, 0)...)
}

// fronted serves opts (a new folder unless it names a Memory) behind a
// Hostile server whose Answer answer returns for the server's address, and
// returns the folder and both servers.
func fronted(t *testing.T, opts Options, answer func(upstream string) Answer) (string, *Server, *Hostile) {
	t.Helper()
	if opts.Memory == nil {
		opts.Dir = t.TempDir()
	}
	server, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := server.Stop(); err != nil {
			t.Error(err)
		}
	})
	hostile, err := StartHostile(context.Background(), HostileOptions{Upstream: server.Addr(), Answer: answer(server.Addr())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := hostile.Stop(); err != nil {
			t.Error(err)
		}
	})
	return opts.Dir, server, hostile
}

// scripted serves a folder through script, and returns the folder and a
// client of the root.
func scripted(t *testing.T, opts Options, script *CreateScript) (string, *rawClient, []byte) {
	t.Helper()
	dir, _, hostile := fronted(t, opts, func(upstream string) Answer {
		script.Upstream = upstream
		return script.Answer
	})
	c := dialRaw(t, hostile.Addr())
	return dir, c, c.mount(t)
}

// TestCreateScriptExclusive: a CREATE with the verifier that made a file
// is answered with success while the file is as made, as knfsd answers a
// retry; another verifier, or a file whose times were set since, with
// NFS3ERR_EXIST.
func TestCreateScriptExclusive(t *testing.T) {
	script := &CreateScript{Exclusive: true}
	dir, c, root := scripted(t, Options{}, script)
	var got []uint32
	create := func(verifier string) {
		status, _ := c.call(t, nfsProgram, nfsProcCreate, exclusive(root, verifier))
		got = append(got, status)
	}
	create("verifier")
	create("verifier")
	create("another!")
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, created), later, later); err != nil {
		t.Fatal(err)
	}
	create("verifier")
	if diff := cmp.Diff([]uint32{nfs3OK, nfs3OK, nfs3ErrExist, nfs3ErrExist}, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if len(script.Creates()) != len(got) {
		t.Errorf("script saw %d CREATEs, want %d", len(script.Creates()), len(got))
	}
}

// TestCreateScriptFaults: the faults a script injects into CREATEs that
// the server carries out, and what the server does without a script.
func TestCreateScriptFaults(t *testing.T) {
	tests := map[string]struct {
		opts   Options
		script *CreateScript
		args   func(root []byte) []byte
		want   []uint32
	}{
		"exclusive passed on to go-nfs": {
			args: func(root []byte) []byte { return exclusive(root, "verifier") },
			want: []uint32{nfs3ErrNotSupp},
		},
		"first reply lost": {
			script: &CreateScript{LoseReplies: 1},
			args:   func(root []byte) []byte { return guarded(root, 0) },
			want:   []uint32{statusLostReply},
		},
		"create carried out and failed": {
			script: &CreateScript{FailCreate: func(name string) bool { return name == created }},
			args:   func(root []byte) []byte { return guarded(root, 0) },
			want:   []uint32{nfs3ErrIO},
		},
		"no attribute changes: create with a mode carried out and failed": {
			opts: Options{NoAttributeChanges: true},
			args: func(root []byte) []byte { return guarded(root, 0o600) },
			want: []uint32{nfs3ErrIO},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if tt.script == nil {
				tt.script = &CreateScript{}
			}
			dir, c, root := scripted(t, tt.opts, tt.script)
			status, _ := c.call(t, nfsProgram, nfsProcCreate, tt.args(root))
			if diff := cmp.Diff(tt.want, []uint32{status}); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			_, err := os.Stat(filepath.Join(dir, created))
			if made := err == nil; made != (tt.want[0] != nfs3ErrNotSupp) {
				t.Errorf("file made: %v, want it made unless the CREATE was refused", made)
			}
		})
	}
}

// TestNoAttributeChanges: SETATTR of a mode is answered NFS3ERR_NOTSUPP.
func TestNoAttributeChanges(t *testing.T) {
	_, c, root := scripted(t, Options{NoAttributeChanges: true}, &CreateScript{})
	status, r := c.call(t, nfsProgram, nfsProcCreate, guarded(root, 0))
	if status != nfs3OK || r.word() != 1 {
		t.Fatalf("CREATE answered %d, or without a handle", status)
	}
	handle := r.opaque()
	setMode := append(append([]byte(nil), handle...), Words(1, 0o600, 0, 0, 0, 0, 0, 0)...)
	if status, _ := c.call(t, nfsProgram, nfsProcSetAttr, setMode); status != nfs3ErrNotSupp {
		t.Errorf("SETATTR of a mode answered %d, want NFS3ERR_NOTSUPP", status)
	}
}
