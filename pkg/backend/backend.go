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
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
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

// Options are what a backend needs from the process that runs it, as opposed to
// what the ProvisionerConfig says.
type Options struct {
	// ProvisionerNames are the names the controller writes into the
	// pv.kubernetes.io/provisioned-by annotation of the volumes it saves for
	// this backend; volumes carrying one of them count towards Capacity.
	ProvisionerNames []string
	// Volumes are the cluster's PersistentVolumes, usually from a shared
	// informer indexed with VolumePathIndex. They are how capacity and
	// directory collisions survive restarts; nil means only volumes
	// provisioned since this process started are known.
	Volumes Volumes
	// Now stamps archived directories; nil means time.Now.
	Now func() time.Time
}

var (
	// ErrInvalidSpec classifies configuration errors that only a change of the
	// ProvisionerConfig fixes (Ready reason InvalidSpec).
	ErrInvalidSpec = errors.New("invalid backend configuration")
	// ErrUnavailable classifies errors caused by the machine, such as a missing
	// mount, which may go away without a change of the ProvisionerConfig (Ready
	// reason BackendUnavailable).
	ErrUnavailable = errors.New("backend unavailable")
)
