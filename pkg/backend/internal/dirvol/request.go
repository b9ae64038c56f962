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
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// ParamPathPattern is the StorageClass parameter that overrides the
// configured path pattern.
const ParamPathPattern = "pathPattern"

// Request is one claim's directory request.
type Request struct {
	PVName string
	Claim  *v1.PersistentVolumeClaim
	// Size is the claim's storage request.
	Size resource.Quantity
	// Pattern is the class's path pattern; nil means the configured one.
	Pattern *Pattern
}

// ParseRequest checks what a directory backend can serve: a filesystem claim
// with a storage request, of a class with no parameter but pathPattern.
func ParseRequest(opts provisioning.ProvisionOptions) (Request, error) {
	claim := opts.PVC
	if claim == nil {
		return Request{}, errors.New("no claim to provision")
	}
	if claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return Request{}, errors.New("block volumes are not supported: this backend provisions directories, use volumeMode Filesystem")
	}
	size, ok := claim.Spec.Resources.Requests[v1.ResourceStorage]
	if !ok || size.Sign() <= 0 {
		return Request{}, errors.New("the claim has no positive storage request")
	}
	req := Request{PVName: opts.PVName, Claim: claim, Size: size}
	if opts.StorageClass == nil {
		return req, nil
	}
	for key, value := range opts.StorageClass.Parameters {
		if key != ParamPathPattern {
			return Request{}, fmt.Errorf("StorageClass %s: unknown parameter %q (only %q is known)", opts.StorageClass.Name, key, ParamPathPattern)
		}
		pattern, err := ParsePattern(value)
		if err != nil {
			return Request{}, fmt.Errorf("StorageClass %s: %w", opts.StorageClass.Name, err)
		}
		req.Pattern = pattern
	}
	return req, nil
}

// NewPV returns the PersistentVolume for a request, with source as its volume:
// capacity and access modes come from the claim, reclaim policy from the class.
// Nothing is shared with the informer-cached claim.
func NewPV(opts provisioning.ProvisionOptions, req Request, source v1.PersistentVolumeSource) *v1.PersistentVolume {
	reclaim := v1.PersistentVolumeReclaimDelete
	className := ""
	if class := opts.StorageClass; class != nil {
		className = class.Name
		if class.ReclaimPolicy != nil {
			reclaim = *class.ReclaimPolicy
		}
	}
	filesystem := v1.PersistentVolumeFilesystem
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: req.PVName},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: req.Size},
			AccessModes:                   slices.Clone(req.Claim.Spec.AccessModes),
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              className,
			VolumeMode:                    &filesystem,
			PersistentVolumeSource:        source,
		},
	}
}
