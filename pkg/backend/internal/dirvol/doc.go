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

// Package dirvol is the directory logic the hostpath and nfs backends share: it
// renders a claim's path pattern, refuses hostile results, reserves capacity,
// and creates, archives and removes volume directories through a Filesystem,
// one directory handle at a time and never through a symlink, so no operation
// can leave the base directory. A new volume directory gets its mode exactly,
// whatever the umask (0777 unless the backend or the claim's StorageClass,
// which wins, sets one), and its owner when a uid or gid is set; a chown the
// file system refuses fails the claim with what to do, and removes the
// directory again. Beside each directory a hidden owner marker
// names its PersistentVolume; before making a directory it writes a record of
// it, tagged with its provisioner and synced to disk, in the hidden folder
// .provfleet-unsaved at the top of the base, kept until it is told that the
// PersistentVolume exists or the directory is removed, so a directory whose
// PersistentVolume was never created can be found and deleted. A record's
// name is a hash of its PersistentVolume and directory, so an empty or cut
// short record of that name is an earlier try's (a server that made it and
// answered with an error, or whose answer was lost): it is written into
// (Dir.RewriteFile), not created again, and one that cannot be written is
// removed; a file system that cannot set a record's mode fails the claim
// with backend.ErrModeRefused, which is not its being unavailable, and
// leaves no record (journal.go says why the mode matters). A deleted
// directory is moved into the hidden folder .provfleet-deleting, and its files
// deleted from there without holding up other claims, by RemoveTree: a walk
// that holds three directories open and a batch of names whatever the
// tree's depth or width, and that a later delete continues where one that
// ran out of time stopped.
//
// Three verbs name what happens to a directory that a volume leaves:
// delete is what a caller asks for a PersistentVolume (Delete, DeleteAt,
// DeleteByName, DeleteUndecided); release is applying its onDelete policy
// under the lock (Release for the volumes of a removed node, releaseLocked,
// releaseMarked, applyPolicy), which retains, archives or moves it into
// the trash; purge deletes the files of what is in the trash.
//
// New reaches nothing;
// Probe reaches the base, makes the record folder the first time and requires
// it afterwards, and reports the space of the base's file system (Dir.Space),
// and Create refuses a claim larger than the space left, as it refuses one
// beyond the capacity budget (of the volumes Config.Counts accepts), with an
// error wrapping provisioning.ErrNoRoom unless the claim is larger than the
// whole file system or budget, so that it waits for room.
// ParseRequest reads a claim's StorageClass parameters, ours and those of
// nfs-subdir-external-provisioner (its ${.PVC.<key>} patterns, onDelete and
// archiveOnDelete, with its defaults for a class in its style) and
// local-path-provisioner (nodePath; its userPattern, groupPattern and
// permPattern are applied by ApplyLocalPathPatterns, as the lines of its
// setup script applied them); ParseNFSSubdirRequest reads a class of
// an nfs-subdir-external-provisioner taken over exactly as that provisioner's
// release reads it, and its claims' k8s-sigs.io/nfs-directory-* annotations;
// NewPV records the class's onDelete
// policy on the PersistentVolume (backend.AnnOnDelete), and Delete goes by that
// record, or by the configured policy where there is none; ArchiveAsNFSSubdir
// moves a directory to archived-<name> at the top of the base, and
// DeleteUndecided keeps a directory whose fate is not known.
// Clone is Create for a volume that is a copy of another volume of the
// store (clone.go): the copy (CopyTree, bounded in memory, descriptors and
// depth whatever the source's shape, and in bytes by the claim's request)
// is made outside the lock into a hidden directory beside the volume's,
// renamed into place once complete, so a crash leaves a record and a half
// copy that the delete of the recorded volume removes, never half a
// volume; DropClone removes what a failed or abandoned clone made. The copy
// goes through Dir.CopyTo, so that a Filesystem walks by its cheapest
// directories (file handles over NFS), and Cloner runs the copies of a
// backend's clones in the background (cloner.go), as hostpath and nfs do.
// With Config.Adopt, Create adopts an existing unmarked directory instead of
// refusing it when one released, retained PersistentVolume of the same
// claim namespace and name names exactly it (adopt.go): it writes the owner
// marker only, and RecordAdoption marks both volumes and tells the claim.
// Release takes PersistentVolumes deleted elsewhere, each with its onDelete
// policy, finds their directories by their owner markers, walking the
// folders a pattern renders and nothing else (no symlink, hidden folder,
// archive or marked volume directory), and applies the policy to those whose
// PersistentVolume does not exist and that no record names.
//
// A Store gets from its backend the file system that holds the base
// (Config.FS: LocalFS, the host's through os.Root; nfsfs, an NFSv3 export
// through a userspace client; or any implementation of Filesystem and Dir,
// which dirvoltest.TestFilesystem checks, and dirvoltest.TestRelease with a
// Store over it), the mapping between PersistentVolumes and directories
// (Config.VolumeDir, OwnDir, Locate) and, through Options.Volumes, what it
// reads of the cluster's PersistentVolumes; it gives the backend the
// directories, Delete and Saved for provisioning.Provisioner and Reclaimer,
// Release, and the records of unsaved volumes. Built with the tag chaos, New
// wraps Config.FS in a fault layer (faults_chaos.go) that the environment
// turns on (internal/chaoshistory names its variables and the history's
// format): it fails a seeded share of the mutating Dir operations (neither
// reads, opens nor syncs) with an errno, before carrying them out or after,
// and appends each of them to a history file; a build without the tag
// carries none of it. It runs no goroutine: every method runs on its caller's, and a
// deleted directory's files are deleted by the call that moved it aside,
// outside the lock.
package dirvol
