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

package nfs

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
)

// FuzzNFS drives the backend speaking NFS to a go-nfs server that exports
// the fuzzed tree's base: nothing outside the volume's base may change on
// the server. (FuzzNFSStore in nfsfs serves the tree's root, to keep a base
// below the export.)
func FuzzNFS(f *testing.F) {
	backendtest.FuzzConfinement(f, backendtest.FuzzBackend{
		New: func(t *testing.T, _, base string, onDelete backend.OnDeletePolicy, opts backendtest.FuzzOptions) (backendtest.Reclaiming, error) {
			t.Helper()
			cfg := Config{Path: "/export", OnDelete: onDelete}
			server, err := nfsserver.Start(t.Context(), nfsserver.Options{Dir: base, Path: cfg.Path})
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() {
				if err := server.Stop(); err != nil {
					t.Error(err)
				}
			})
			cfg.Server, cfg.Port = "127.0.0.1", server.Port()
			p, err := New(cfg, Options{ProvisionerNames: opts.ProvisionerNames, Volumes: opts.Volumes, Now: opts.Now})
			if err != nil {
				return nil, err
			}
			t.Cleanup(p.Close)
			return p, nil
		},
		LocalPath: func(pv *corev1.PersistentVolume, base string) string {
			return base + strings.TrimPrefix(pv.Spec.NFS.Path, "/export")
		},
	})
}
