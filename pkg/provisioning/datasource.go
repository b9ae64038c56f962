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

package provisioning

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// dataSourceOf returns what a claim's volume is to be filled from, with its
// namespace set, or nil. The apiserver copies spec.dataSource into
// spec.dataSourceRef, which alone can name another namespace.
func dataSourceOf(claim *corev1.PersistentVolumeClaim) *corev1.TypedObjectReference {
	var source *corev1.TypedObjectReference
	switch {
	case claim.Spec.DataSourceRef != nil:
		source = claim.Spec.DataSourceRef.DeepCopy()
	case claim.Spec.DataSource != nil:
		ref := claim.Spec.DataSource.DeepCopy()
		source = &corev1.TypedObjectReference{APIGroup: ref.APIGroup, Kind: ref.Kind, Name: ref.Name}
	default:
		return nil
	}
	if source.Namespace == nil || *source.Namespace == "" {
		namespace := claim.Namespace
		source.Namespace = &namespace
	}
	return source
}

func sourceKind(source *corev1.TypedObjectReference) schema.GroupKind {
	kind := schema.GroupKind{Kind: source.Kind}
	if source.APIGroup != nil {
		kind.Group = *source.APIGroup
	}
	return kind
}

func describeSource(source *corev1.TypedObjectReference) string {
	return fmt.Sprintf("%s %s/%s", sourceKind(source), *source.Namespace, source.Name)
}

// checkDataSource refuses a data source the backend cannot fill a volume
// from. A kind that is neither a claim nor a VolumeSnapshot is a volume
// populator's, which provisions through a claim of its own: populated says
// so, and the claim is left to it, as external-provisioner does.
func (c *Controller) checkDataSource(ctx context.Context, source *corev1.TypedObjectReference) (populated bool, err error) {
	if source == nil {
		return false, nil
	}
	kind := sourceKind(source)
	supports := false
	if p, ok := c.provisioner.(DataSourceProvisioner); ok {
		if err := c.claimCall(ctx, "supportsDataSource", func(ctx context.Context) error {
			supports = p.SupportsDataSource(ctx, kind)
			return nil
		}); err != nil {
			return false, err
		}
	}
	switch {
	case supports:
		return false, nil
	case kind.Kind == "PersistentVolumeClaim" || kind.Kind == "VolumeSnapshot":
		return false, fmt.Errorf("%s cannot fill a volume from data source %s", c.name, describeSource(source))
	default:
		return true, nil
	}
}
