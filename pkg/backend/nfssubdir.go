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
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// OnDeleteArchiveAsNFSSubdir renames the directory to archived-<name>,
// <name> being its last component, at the top of the base (an NFS export),
// as nfs-subdir-external-provisioner archives. Where that name is taken,
// nfs-subdir-external-provisioner's rename fails on every retry and the volume
// is never released; here the name gets the suffix -<UTC timestamp> instead.
// It is recorded on PersistentVolumes only, never configured.
const OnDeleteArchiveAsNFSSubdir OnDeletePolicy = "ArchiveAsNFSSubdir"

// NFSSubdirArchive returns the name nfs-subdir-external-provisioner archives
// the directory dir to, at the top of the export: archived-<name>, <name>
// being the last component of dir.
func NFSSubdirArchive(dir string) string {
	return "archived-" + path.Base(dir)
}

// The StorageClass parameters nfs-subdir-external-provisioner reads.
const (
	NFSSubdirParamPathPattern     = "pathPattern"
	NFSSubdirParamOnDelete        = "onDelete"
	NFSSubdirParamArchiveOnDelete = "archiveOnDelete"
)

// NFSSubdir is an nfs-subdir-external-provisioner whose volumes a backend
// took over: the name it provisioned as and the version of its image, where
// its behaviour changed.
type NFSSubdir struct {
	// ProvisionerName is its PROVISIONER_NAME: the provisioner of its
	// StorageClasses and the pv.kubernetes.io/provisioned-by of its volumes.
	ProvisionerName string
	// Version is its image's version, such as v4.0.2.
	Version NFSSubdirVersion
}

// NFSSubdirVersion is a release of nfs-subdir-external-provisioner.
type NFSSubdirVersion struct {
	Major, Minor, Patch int
}

// ParseNFSSubdirVersion reads a version such as v4.0.2 or 4.0.3.
func ParseNFSSubdirVersion(text string) (NFSSubdirVersion, error) {
	parts := strings.Split(strings.TrimPrefix(text, "v"), ".")
	if len(parts) != 3 {
		return NFSSubdirVersion{}, fmt.Errorf("version %q is not of the form v<major>.<minor>.<patch>", text)
	}
	var numbers [3]int
	for i, part := range parts {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return NFSSubdirVersion{}, fmt.Errorf("version %q is not of the form v<major>.<minor>.<patch>", text)
		}
		numbers[i] = n
	}
	return NFSSubdirVersion{Major: numbers[0], Minor: numbers[1], Patch: numbers[2]}, nil
}

func (v NFSSubdirVersion) String() string {
	return fmt.Sprintf("v%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// atLeast reports whether v is other or later.
func (v NFSSubdirVersion) atLeast(other NFSSubdirVersion) bool {
	if v.Major != other.Major {
		return v.Major > other.Major
	}
	if v.Minor != other.Minor {
		return v.Minor > other.Minor
	}
	return v.Patch >= other.Patch
}

// nfsSubdirV403 is the release whose Delete acts on a volume's own
// directory, where earlier ones act on <export>/<last component>, and that
// reads the claim annotations k8s-sigs.io/nfs-directory-mode, -uid and -gid.
var nfsSubdirV403 = NFSSubdirVersion{Major: 4, Minor: 0, Patch: 3}

// ReadsDirectoryAnnotations reports whether this version gives a new
// directory the mode and owner its claim's k8s-sigs.io/nfs-directory-*
// annotations ask for.
func (n NFSSubdir) ReadsDirectoryAnnotations() bool {
	return n.Version.atLeast(nfsSubdirV403)
}

// Owns reports whether pv was made by this nfs-subdir-external-provisioner.
func (n NFSSubdir) Owns(pv *corev1.PersistentVolume) bool {
	return n.ProvisionerName != "" && pv.Annotations[provisioning.AnnDynamicallyProvisioned] == n.ProvisionerName
}

// ErrFateUndecided is wrapped by the error of a volume whose fate
// nfs-subdir-external-provisioner would not decide either: its Delete fails
// on every retry and the directory stays.
var ErrFateUndecided = errors.New("nfs-subdir-external-provisioner would fail to delete this volume on every retry and keep its directory")

// OnDelete returns what this nfs-subdir-external-provisioner's Delete does to
// the directory dir (relative to the export) of a volume of a class with
// params: the class's onDelete, compared with the lower-case words delete and
// retain only; else its archiveOnDelete as strconv.ParseBool reads it, false
// deleting; else, or with archiveOnDelete true, an archive at the top of the
// export. Before v4.0.3 Delete acts on <export>/<last component of dir>, not
// on dir: a directory nested in folders is never touched, so it is retained.
// An archiveOnDelete that is no boolean wraps ErrFateUndecided.
func (n NFSSubdir) OnDelete(params map[string]string, dir string) (OnDeletePolicy, error) {
	if !n.Version.atLeast(nfsSubdirV403) && strings.Contains(dir, "/") {
		return OnDeleteRetain, nil
	}
	switch params[NFSSubdirParamOnDelete] {
	case "delete":
		return OnDeleteDelete, nil
	case "retain":
		return OnDeleteRetain, nil
	}
	value, ok := params[NFSSubdirParamArchiveOnDelete]
	if !ok {
		return OnDeleteArchiveAsNFSSubdir, nil
	}
	archive, err := strconv.ParseBool(value)
	if err != nil {
		return "", fmt.Errorf("parameter %s: %w: %w", NFSSubdirParamArchiveOnDelete, ErrFateUndecided, err)
	}
	if !archive {
		return OnDeleteDelete, nil
	}
	return OnDeleteArchiveAsNFSSubdir, nil
}

// VolumeOnDelete is OnDelete for pv, an old volume of this
// nfs-subdir-external-provisioner whose directory is dir, of class (nil when
// pv's class does not exist): as nfs-subdir-external-provisioner decides at
// delete time, from the class as it is. Without a class the decision wraps
// ErrFateUndecided.
func (n NFSSubdir) VolumeOnDelete(pv *corev1.PersistentVolume, class *storagev1.StorageClass, dir string) (OnDeletePolicy, error) {
	switch {
	case pv.Spec.StorageClassName == "":
		return "", fmt.Errorf("volume %s has no StorageClass: %w", pv.Name, ErrFateUndecided)
	case class == nil:
		return "", fmt.Errorf("StorageClass %s of volume %s does not exist: %w", pv.Spec.StorageClassName, pv.Name, ErrFateUndecided)
	}
	policy, err := n.OnDelete(class.Parameters, dir)
	if err != nil {
		return "", fmt.Errorf("StorageClass %s of volume %s: %w", class.Name, pv.Name, err)
	}
	return policy, nil
}

// VolumeRecord returns the annotations that record on pv, an old volume of
// this nfs-subdir-external-provisioner whose directory is dir, the fate
// VolumeOnDelete decides, and leave to release that directory, which carries
// no owner marker. Its error is VolumeOnDelete's.
func (n NFSSubdir) VolumeRecord(pv *corev1.PersistentVolume, class *storagev1.StorageClass, dir string) (map[string]string, error) {
	policy, err := n.VolumeOnDelete(pv, class, dir)
	if err != nil {
		return nil, err
	}
	return map[string]string{AnnOnDelete: string(policy), AnnDeleteUnmarked: "true"}, nil
}
