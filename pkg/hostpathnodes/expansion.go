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

package hostpathnodes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// The coordinator expands the volumes of every node itself. A node's budget
// is counted from the PersistentVolumes in the API, which the manager sees
// as the agents do, and the directory needs nothing: raising a volume's
// capacity takes no node, so an agent that is down delays no expansion,
// and the agents, which may not change a volume's spec, write nothing.

// nodeExpander counts an expanded volume against its node's budget.
type nodeExpander struct{ c *Coordinator }

// Expand refuses size when the volume's node has not that much room in its
// storage budget beside its other volumes and the claims placed there.
func (e nodeExpander) Expand(_ context.Context, volume *corev1.PersistentVolume, _ *corev1.PersistentVolumeClaim, size resource.Quantity) (resource.Quantity, error) {
	b := budgetOf(e.c.spec)
	if b.Storage == nil {
		return size, nil
	}
	node := backend.VolumeNode(volume)
	used := nodeUse(e.c.view(e.c.config()), node, volume.Name)
	if size.CmpInt64(*b.Storage-used) > 0 {
		return resource.Quantity{}, fmt.Errorf("%w: the capacity budget of node %q is exhausted: its other volumes use %s of %s, the volume would grow to %s",
			provisioning.ErrNoRoom, node, resource.NewQuantity(used, resource.BinarySI), resource.NewQuantity(*b.Storage, resource.BinarySI), size.String())
	}
	return size, nil
}

// nodeUse is what the volumes of node but the one named exclude, and the
// claims placed there whose volume is not made yet, take of its budget.
func nodeUse(v *fleetView, node, exclude string) int64 {
	var used int64
	made := map[string]bool{}
	for _, volume := range v.volumes {
		if ref := volume.Spec.ClaimRef; ref != nil {
			made[string(ref.UID)] = true
		}
		if volume.Name != exclude && backend.VolumeNode(volume) == node {
			used += storageOf(volume.Spec.Capacity)
		}
	}
	for _, claim := range v.claims {
		if claim.Annotations[provisioning.AnnSelectedNode] == node && !made[string(claim.UID)] {
			used += storageOf(claim.Spec.Resources.Requests)
		}
	}
	return used
}

// expand brings forward the expansion of every bound claim of this
// provisioner that asks for one. It returns how soon to try again those
// that failed for a reason that may pass; zero when none did.
func (c *Coordinator) expand(ctx context.Context, v *fleetView) time.Duration {
	var next time.Duration
	for _, claim := range v.resizing {
		ctx := klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "claim", klog.KObj(claim)))
		if err := c.resizer.Sync(ctx, claim); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Cannot expand the volume of a claim")
			next = shorter(next, v.retry)
		}
	}
	return next
}
