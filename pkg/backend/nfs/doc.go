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
// an NFS export, exposed as an nfs PersistentVolume of that subdirectory. The
// Provisioner reaches the export in one of two ways:
//
//   - by speaking NFSv3 to server:path itself (no Config.MountPath): no mount,
//     no privilege, and a new export is one ProvisionerConfig away. MOUNT and
//     NFS are found through the server's portmapper, or both on Config.Port
//     (as go-nfs serves them); PersistentVolumes then carry the mount options
//     port and mountport, so that nodes mount the server provisioned on;
//   - through a mount of server:path in the manager's pod at Config.MountPath,
//     for servers that speak NFSv4 only.
//
// Beside each subdirectory a hidden owner marker names its PersistentVolume,
// and the hidden folder .provfleet-unsaved at the top of the export records
// the subdirectories whose PersistentVolume is not known to exist yet, which
// the controller reclaims through provisioning.Reclaimer. A new subdirectory
// has mode 0777 and the owner the server gives the manager's user, as with
// nfs-subdir-external-provisioner, unless Config.Directory or the
// StorageClass parameters mode, uid and gid (which win, field by field) set
// them; a uid or gid needs an export with no_root_squash, which gives root
// on the export to every client that reaches the server.
//
// With Config.NFSSubdir the Provisioner takes over an
// nfs-subdir-external-provisioner: the claims of that provisioner's
// StorageClasses are read as it reads them (dirvol.ParseNFSSubdirRequest),
// and, as a provisioning.VolumeRecorder, it records on each volume that
// provisioner made the fate of its directory, decided from the volume's class
// as that provisioner decides it (backend.NFSSubdir.VolumeOnDelete), before
// Delete acts on it; Delete keeps the directory of such a volume while no
// fate is recorded.
//
// A claim whose data source is a claim with a volume of this export gets
// a copy of that volume's subdirectory (provisioning.DataSourceProvisioner):
// dirvol.Cloner copies it in the background through dirvol.Store.Clone,
// speaking NFS by file handles (or through the mount), with no mount of
// the export; the source's path is taken only on this server and export,
// and only when the owner marker beside it names its volume.
//
// New takes a Config (backend.nfs of a ProvisionerConfig) and Options, whose
// Volumes, usually a backend.PathIndex, it reads to count capacity and refuse
// subdirectories that overlap other volumes of the server, which
// backend.NFSServer names by host and port. Speaking NFS, New does not wait
// for the server, and Close stops the copies and releases the connection.
// The Provisioner runs at most two copies, each in its own goroutine
// (dirvol.Cloner), which Close stops and waits for; its other methods run
// on the controller's workers. All share the one connection to the server,
// one call at a time.
package nfs
