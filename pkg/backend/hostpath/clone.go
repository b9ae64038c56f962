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

package hostpath

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// SupportsDataSource answers for claims to clone: a claim's volume is
// copied into the new one.
func (p *Provisioner) SupportsDataSource(_ context.Context, kind schema.GroupKind) bool {
	return kind == schema.GroupKind{Kind: "PersistentVolumeClaim"}
}

// Close stops the copies under way (dirvol.Cloner.Close).
func (p *Provisioner) Close() {
	p.cloner.Close()
}

// clone makes the claim's directory a copy of the source claim's volume,
// which must be a volume of this node in base b, in the background.
func (p *Provisioner) clone(ctx context.Context, opts provisioning.ProvisionOptions, req dirvol.Request, b base) (*dirvol.Volume, provisioning.ProvisioningState, error) {
	return p.cloner.Clone(ctx, b.store, opts, req, func(pv *corev1.PersistentVolume) (string, error) {
		return p.ownDir(b.path, pv)
	})
}
