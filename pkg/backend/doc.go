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

// Package backend holds what the built-in directory backends (hostpath, nfs)
// share with the code that configures them: the onDelete policies, with
// the one recorded on each PersistentVolume (AnnOnDelete) and the one its
// directory gets when someone else deleted it (RemovedOnDelete), the fate
// nfs-subdir-external-provisioner gives a volume's directory (NFSSubdir), the
// capacity budget, the error classes a caller maps to a ProvisionerConfig's
// Ready reason, and PathIndex, the index of PersistentVolumes by the paths they
// name, through which a backend finds the volumes a new directory would
// overlap without going through every volume.
//
// Paths are keyed by the file system that holds them: an NFS server's, or a
// node's for hostPath and local volumes. The node of such a volume is its
// AnnNode annotation or, for a volume of another provisioner (such as
// local-path-provisioner), the one value of its required node affinity on
// kubernetes.io/hostname (VolumeNode); a backend asks for a node's paths with
// HostNode(node), which also finds the volumes pinned to no node, since
// those may be on any. So the node agents of two nodes with the same base
// path neither refuse each other's directories nor count each other's
// volumes: a hostPath backend's capacity budget (maxVolumes, storage) counts
// the volumes of its own node only, and so applies per node.
//
// The part below pkg/backend works like this:
//
//   - In: the fleet turns a ProvisionerConfig's spec.backend into a
//     hostpath.Config or nfs.Config (pkg/fleet/backends.go) and gives the
//     backend a PathIndex over the fleet's shared PersistentVolume informer,
//     to which it added VolumePathIndex before the informer started. The
//     controller then hands it claims as provisioning.ProvisionOptions, and
//     PersistentVolumes to Delete and to settle with Saved.
//   - Out: a directory per claim below the configured base, with a hidden
//     owner marker beside it; the PersistentVolume with its source (local
//     with node affinity, hostPath, or nfs) that the controller saves; and,
//     through provisioning.Reclaimer, the journal of unsaved records
//     (.provfleet-unsaved), the directories whose PersistentVolume is not
//     known to exist yet. New returns errors that wrap ErrInvalidSpec or
//     ErrUnavailable.
//   - Goroutines: none. Every call runs on the caller's goroutine (the
//     controller's workers); the files of a deleted directory are deleted by
//     the Delete or Saved that moved it aside, once it released the lock.
//
// The directory logic both backends share lives in internal/dirvol; the test
// support both backends' tests share lives in internal/backendtest.
package backend
