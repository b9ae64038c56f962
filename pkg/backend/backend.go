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
	"io/fs"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// OnDeletePolicy says what happens to a volume's directory when its
// PersistentVolume is deleted.
type OnDeletePolicy string

const (
	// OnDeleteDelete removes the directory and the now-empty parent folders the
	// path pattern created.
	OnDeleteDelete OnDeletePolicy = "Delete"
	// OnDeleteRetain keeps the directory where it is.
	OnDeleteRetain OnDeletePolicy = "Retain"
	// OnDeleteArchive renames the directory to archived-<name>-<UTC timestamp>
	// beside it.
	OnDeleteArchive OnDeletePolicy = "Archive"
)

// Capacity is an optional budget for one backend. A zero field means no limit.
type Capacity struct {
	// Storage is the total size all volumes of the backend may request.
	Storage resource.Quantity
	// MaxVolumes is the number of volumes the backend may hold.
	MaxVolumes int32
}

var (
	// ErrInvalidSpec classifies configuration errors that only a change of the
	// ProvisionerConfig fixes (Ready reason InvalidSpec).
	ErrInvalidSpec = errors.New("invalid backend configuration")
	// ErrUnavailable classifies errors caused by the machine, such as a missing
	// mount, which may go away without a change of the ProvisionerConfig (Ready
	// reason BackendUnavailable). It is provisioning.ErrBackendUnavailable, so
	// a claim whose Provision fails so is not given up on.
	ErrUnavailable = provisioning.ErrBackendUnavailable
	// ErrModeRefused classifies a file or directory that the storage made
	// but would not give the mode asked for, such as an NFS server over a
	// file system without chmod. No retry changes that, so it is not
	// ErrUnavailable: a claim that needs the mode fails and counts its
	// tries.
	ErrModeRefused = errors.New("the storage refuses to set a file's mode")
	// ErrOtherNode classifies a PersistentVolume pinned to a node other
	// than the one a node's backend reaches: its directory is not on this
	// node's disk.
	ErrOtherNode = errors.New("the volume lives on another node")
)

// DefaultDirectoryMode is the mode of a new volume directory when neither the
// backend nor the StorageClass sets one: what nfs-subdir-external-provisioner
// gives, so that pods running as any user can write to a new volume.
const DefaultDirectoryMode fs.FileMode = 0o777

// Directory is how a new volume directory is made. A nil field is not set:
// Mode then falls back to DefaultDirectoryMode, and a nil UID or GID leaves
// that part of the owner to the file system (the manager's user, or whom an
// NFS server maps it to).
type Directory struct {
	// Mode is the permission bits, with fs.ModeSetgid, fs.ModeSetuid and
	// fs.ModeSticky where set; it is applied exactly, whatever the umask.
	Mode *fs.FileMode
	// UID is the user that owns the directory.
	UID *int64
	// GID is the group that owns the directory.
	GID *int64
}

// Or returns d with each field that is not set taken from fallback: a
// StorageClass's settings over a backend's.
func (d Directory) Or(fallback Directory) Directory {
	if d.Mode == nil {
		d.Mode = fallback.Mode
	}
	if d.UID == nil {
		d.UID = fallback.UID
	}
	if d.GID == nil {
		d.GID = fallback.GID
	}
	return d
}

// MaxID is the largest uid or gid a Directory may name: the largest that
// every file system and NFS server takes (uid_t is 32 bits, and -1 means "no
// change" to chown).
const MaxID = 1<<31 - 1

// specialBits pairs the mode bits beyond the permissions with their octal
// values in a chmod(2) or NFSv3 mode, which fs.FileMode keeps apart.
var specialBits = []struct {
	flag fs.FileMode
	unix uint32
}{
	{fs.ModeSetuid, 0o4000},
	{fs.ModeSetgid, 0o2000},
	{fs.ModeSticky, 0o1000},
}

// UnixMode is mode's permission, setuid, setgid and sticky bits as chmod(2)
// and NFSv3 write them; the type bits are dropped.
func UnixMode(mode fs.FileMode) uint32 {
	v := uint32(mode.Perm())
	for _, s := range specialBits {
		if mode&s.flag != 0 {
			v |= s.unix
		}
	}
	return v
}

// FileModeOf is the fs.FileMode of the permission, setuid, setgid and sticky
// bits of a chmod(2) or NFSv3 mode.
func FileModeOf(unix uint32) fs.FileMode {
	mode := fs.FileMode(unix) & fs.ModePerm
	for _, s := range specialBits {
		if unix&s.unix != 0 {
			mode |= s.flag
		}
	}
	return mode
}

// ParseMode reads a directory mode written in octal, as chmod takes it: three
// digits ("0750" or "750"), or four with the setuid (4), setgid (2) and sticky
// (1) bits first ("2770").
func ParseMode(s string) (fs.FileMode, error) {
	if len(s) < 3 || len(s) > 4 || strings.Trim(s, "01234567") != "" {
		return 0, fmt.Errorf("mode %q is not an octal mode of three or four digits, such as \"0750\"", s)
	}
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("mode %q is not octal: %w", s, err)
	}
	return FileModeOf(uint32(v)), nil
}

// FormatMode writes mode as ParseMode reads it, in four octal digits.
func FormatMode(mode fs.FileMode) string {
	return fmt.Sprintf("%04o", UnixMode(mode))
}

// ParseID reads a uid or gid: a decimal number from 0 to MaxID.
func ParseID(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > MaxID {
		return 0, fmt.Errorf("%q is not a number from 0 to %d", s, MaxID)
	}
	return v, nil
}
