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
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Procedures and statuses the tests below call and expect.
const (
	nfsProcGetAttr = 1
	nfs3ErrNoEnt   = 2
)

// faultStatuses are the statuses of the faults answered without the server.
var faultStatuses = map[string]uint32{FaultIO: nfs3ErrIO, FaultNoSpace: nfs3ErrNoSpc, FaultReadOnly: nfs3ErrROFS}

// behindFaults serves a folder behind faults, and returns the folder and
// the Hostile server's address.
func behindFaults(t *testing.T, faults *Faults) (string, string) {
	t.Helper()
	dir, _, hostile := fronted(t, Options{}, func(upstream string) Answer {
		faults.Upstream = upstream
		return faults.Answer
	})
	return dir, hostile.Addr()
}

// injectedBy returns the kind of the one fault injected between two counts.
func injectedBy(t *testing.T, before, after map[string]int) string {
	t.Helper()
	var kinds []string
	for kind, n := range after {
		for range n - before[kind] {
			kinds = append(kinds, kind)
		}
	}
	if len(kinds) != 1 {
		t.Fatalf("faults injected by one call: %v", kinds)
	}
	return kinds[0]
}

// mkdirArgs is MKDIR3args: name in dir, with no attributes set.
func mkdirArgs(dir []byte, name string) []byte {
	args := append(append([]byte(nil), dir...), opaqueOf(name)...)
	return append(args, Words(0, 0, 0, 0, 0, 0)...)
}

// TestFaultsFailureBodies: each procedure that changes the file system is
// answered with its fault's status and its failure body of absent
// attributes, as RFC 1813 encodes it.
func TestFaultsFailureBodies(t *testing.T) {
	faults := &Faults{Seed: 3, Rate: 1}
	_, addr := behindFaults(t, faults)
	root := dialRaw(t, addr).mount(t)
	// The failure bodies' words: wcc_data is two, post_op_attr one.
	tests := map[string]struct {
		proc  uint32
		words int
	}{
		"SETATTR": {proc: nfsProcSetAttr, words: 2},
		"WRITE":   {proc: nfsProcWrite, words: 2},
		"CREATE":  {proc: nfsProcCreate, words: 2},
		"MKDIR":   {proc: nfsProcMkdir, words: 2},
		"SYMLINK": {proc: nfsProcSymlink, words: 2},
		"MKNOD":   {proc: nfsProcMknod, words: 2},
		"REMOVE":  {proc: nfsProcRemove, words: 2},
		"RMDIR":   {proc: nfsProcRmdir, words: 2},
		"RENAME":  {proc: nfsProcRename, words: 4},
		"LINK":    {proc: nfsProcLink, words: 3},
		"COMMIT":  {proc: nfsProcCommit, words: 2},
	}
	if len(tests) != len(failureWords) {
		t.Fatalf("%d procedures checked of %d faulted", len(tests), len(failureWords))
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, addr)
			// A dropped call closes the connection: call until one is answered.
			for {
				before := faults.Injected()
				status, r := c.call(t, nfsProgram, tt.proc, root)
				kind := injectedBy(t, before, faults.Injected())
				if kind == FaultDropped {
					if status != statusLostReply {
						t.Fatalf("a dropped call was answered %d", status)
					}
					c = dialRaw(t, addr)
					continue
				}
				if status != faultStatuses[kind] {
					t.Errorf("a call faulted %s answered %d", kind, status)
				}
				if diff := cmp.Diff(make([]byte, 4*tt.words), r.buf); diff != "" {
					t.Errorf("failure body (-want +got):\n%s", diff)
				}
				return
			}
		})
	}
}

// TestFaultsCarriedOutOrNot: at rate 1 every MKDIR is faulted: answered
// ones are not carried out, dropped ones are; calls that change nothing
// pass, and the counts add up.
func TestFaultsCarriedOutOrNot(t *testing.T) {
	faults := &Faults{Seed: 5, Rate: 1}
	dir, addr := behindFaults(t, faults)
	c := dialRaw(t, addr)
	root := c.mount(t)
	const calls = 40
	for i := range calls {
		name := fmt.Sprintf("d%d", i)
		before := faults.Injected()
		status, _ := c.call(t, nfsProgram, nfsProcMkdir, mkdirArgs(root, name))
		kind := injectedBy(t, before, faults.Injected())
		want := faultStatuses[kind]
		if kind == FaultDropped {
			want = statusLostReply
			c = dialRaw(t, addr)
		}
		if status != want {
			t.Errorf("MKDIR %s faulted %s answered %d, want %d", name, kind, status, want)
		}
		_, err := os.Stat(filepath.Join(dir, name))
		if made := err == nil; made != (kind == FaultDropped) {
			t.Errorf("MKDIR %s faulted %s carried out: %v", name, kind, made)
		}
	}
	before := faults.Injected()
	if status, _ := c.call(t, nfsProgram, nfsProcGetAttr, root); status != nfs3OK {
		t.Errorf("GETATTR answered %d", status)
	}
	lookup := append(append([]byte(nil), root...), opaqueOf("d0")...)
	if status, _ := c.call(t, nfsProgram, nfsProcLookup, lookup); status != nfs3OK && status != nfs3ErrNoEnt {
		t.Errorf("LOOKUP answered %d", status)
	}
	injected := faults.Injected()
	if diff := cmp.Diff(before, injected); diff != "" {
		t.Errorf("calls that change nothing were faulted (-before +after):\n%s", diff)
	}
	total := 0
	for _, kind := range faultReplies {
		if injected[kind.kind] == 0 {
			t.Errorf("no %s in %d faults: %v", kind.kind, calls, injected)
		}
		total += injected[kind.kind]
	}
	if total != calls {
		t.Errorf("%d faults counted for %d calls: %v", total, calls, injected)
	}
}

// TestFaultsReproducibleBySeed: the n-th draw is the same for one seed,
// and the counts add up whichever goroutines draw.
func TestFaultsReproducibleBySeed(t *testing.T) {
	draws := func(f *Faults) []string {
		var out []string
		for range 100 {
			fault, hit := f.draw()
			if !hit {
				fault.kind = ""
			}
			out = append(out, fault.kind)
		}
		return out
	}
	first := draws(&Faults{Seed: 9, Rate: 0.5})
	if diff := cmp.Diff(first, draws(&Faults{Seed: 9, Rate: 0.5})); diff != "" {
		t.Errorf("seed 9 drew differently (-first +second):\n%s", diff)
	}
	if cmp.Equal(first, draws(&Faults{Seed: 10, Rate: 0.5})) {
		t.Error("seeds 9 and 10 drew alike")
	}

	f := &Faults{Seed: 9, Rate: 0.5}
	var wg sync.WaitGroup
	var mu sync.Mutex
	hits := 0
	for range 4 {
		wg.Go(func() {
			for range 250 {
				if _, hit := f.draw(); hit {
					mu.Lock()
					hits++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range f.Injected() {
		total += n
	}
	if total != hits || hits == 0 || hits == 1000 {
		t.Errorf("%d faults counted, %d drawn of 1000", total, hits)
	}
}
