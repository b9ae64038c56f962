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

package dirvol

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// The StorageClass parameters a directory backend reads; each overrides,
// for the claims of its class, the backend's setting of the same name.
const (
	// ParamPathPattern is the path pattern: a Go template, or a pattern in
	// nfs-subdir-external-provisioner's ${.PVC.<key>} syntax (see
	// IsSubdirPattern).
	ParamPathPattern = "pathPattern"
	// ParamOnDelete is the onDelete policy: Delete, Retain or Archive, or
	// nfs-subdir-external-provisioner's delete or retain. It is recorded on
	// each PersistentVolume made (backend.AnnOnDelete).
	ParamOnDelete = "onDelete"
	// ParamArchiveOnDelete is nfs-subdir-external-provisioner's: a boolean
	// ("true" archives, "false" deletes) that onDelete overrides.
	ParamArchiveOnDelete = "archiveOnDelete"
	// ParamNodePath is local-path-provisioner's: the folder of the node
	// that volumes go in, which must be the backend's own path.
	ParamNodePath = "nodePath"
	// ParamNodeAffinityKey is local-path-provisioner's: the node label new
	// volumes are pinned with, which must be the backend's own.
	ParamNodeAffinityKey = "nodeAffinityKey"
	// ParamMode is the mode of a new volume directory, in octal ("0750").
	ParamMode = "mode"
	// ParamUID is the user that owns a new volume directory.
	ParamUID = "uid"
	// ParamGID is the group that owns a new volume directory.
	ParamGID = "gid"
)

// knownParams lists the parameters ParseRequest accepts, for its error.
var knownParams = []string{ParamPathPattern, ParamOnDelete, ParamArchiveOnDelete, ParamNodePath, ParamNodeAffinityKey, ParamMode, ParamUID, ParamGID,
	ParamUserPattern, ParamGroupPattern, ParamPermPattern}

// Request is one claim's directory request.
type Request struct {
	PVName string
	Claim  *corev1.PersistentVolumeClaim
	// Size is the claim's storage request.
	Size resource.Quantity
	// Pattern is the class's path pattern; nil means the configured one.
	Pattern *Pattern
	// Directory is the class's mode and owner; a field not set means the
	// configured one.
	Directory backend.Directory
	// OnDelete is the class's onDelete policy, recorded on the
	// PersistentVolume; empty means the configured one at deletion.
	OnDelete backend.OnDeletePolicy
	// NodePath is the class's nodePath, cleaned; empty means none.
	NodePath string
	// NodeAffinityKey is the class's nodeAffinityKey; empty means none.
	NodeAffinityKey string
}

// ParseRequest checks what a directory backend can serve: a filesystem claim
// with a storage request, of a class with no parameter but those of
// knownParams. A class in nfs-subdir-external-provisioner's style (see
// IsSubdirClass) gets that provisioner's defaults for what it leaves out.
func ParseRequest(opts provisioning.ProvisionOptions) (Request, error) {
	claim := opts.PVC
	if claim == nil {
		return Request{}, errors.New("no claim to provision")
	}
	if claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return Request{}, errors.New("block volumes are not supported: this backend provisions directories, use volumeMode Filesystem")
	}
	size, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok || size.Sign() <= 0 {
		return Request{}, errors.New("the claim has no positive storage request")
	}
	req := Request{PVName: opts.PVName, Claim: claim, Size: size}
	if opts.StorageClass == nil {
		return req, nil
	}
	if err := req.setParams(opts.StorageClass.Parameters); err != nil {
		return Request{}, fmt.Errorf("StorageClass %s: %w", opts.StorageClass.Name, err)
	}
	return req, nil
}

// setParams sets what the class parameters say, in the order of their
// names so that the first error is always the same one.
func (r *Request) setParams(params map[string]string) error {
	for _, key := range slices.Sorted(maps.Keys(params)) {
		if err := r.setParam(key, params[key]); err != nil {
			return err
		}
	}
	if IsSubdirClass(params) {
		return r.setSubdirDefaults(params)
	}
	return nil
}

// setParam sets what the class parameter key says.
func (r *Request) setParam(key, value string) error {
	var err error
	switch key {
	case ParamPathPattern:
		r.Pattern, err = parseClassPattern(value)
	case ParamOnDelete:
		r.OnDelete, err = parseOnDelete(value)
	case ParamArchiveOnDelete:
		_, err = strconv.ParseBool(value)
	case ParamNodePath:
		r.NodePath, err = parseNodePath(value)
	case ParamNodeAffinityKey:
		// local-path-provisioner takes an empty one for the default.
		r.NodeAffinityKey = value
	case ParamMode:
		var mode fs.FileMode
		mode, err = backend.ParseMode(value)
		r.Directory.Mode = &mode
	case ParamUID:
		r.Directory.UID, err = parseID(value)
	case ParamGID:
		r.Directory.GID, err = parseID(value)
	case ParamUserPattern, ParamGroupPattern, ParamPermPattern:
		// Read, with the class's annotations, by ApplyLocalPathPatterns
		// where the backend applies them; ignored elsewhere.
	default:
		return fmt.Errorf("unknown parameter %q (known: %s)", key, strings.Join(knownParams, ", "))
	}
	if err != nil {
		return fmt.Errorf("parameter %s: %w", key, err)
	}
	return nil
}

func parseID(value string) (*int64, error) {
	id, err := backend.ParseID(value)
	return &id, err
}

// NewPV returns the PersistentVolume for a request, with source as its volume:
// capacity and access modes come from the claim, reclaim policy from the class,
// and the class's onDelete policy, if any, is recorded in backend.AnnOnDelete.
// Nothing is shared with the informer-cached claim.
func NewPV(opts provisioning.ProvisionOptions, req Request, source corev1.PersistentVolumeSource) *corev1.PersistentVolume {
	reclaim := corev1.PersistentVolumeReclaimDelete
	className := ""
	if class := opts.StorageClass; class != nil {
		className = class.Name
		if class.ReclaimPolicy != nil {
			reclaim = *class.ReclaimPolicy
		}
	}
	var annotations map[string]string
	if req.OnDelete != "" {
		annotations = map[string]string{backend.AnnOnDelete: string(req.OnDelete)}
	}
	filesystem := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: req.PVName, Annotations: annotations},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: req.Size},
			AccessModes:                   slices.Clone(req.Claim.Spec.AccessModes),
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              className,
			VolumeMode:                    &filesystem,
			PersistentVolumeSource:        source,
		},
	}
}
