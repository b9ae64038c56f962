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

var (
	// ErrInvalidSpec classifies configuration errors that only a change of the
	// ProvisionerConfig fixes (Ready reason InvalidSpec).
	ErrInvalidSpec = errors.New("invalid backend configuration")
	// ErrUnavailable classifies errors caused by the machine, such as a missing
	// mount, which may go away without a change of the ProvisionerConfig (Ready
	// reason BackendUnavailable).
	ErrUnavailable = errors.New("backend unavailable")
)
