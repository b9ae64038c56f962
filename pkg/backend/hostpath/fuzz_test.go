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

package hostpath

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
)

func FuzzHostPath(f *testing.F) {
	backendtest.FuzzConfinement(f, backendtest.FuzzBackend{
		New: func(_ *testing.T, root, base string, onDelete backend.OnDeletePolicy, opts backendtest.FuzzOptions) (backendtest.Reclaiming, error) {
			return New(Config{Path: base, HostPathRoot: root, NodeName: "node-a", OnDelete: onDelete},
				Options{ProvisionerNames: opts.ProvisionerNames, Volumes: opts.Volumes, Now: opts.Now})
		},
		LocalPath: func(pv *corev1.PersistentVolume, base string) string { return pv.Spec.Local.Path },
	})
}
