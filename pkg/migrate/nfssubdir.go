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

package migrate

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/nfs"
)

// The environment of nfs-subdir-external-provisioner's container
// (cmd/nfs-subdir-external-provisioner/provisioner.go), and from v4.0.3 the
// mode and owner of new directories.
const (
	envProvisionerName = "PROVISIONER_NAME"
	envNFSServer       = "NFS_SERVER"
	envNFSPath         = "NFS_PATH"
	envNFSDefaultMode  = "NFS_DEFAULT_MODE"
	envNFSDefaultUID   = "NFS_DEFAULT_UID"
	envNFSDefaultGID   = "NFS_DEFAULT_GID"
)

// subdirSettings is what the plan reads from nfs-subdir's Deployment.
type subdirSettings struct {
	subdir       backend.NFSSubdir
	server, path string
	directory    v1alpha1.VolumeDirectory
}

// planNFSSubdir plans the takeover of an nfs-subdir-external-provisioner by
// an NFS backend with nfsSubdir, and records on each of its volumes the
// fate backend.NFSSubdir decides, as the NFS backend records it itself.
func (p *Plan) planNFSSubdir(in *install, name string) {
	object := "Deployment " + p.Deployment.String()
	s, err := readSubdirSettings(in.container, p.Version)
	if err != nil {
		p.refuse(object, "%v", err)
		return
	}
	p.OldName = s.subdir.ProvisionerName
	backendSpec := v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{
		Server:          s.server,
		Path:            v1alpha1.AbsolutePath(s.path),
		VolumeDirectory: s.directory,
		NFSSubdir: &v1alpha1.NFSSubdirOrigin{
			ProvisionerName: v1alpha1.ProvisionerName(s.subdir.ProvisionerName),
			Version:         s.subdir.Version.String(),
		},
	}}
	p.newConfig(name, p.OldName, backendSpec)
	p.Notes = append(p.Notes, fmt.Sprintf("the manager reaches %s:%s over NFSv3 itself; a server that serves NFSv4 only needs a mount in the manager's pod and backend.nfs.mountPath", s.server, s.path))
	for _, pv := range in.volumesOf(p.OldName) {
		p.planSubdirVolume(s, pv, in.classes[pv.Spec.StorageClassName])
	}
	p.noteAdoptable()
}

// noteAdoptable notes, where a volume is adoptable, what it takes.
func (p *Plan) noteAdoptable() {
	if slices.ContainsFunc(p.Volumes, func(v Volume) bool { return strings.Contains(v.Fate, "; adoptable") }) {
		p.Notes = append(p.Notes, "a volume marked adoptable goes back to its claim made again only with the backend's adoptRetainedDirectories: true, "+
			"which this plan leaves off (see docs/migrating.md, \"A recreated claim of a fixed pathPattern\", for its proof and risk), "+
			"and only while the old PersistentVolume is kept: its reclaim policy Retain keeps it")
	}
}

// planSubdirVolume decides the fate of pv, a volume of class (nil when it
// does not exist).
func (p *Plan) planSubdirVolume(s subdirSettings, pv *corev1.PersistentVolume, class *storagev1.StorageClass) {
	object := "PersistentVolume " + pv.Name
	dir, err := nfs.VolumeDir(s.server, 0, s.path, pv)
	if err != nil {
		p.refuse(object, "the backend would not release it: %v", err)
		return
	}
	if recorded, ok := pv.Annotations[backend.AnnOnDelete]; ok {
		p.Volumes = append(p.Volumes, Volume{PV: pv, Fate: fate(pv, backend.OnDeletePolicy(recorded), s.path, dir) + " (recorded already)"})
		return
	}
	want, err := s.subdir.VolumeRecord(pv, class, dir)
	if err != nil {
		p.refuse(object, "%v; set the annotation %s to Delete, Retain or ArchiveAsNFSSubdir on it to decide its fate", err, backend.AnnOnDelete)
		return
	}
	policy := backend.OnDeletePolicy(want[backend.AnnOnDelete])
	p.Volumes = append(p.Volumes, Volume{PV: pv, Fate: fate(pv, policy, s.path, dir) + adoptable(pv, policy, class), Record: record(pv, want)})
}

// adoptable says, for a volume whose directory is retained (by its fate or
// its reclaim policy), of a class whose pathPattern names the same
// directory for a claim made again, what gives that claim the directory
// back: the backend's adoptRetainedDirectories and the old
// PersistentVolume kept as its proof.
func adoptable(pv *corev1.PersistentVolume, policy backend.OnDeletePolicy, class *storagev1.StorageClass) string {
	ref := pv.Spec.ClaimRef
	retained := policy == backend.OnDeleteRetain || pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain
	if !retained || class == nil || class.Parameters["pathPattern"] == "" || ref == nil {
		return ""
	}
	what := fmt.Sprintf("; adoptable by claim %s/%s made again", ref.Namespace, ref.Name)
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		what += " once its reclaim policy is Retain"
	}
	return what
}

// readSubdirSettings reads the environment of nfs-subdir's container, and
// the release it runs: version, else its image's tag.
func readSubdirSettings(c *corev1.Container, version string) (subdirSettings, error) {
	var s subdirSettings
	var err error
	if s.subdir.Version, err = backend.ParseNFSSubdirVersion(version); err != nil {
		return s, fmt.Errorf("cannot tell the release of nfs-subdir-external-provisioner from its image %s (%w): give it with --version", c.Image, err)
	}
	required := map[string]*string{envProvisionerName: &s.subdir.ProvisionerName, envNFSServer: &s.server, envNFSPath: &s.path}
	for _, name := range []string{envProvisionerName, envNFSServer, envNFSPath} {
		value, err := envValue(c, name)
		if err != nil {
			return s, err
		}
		if value == "" {
			return s, fmt.Errorf("environment variable %s is not set; nfs-subdir-external-provisioner does not start without it", name)
		}
		*required[name] = value
	}
	s.path = path.Clean(s.path)
	if s.subdir.ReadsDirectoryAnnotations() {
		s.directory, err = readSubdirDirectory(c)
	}
	return s, err
}

// readSubdirDirectory reads NFS_DEFAULT_MODE, NFS_DEFAULT_UID and
// NFS_DEFAULT_GID into the backend's mode, uid and gid, as nfs-subdir reads
// them (getModeFromString, getIdFromString): a mode in octal up to 0777, an
// id in decimal up to 65535; any other value stops it at its start, so no
// volume of it was ever made with one.
func readSubdirDirectory(c *corev1.Container) (v1alpha1.VolumeDirectory, error) {
	var d v1alpha1.VolumeDirectory
	mode, err := envValue(c, envNFSDefaultMode)
	if err != nil {
		return d, err
	}
	if mode != "" {
		bits, err := strconv.ParseInt(mode, 8, 64)
		if err != nil || bits < 0 || bits > 0o777 {
			return d, fmt.Errorf("environment variable %s: %q is no mode from 0 to 0777 in octal, without which nfs-subdir-external-provisioner does not start", envNFSDefaultMode, mode)
		}
		d.Mode = fmt.Sprintf("%04o", bits)
	}
	for name, owner := range map[string]**int64{envNFSDefaultUID: &d.UID, envNFSDefaultGID: &d.GID} {
		value, err := envValue(c, name)
		if err != nil {
			return d, err
		}
		if value == "" {
			continue
		}
		id, err := strconv.ParseInt(value, 10, 64)
		if err != nil || id < 0 || id > 65535 {
			return d, fmt.Errorf("environment variable %s: %q is no id from 0 to 65535, without which nfs-subdir-external-provisioner does not start", name, value)
		}
		*owner = &id
	}
	return d, nil
}

// fate says what policy does to dir, the directory of pv below base.
func fate(pv *corev1.PersistentVolume, policy backend.OnDeletePolicy, base, dir string) string {
	var what string
	switch policy {
	case backend.OnDeleteDelete:
		what = "delete " + path.Join(base, dir)
	case backend.OnDeleteRetain:
		what = "retain " + path.Join(base, dir)
	case backend.OnDeleteArchive:
		what = "archive " + path.Join(base, dir) + " beside it as archived-" + path.Base(dir) + "-<UTC time>"
	case backend.OnDeleteArchiveAsNFSSubdir:
		what = "archive " + path.Join(base, dir) + " as " + path.Join(base, backend.NFSSubdirArchive(dir))
	default:
		what = fmt.Sprintf("keep %s: %q names no policy, and the release fails", path.Join(base, dir), policy)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return fmt.Sprintf("retain: reclaimPolicy %s, never released (were it Delete: %s)", pv.Spec.PersistentVolumeReclaimPolicy, what)
	}
	return what
}
