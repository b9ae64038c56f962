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
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/willscott/go-nfs-client/nfs"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
)

// behindFront returns a client of e through h, which has not connected yet.
func behindFront(t *testing.T, h *nfsserver.Hostile) *Client {
	t.Helper()
	c := New(Options{Server: h.Host(), Port: h.Port(), Path: "/", SourcePort: Unreserved})
	t.Cleanup(c.Close)
	return c
}

// TestServerFaultsSeenByTheClient: at rate 1 each MKDIR is faulted, and the
// client reports each fault as what it is: a status, ENOSPC, or a lost
// connection whose MKDIR the server carried out; calls that change
// nothing pass.
func TestServerFaultsSeenByTheClient(t *testing.T) {
	e := serve(t, nfsserver.Options{})
	faults := &nfsserver.Faults{Upstream: e.server.Addr(), Seed: 11, Rate: 1}
	c := behindFront(t, front(t, e, faults.Answer))
	ctx := context.Background()
	wantStatus := map[string]uint32{
		nfsserver.FaultIO:       nfs.NFS3ErrIO,
		nfsserver.FaultNoSpace:  nfs.NFS3ErrNoSpc,
		nfsserver.FaultReadOnly: nfs.NFS3ErrROFS,
	}
	const calls = 30
	seen := map[string]int{}
	for i := range calls {
		name := fmt.Sprintf("d%d", i)
		before := faults.Injected()
		err := c.Mkdir(ctx, name, 0o755)
		kind := oneInjected(t, before, faults.Injected())
		seen[kind]++
		var status *StatusError
		isStatus := errors.As(err, &status)
		_, statErr := os.Stat(filepath.Join(e.dir, name))
		switch {
		case kind == nfsserver.FaultDropped && (err == nil || isStatus || statErr != nil):
			t.Errorf("Mkdir %s whose reply was dropped: %v, made on the server: %v; want a lost connection and the directory made", name, err, statErr == nil)
		case kind != nfsserver.FaultDropped && (!isStatus || status.Status != wantStatus[kind] || statErr == nil):
			t.Errorf("Mkdir %s faulted %s: %v, made on the server: %v; want status %d and nothing made", name, kind, err, statErr == nil, wantStatus[kind])
		case kind == nfsserver.FaultNoSpace && !errors.Is(err, syscall.ENOSPC):
			t.Errorf("Mkdir %s faulted %s: %v, want it to match ENOSPC", name, kind, err)
		}
	}
	for _, kind := range []string{nfsserver.FaultIO, nfsserver.FaultNoSpace, nfsserver.FaultReadOnly, nfsserver.FaultDropped} {
		if seen[kind] == 0 || seen[kind] != faults.Injected()[kind] {
			t.Errorf("%s: %d seen by the client, %d counted", kind, seen[kind], faults.Injected()[kind])
		}
	}
	if _, err := c.Lstat(ctx, "."); err != nil {
		t.Errorf("Lstat at rate 1: %v", err)
	}
	if _, err := c.ReadDir(ctx, "."); err != nil {
		t.Errorf("ReadDir at rate 1: %v", err)
	}
}

// oneInjected returns the kind of the one fault injected between two counts.
func oneInjected(t *testing.T, before, after map[string]int) string {
	t.Helper()
	var kinds []string
	for kind, n := range after {
		for range n - before[kind] {
			kinds = append(kinds, kind)
		}
	}
	if len(kinds) != 1 {
		t.Fatalf("faults injected by one operation: %v", kinds)
	}
	return kinds[0]
}

// TestClientAcrossAServerRestart: a server restarted behind a Hostile one
// serves the same client again, with what was made before: a call may meet
// the connection the restart closed, and the next mounts again.
func TestClientAcrossAServerRestart(t *testing.T) {
	e := serve(t, nfsserver.Options{Memory: nfsserver.NewMemory()})
	c := behindFront(t, front(t, e, nil))
	ctx := context.Background()
	if err := c.Mkdir(ctx, "before", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := e.server.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	err := c.Mkdir(ctx, "before/after", 0o755)
	var status *StatusError
	if errors.As(err, &status) {
		t.Fatalf("the restarted server refused the first call: %v", err)
	}
	if err != nil {
		// The LOOKUP before the MKDIR met the connection the restart closed.
		err = c.Mkdir(ctx, "before/after", 0o755)
	}
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if _, err := c.Lstat(ctx, "before/after"); err != nil {
		t.Error(err)
	}
}
