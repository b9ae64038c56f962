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

// Package hostpath is the backend.hostPath provisioner of a node agent: each
// claim gets a directory below a folder of the agent's own node's
// filesystem, exposed as a local or a hostPath PersistentVolume pinned to
// that node by required node affinity and the annotation backend.AnnNode. A
// claim selected to another node is refused with ProvisioningReschedule.
// Beside each directory a hidden owner marker names its PersistentVolume,
// and the hidden folder .provfleet-unsaved at the top of the folder records
// the directories whose PersistentVolume is not known to exist yet, which
// the controller reclaims through provisioning.Reclaimer. A new directory
// has mode 0777 and the agent's user as owner, as with
// nfs-subdir-external-provisioner, unless Config.Directory or the
// StorageClass parameters mode, uid and gid (which win, field by field) set
// them. The capacity budget counts the volumes of the node only, so it
// applies per node.
//
// New takes a Config (backend.hostPath of a ProvisionerConfig and the node
// agent's --host-path-root and node) and Options, whose Volumes, usually a
// backend.PathIndex, it reads to count capacity and refuse directories that
// overlap other volumes of the node. ReleaseRemoved takes the
// PersistentVolumes the manager deleted while the node was gone, each with
// the onDelete policy its Delete would have applied, and applies it to their
// directories.
//
// A claim whose data source is another claim (ProvisionOptions.CloneSource)
// of the same node and base gets a copy of that claim's volume
// (dirvol.Store.Clone): the first Provision starts the copy in the
// background and answers ProvisioningInBackground, later ones the same
// until it finished, then the PersistentVolume; a copy that failed leaves
// nothing, a claim that abandoned it (ProvisionOptions.Abandoned) stops it
// and removes what it made, and the special files it skipped are told in a
// Warning Event. The source's directory is found from its
// PersistentVolume's path, taken only when it lies in the base and the
// owner marker beside it names that volume.
//
// Goroutines: at most two copies, each in its own goroutine
// (dirvol.Cloner), which Close stops and waits for; every other
// method runs on the caller's goroutine (the controller's workers, or the
// node agent's for ReleaseRemoved).
package hostpath
