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

package backend

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// HostVolumePath returns the path a local or hostPath PersistentVolume names
// on its node's file system; ok is false for any other source.
func HostVolumePath(pv *corev1.PersistentVolume) (volumePath string, ok bool) {
	switch {
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path, true
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path, true
	}
	return "", false
}

// Overlaps reports whether one of two clean paths, both absolute or both
// relative, is the other or lies inside it.
func Overlaps(a, b string) bool {
	return within(a, b) || within(b, a)
}

// within reports whether inner is outer or lies inside it.
func within(inner, outer string) bool {
	return inner == outer || strings.HasPrefix(inner, strings.TrimSuffix(outer, "/")+"/")
}
