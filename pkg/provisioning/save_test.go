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

package provisioning

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestSameSource(t *testing.T) {
	unset, dir := v1.HostPathUnset, v1.HostPathDirectory
	tests := map[string]struct {
		saved, made v1.PersistentVolumeSource
		want        bool
	}{
		"equal": {
			saved: v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/a"}},
			made:  v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/a"}},
			want:  true,
		},
		"saved with a default": {
			saved: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/a", Type: &unset}},
			made:  v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/a"}},
			want:  true,
		},
		"other path": {
			saved: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/a", Type: &unset}},
			made:  v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/b"}},
		},
		"other type": {
			saved: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/a", Type: &unset}},
			made:  v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/a", Type: &dir}},
		},
		"other kind": {
			saved: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/a"}},
			made:  v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/a"}},
		},
		"other list": {
			saved: v1.PersistentVolumeSource{CephFS: &v1.CephFSPersistentVolumeSource{Monitors: []string{"m1", "m2"}}},
			made:  v1.PersistentVolumeSource{CephFS: &v1.CephFSPersistentVolumeSource{Monitors: []string{"m1"}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := sameSource(tc.saved, tc.made)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("sameSource = %v, want %v", got, tc.want)
			}
		})
	}
}
