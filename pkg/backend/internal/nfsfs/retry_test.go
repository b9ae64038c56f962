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

package nfsfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/backend/internal/nfsclient"
)

// scriptedClient serves the fixture's export with opts behind a Hostile
// server that answers CREATE as script says, and returns a client of it.
func (f storeFixture) scriptedClient(t *testing.T, opts nfsserver.Options, script *nfsserver.CreateScript) *nfsclient.Client {
	t.Helper()
	opts.Dir, opts.Path = f.root, exportPath
	server, err := nfsserver.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := server.Stop(); err != nil {
			t.Error(err)
		}
	})
	script.Upstream = server.Addr()
	hostile, err := nfsserver.StartHostile(context.Background(), nfsserver.HostileOptions{Upstream: server.Addr(), Answer: script.Answer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := hostile.Stop(); err != nil {
			t.Error(err)
		}
	})
	client := nfsclient.New(nfsclient.Options{Server: hostile.Host(), Port: hostile.Port(), Path: exportPath, SourcePort: nfsclient.Unreserved})
	t.Cleanup(client.Close)
	return client
}

// records lists the files in the folder of records.
func (f storeFixture) records(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(f.base, dirvol.JournalDir))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// isRecord picks the names of record files.
func isRecord(name string) bool { return strings.HasSuffix(name, ".json") }

// isMarker picks the names of owner markers.
func isMarker(name string) bool { return strings.HasSuffix(name, ".provfleet-volume") }

// TestStoreCreateSafeToRetry: a record file that the server made while
// its answer was lost, or answered with an error, is recognised as the
// claim's own and reused, and so is an owner marker the server made empty
// and answered with an error, and the claim's volume is made; a server that
// cannot set a record's mode fails every try with an error that says so,
// leaves no record, and is not waited for as an unavailable one.
func TestStoreCreateSafeToRetry(t *testing.T) {
	tests := map[string]struct {
		opts   nfsserver.Options
		script *nfsserver.CreateScript
		tries  int
		// wantErr is what the last try's error wraps; nil: it provisions.
		wantErr error
		// maxCreates bounds the CREATEs of all tries.
		maxCreates int
	}{
		"exclusive, the first reply lost": {
			script: &nfsserver.CreateScript{Exclusive: true, LoseReplies: 1},
			tries:  1, maxCreates: 3,
		},
		"exclusive refused, the first reply lost": {
			script: &nfsserver.CreateScript{LoseReplies: 1},
			tries:  2, maxCreates: 4,
		},
		"exclusive refused, every record's create carried out and failed": {
			script: &nfsserver.CreateScript{FailCreate: isRecord},
			tries:  1, maxCreates: 3,
		},
		"exclusive refused, the owner marker's create carried out and failed": {
			script: &nfsserver.CreateScript{FailCreate: isMarker},
			tries:  2, maxCreates: 8,
		},
		"no mode can be set": {
			opts:   nfsserver.Options{NoAttributeChanges: true},
			script: &nfsserver.CreateScript{},
			tries:  3, wantErr: backend.ErrModeRefused, maxCreates: 4,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f := newStoreFixture(t)
			p := f.provisionerOf(t, f.scriptedClient(t, tt.opts, tt.script), backend.OnDeleteDelete)
			opts := backendtest.Options(backendtest.Claim("team", "data", "1Gi"), backendtest.Class(nil))
			var pv *corev1.PersistentVolume
			var err error
			for range tt.tries {
				pv, _, err = p.Provision(t.Context(), opts)
			}
			if creates := len(tt.script.Creates()); creates > tt.maxCreates {
				t.Errorf("%d CREATEs in %d tries, want at most %d", creates, tt.tries, tt.maxCreates)
			}
			if tt.wantErr != nil {
				t.Logf("Provision, try %d: %v", tt.tries, err)
				if !errors.Is(err, tt.wantErr) || errors.Is(err, backend.ErrUnavailable) {
					t.Errorf("Provision: %v, want an error wrapping %v, not %v", err, tt.wantErr, backend.ErrUnavailable)
				}
				if diff := cmp.Diff([]string{}, f.records(t)); diff != "" {
					t.Errorf("records left (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Provision, try %d: %v", tt.tries, err)
			}
			if info, err := os.Stat(hostPath(f.root, pv)); err != nil || !info.IsDir() {
				t.Errorf("volume directory: %v, want one made", err)
			}
			if diff := cmp.Diff([]string{pv.Name}, backendtest.UnsavedNames(t, p)); diff != "" {
				t.Errorf("volumes on record (-want +got):\n%s", diff)
			}
			if records := f.records(t); len(records) != 1 {
				t.Errorf("records %v, want one", records)
			}
		})
	}
}
