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

	corev1 "k8s.io/api/core/v1"
)

func TestSameSource(t *testing.T) {
	unset, dir := corev1.HostPathUnset, corev1.HostPathDirectory
	tests := map[string]struct {
		saved, made corev1.PersistentVolumeSource
		want        bool
	}{
		"equal": {
			saved: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/a"}},
			made:  corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/a"}},
			want:  true,
		},
		"saved with a default": {
			saved: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/a", Type: &unset}},
			made:  corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/a"}},
			want:  true,
		},
		"other path": {
			saved: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/a", Type: &unset}},
			made:  corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/b"}},
		},
		"other type": {
			saved: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/a", Type: &unset}},
			made:  corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/a", Type: &dir}},
		},
		"other kind": {
			saved: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/a"}},
			made:  corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/a"}},
		},
		"other list": {
			saved: corev1.PersistentVolumeSource{CephFS: &corev1.CephFSPersistentVolumeSource{Monitors: []string{"m1", "m2"}}},
			made:  corev1.PersistentVolumeSource{CephFS: &corev1.CephFSPersistentVolumeSource{Monitors: []string{"m1"}}},
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
