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

package main

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// adapter drives a provfleet backend through the upstream library's
// Provisioner interface.
type adapter struct {
	backend provisioning.Provisioner
}

var _ controller.Provisioner = adapter{}

func (a adapter) Provision(ctx context.Context, opts controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	options := provisioning.ProvisionOptions{
		StorageClass: opts.StorageClass,
		PVName:       opts.PVName,
		PVC:          opts.PVC,
	}
	// The library hands over only the node's name, which is all a directory
	// backend reads of it.
	if opts.SelectedNodeName != "" {
		options.SelectedNode = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: opts.SelectedNodeName}}
	}
	pv, state, err := a.backend.Provision(ctx, options)
	return pv, upstreamState(state), upstreamError(err)
}

func (a adapter) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	return upstreamError(a.backend.Delete(ctx, pv))
}

// nodeAdapter is adapter for one node: the library asks it before each
// claim, and it takes only those the scheduler placed on its node.
type nodeAdapter struct {
	adapter
	node string
}

var _ controller.Qualifier = nodeAdapter{}

// annSelectedNode is where the scheduler writes a claim's node.
const annSelectedNode = "volume.kubernetes.io/selected-node"

func (a nodeAdapter) ShouldProvision(_ context.Context, claim *corev1.PersistentVolumeClaim) bool {
	return claim.Annotations[annSelectedNode] == a.node
}

// Delete leaves the volumes of other nodes to their own processes, which
// the library, watching every volume of the provisioner, hands to each.
func (a nodeAdapter) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	if node := backend.VolumeNode(pv); node != a.node {
		return &controller.IgnoredError{Reason: fmt.Sprintf("the volume lives on node %q, this process serves node %q", node, a.node)}
	}
	return a.adapter.Delete(ctx, pv)
}

func upstreamState(s provisioning.ProvisioningState) controller.ProvisioningState {
	switch s {
	case provisioning.ProvisioningInBackground:
		return controller.ProvisioningInBackground
	case provisioning.ProvisioningNoChange:
		return controller.ProvisioningNoChange
	case provisioning.ProvisioningReschedule:
		return controller.ProvisioningReschedule
	default:
		return controller.ProvisioningFinished
	}
}

// upstreamError turns provfleet's "not mine" into the library's.
func upstreamError(err error) error {
	var ignored *provisioning.IgnoredError
	if errors.As(err, &ignored) {
		return &controller.IgnoredError{Reason: ignored.Reason}
	}
	return err
}
