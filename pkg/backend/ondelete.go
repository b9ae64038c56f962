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
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// AnnOnDelete records on a PersistentVolume the onDelete policy of its class
// when it was made, so that a class changed or deleted before the volume
// does not change what happens to its directory. A PersistentVolume without
// it goes by the backend's onDelete at the time it is deleted.
const AnnOnDelete = "provfleet.io/on-delete"

// AnnDeleteUnmarked is the annotation that, set to "true" on a
// PersistentVolume, lets its release
// delete or archive a directory that has no owner marker: one made before
// markers existed, or by another provisioner whose volumes were handed over.
// Without it such a directory is refused, since it may hold what a retained
// or archived volume left behind, or data a hand-made PersistentVolume names.
const AnnDeleteUnmarked = "provfleet.io/delete-unmarked"

// VolumeOnDelete returns the onDelete policy recorded on pv, or configured
// when it records none. A value that names no policy is an error: nothing is
// deleted in doubt.
func VolumeOnDelete(pv *corev1.PersistentVolume, configured OnDeletePolicy) (OnDeletePolicy, error) {
	value, ok := pv.Annotations[AnnOnDelete]
	if !ok {
		return configured, nil
	}
	if policy := OnDeletePolicy(value); policy.Known() {
		return policy, nil
	}
	return "", fmt.Errorf("annotation %s: %q is not one of Delete, Retain, Archive, ArchiveAsNFSSubdir", AnnOnDelete, value)
}

// Known reports whether p is one of Delete, Retain, Archive and
// ArchiveAsNFSSubdir.
func (p OnDeletePolicy) Known() bool {
	switch p {
	case OnDeleteDelete, OnDeleteRetain, OnDeleteArchive, OnDeleteArchiveAsNFSSubdir:
		return true
	}
	return false
}

// RemovedOnDelete returns what is to become of the directory of pv when pv
// is deleted by someone other than its provisioner, as when the node that
// holds it is gone: what its provisioner's Delete would do. A volume whose
// reclaim policy is not Delete never reaches Delete, so its directory is
// retained; otherwise the policy is pv's own or configured (Delete when
// empty, the backends' default), and Retain when pv records a value that
// names no policy.
func RemovedOnDelete(pv *corev1.PersistentVolume, configured OnDeletePolicy) OnDeletePolicy {
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return OnDeleteRetain
	}
	if configured == "" {
		configured = OnDeleteDelete
	}
	policy, err := VolumeOnDelete(pv, configured)
	if err != nil {
		return OnDeleteRetain
	}
	return policy
}

// RemovedVolume is a PersistentVolume that was deleted while its backend
// could not be reached, with what is to become of its directory.
type RemovedVolume struct {
	PVName   string
	OnDelete OnDeletePolicy
}
