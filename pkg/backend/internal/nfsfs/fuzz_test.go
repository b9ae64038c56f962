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
	"path"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
)

// FuzzNFSStore drives a dirvol.Store on a go-nfs export serving the fuzzed
// tree's root: nothing outside the volume's base may change on the server.
func FuzzNFSStore(f *testing.F) {
	backendtest.FuzzConfinement(f, backendtest.FuzzBackend{
		New: func(t *testing.T, root, base string, onDelete backend.OnDeletePolicy, opts backendtest.FuzzOptions) (backendtest.Reclaiming, error) {
			t.Helper()
			rel, err := filepath.Rel(root, base)
			if err != nil {
				return nil, err
			}
			return newProvisioner(t, root, filepath.ToSlash(rel), onDelete,
				dirvol.Options{ProvisionerNames: opts.ProvisionerNames, Volumes: opts.Volumes, Now: opts.Now})
		},
		LocalPath: func(pv *corev1.PersistentVolume, base string) string {
			// The fuzzed tree's base is a folder of the served root.
			return base + strings.TrimPrefix(pv.Spec.NFS.Path, path.Join(exportPath, filepath.Base(base)))
		},
	})
}
