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
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/backend"
)

// createModes are CREATE's createmode3 as the script reports them.
const (
	guardedMode   = 1
	exclusiveMode = 2
)

// scripted serves a folder with opts behind a Hostile server that
// answers CREATE as script says, and returns the folder and a function
// making clients of it (each a process of its own, as far as the server
// can tell).
func scripted(t *testing.T, opts nfsserver.Options, script *nfsserver.CreateScript) (string, func() *Client) {
	t.Helper()
	e := serve(t, opts)
	script.Upstream = e.server.Addr()
	h := front(t, e, script.Answer)
	return e.dir, func() *Client {
		c := New(Options{Server: h.Host(), Port: h.Port(), Path: "/", SourcePort: Unreserved})
		t.Cleanup(c.Close)
		return c
	}
}

// hostFile is the content and mode of a file the server holds.
type hostFile struct {
	Content string
	Mode    fs.FileMode
}

func readHostFile(t *testing.T, path string) hostFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return hostFile{Content: string(data), Mode: info.Mode()}
}

// TestCreateAfterALostReply: an EXCLUSIVE CREATE whose reply was lost after
// the server made the file is sent again with the same verifier, by the same
// call or, when that reply is lost too, by a later client, and the server
// answers success for the file it made: one file, its content complete.
func TestCreateAfterALostReply(t *testing.T) {
	tests := map[string]struct {
		lostReplies int
		// wantFirstErr says the first client fails, and a second one retries.
		wantFirstErr bool
	}{
		"retried by the call":           {lostReplies: 1},
		"retried by a restarted client": {lostReplies: 2, wantFirstErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			script := &nfsserver.CreateScript{Exclusive: true, LoseReplies: tt.lostReplies}
			dir, client := scripted(t, nfsserver.Options{}, script)
			err := client().CreateFile(t.Context(), "record", []byte("complete"), 0o600)
			if gotErr := err != nil; gotErr != tt.wantFirstErr {
				t.Fatalf("first CreateFile: %v, want an error: %v", err, tt.wantFirstErr)
			}
			if tt.wantFirstErr {
				if err := client().CreateFile(t.Context(), "record", []byte("complete"), 0o600); err != nil {
					t.Fatalf("CreateFile of a restarted client: %v", err)
				}
			}
			if diff := cmp.Diff(hostFile{"complete", 0o600}, readHostFile(t, filepath.Join(dir, "record"))); diff != "" {
				t.Errorf("file made (-want +got):\n%s", diff)
			}
			creates := script.Creates()
			if len(creates) != 1+tt.lostReplies {
				t.Fatalf("%d CREATEs, want %d", len(creates), 1+tt.lostReplies)
			}
			for i, create := range creates {
				if create.How != exclusiveMode || create.Verifier != creates[0].Verifier {
					t.Errorf("CREATE %d: mode %d, verifier %x; want EXCLUSIVE with the first's verifier %x", i+1, create.How, create.Verifier, creates[0].Verifier)
				}
			}
		})
	}
}

// TestCreateExclusiveRefusesOtherContent: a CREATE of a name made with
// other data is no retry, and fails as taken.
func TestCreateExclusiveRefusesOtherContent(t *testing.T) {
	_, client := scripted(t, nfsserver.Options{}, &nfsserver.CreateScript{Exclusive: true})
	c := client()
	if err := c.CreateFile(t.Context(), "owner", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateFile(t.Context(), "owner", []byte("another"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("CreateFile with other data: %v, want fs.ErrExist", err)
	}
}

// TestCreateModes: a file gets exactly its mode, whether SETATTR sets it
// before the data or, for a mode that does not let the owner write, after;
// EXCLUSIVE or GUARDED.
func TestCreateModes(t *testing.T) {
	for name, exclusive := range map[string]bool{"exclusive": true, "guarded": false} {
		t.Run(name, func(t *testing.T) {
			dir, client := scripted(t, nfsserver.Options{}, &nfsserver.CreateScript{Exclusive: exclusive})
			c := client()
			for _, perm := range []fs.FileMode{0o600, 0o640, 0o440, 0o400} {
				file := backend.FormatMode(perm)
				if err := c.CreateFile(t.Context(), file, []byte(file), perm); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(hostFile{file, perm}, readHostFile(t, filepath.Join(dir, file))); diff != "" {
					t.Errorf("%s (-want +got):\n%s", file, diff)
				}
			}
		})
	}
}

// TestCreateFallsBackToGuarded: a server that answers NFS3ERR_NOTSUPP to
// EXCLUSIVE (go-nfs) is asked once per client, then GUARDED; no CREATE
// carries a mode, which SETATTR sets.
func TestCreateFallsBackToGuarded(t *testing.T) {
	script := &nfsserver.CreateScript{}
	dir, client := scripted(t, nfsserver.Options{}, script)
	c := client()
	for _, name := range []string{"one", "two"} {
		if err := c.CreateFile(t.Context(), name, []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(hostFile{name, 0o600}, readHostFile(t, filepath.Join(dir, name))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	var got []nfsserver.Create
	for _, create := range script.Creates() {
		got = append(got, nfsserver.Create{Name: create.Name, How: create.How, SetsMode: create.SetsMode})
	}
	want := []nfsserver.Create{{Name: "one", How: exclusiveMode}, {Name: "one", How: guardedMode}, {Name: "two", How: guardedMode}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CREATEs (-want +got):\n%s", diff)
	}
}

// TestCreateModeRefused: a server that cannot set a mode makes the file
// and fails the SETATTR: the error says so, and the file is removed again.
func TestCreateModeRefused(t *testing.T) {
	dir, client := scripted(t, nfsserver.Options{NoAttributeChanges: true}, &nfsserver.CreateScript{})
	err := client().CreateFile(t.Context(), "record", []byte("content"), 0o600)
	if !errors.Is(err, backend.ErrModeRefused) || errors.Is(err, fs.ErrExist) {
		t.Errorf("CreateFile: %v, want an error wrapping backend.ErrModeRefused", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("export holds %v (%v), want nothing left", entries, err)
	}
}
