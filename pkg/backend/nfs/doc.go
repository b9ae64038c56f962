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

// Package nfs is the backend.nfs provisioner: each claim gets a subdirectory of
// an NFS export that the manager's pod has mounted, exposed as an nfs
// PersistentVolume of that subdirectory. Beside each subdirectory a hidden
// owner marker names its PersistentVolume, and the hidden folder
// .provfleet-unsaved at the top of the export records the subdirectories whose
// PersistentVolume is not known to exist yet, which the controller reclaims
// through provisioning.Reclaimer. A new subdirectory has mode 0777 and the
// owner the server gives the manager's user, as with
// nfs-subdir-external-provisioner, unless Config.Directory or the
// StorageClass parameters mode, uid and gid (which win, field by field) set
// them; a uid or gid needs an export with no_root_squash.
//
// New takes a Config (backend.nfs of a ProvisionerConfig) and Options, whose
// Volumes, usually a backend.PathIndex, it reads to count capacity and refuse
// subdirectories that overlap other volumes of the server. The Provisioner
// runs no goroutine: its methods run on the controller's workers.
package nfs
