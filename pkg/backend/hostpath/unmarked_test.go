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
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
)

func TestDeleteUnmarked(t *testing.T) {
	backendtest.CheckDeleteUnmarked(t, map[string]string{dirvol.AnnDeleteUnmarked: "true"}, func(t *testing.T) backendtest.UnmarkedVolume {
		_, root := layout(t)
		path := filepath.Join(root, "vols")
		p, err := New(Config{Path: path, HostPathRoot: root, DefaultNodeName: "node-a"}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(path, "made-by-hand")
		return backendtest.UnmarkedVolume{Backend: p, Dir: dir, Source: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dir}}}
	})
}
