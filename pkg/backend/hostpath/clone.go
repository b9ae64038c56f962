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
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// maxCopies is how many clones a backend copies at once: each holds a
// copy buffer and a few descriptors, and a disk serves few copies well.
const maxCopies = 2

// clone is what a clone's copy gave.
type clone struct {
	volume dirvol.Volume
	copied dirvol.Copied
}

// SupportsDataSource answers for claims to clone: a claim's volume is
// copied into the new one.
func (p *Provisioner) SupportsDataSource(_ context.Context, kind schema.GroupKind) bool {
	return kind == schema.GroupKind{Kind: "PersistentVolumeClaim"}
}

// Close stops the copies under way, once the provisioner's instance
// stopped: each leaves a record, which the next instance's reclaim or a
// retry of the claim settles.
func (p *Provisioner) Close() {
	p.copies.Close()
}

// clone makes the claim's directory a copy of the source claim's volume,
// in the background: the first call starts the copy, later calls report
// it under way until it finished. A copy that failed leaves nothing.
func (p *Provisioner) clone(ctx context.Context, opts provisioning.ProvisionOptions, req dirvol.Request, b base) (*dirvol.Volume, provisioning.ProvisioningState, error) {
	if opts.CloneSource == nil {
		// An empty volume would pass for the copy the claim asked for.
		return nil, provisioning.ProvisioningFinished, fmt.Errorf("the claim to clone, %s, was not found", opts.DataSource.Name)
	}
	source, err := p.cloneSource(opts.CloneSource, b)
	if err != nil {
		return nil, provisioning.ProvisioningFinished, err
	}
	made, done, err := p.copies.Poll(ctx, req.PVName, func(ctx context.Context) (clone, error) {
		vol, copied, err := b.store.Clone(ctx, req, source)
		if err != nil && ctx.Err() == nil {
			// Failed on its own: nothing is left for a claim that may
			// fix its source or size and try again.
			err = errors.Join(err, b.store.DropClone(ctx, req))
		}
		return clone{volume: vol, copied: copied}, err
	})
	switch {
	case errors.Is(err, backend.ErrBusy):
		return nil, provisioning.ProvisioningInBackground, fmt.Errorf("waiting to copy the source volume %s: %d copies are under way, the most at once", source.PVName, maxCopies)
	case !done && err == nil:
		return nil, provisioning.ProvisioningInBackground, fmt.Errorf("copying the source volume %s in the background", source.PVName)
	case err != nil:
		return nil, provisioning.ProvisioningFinished, err
	}
	if made.copied.Skipped > 0 {
		opts.Event(corev1.EventTypeWarning, "SpecialFilesSkipped", "The clone of %s left out %d special files (FIFOs, sockets, devices), such as %s",
			source.PVName, made.copied.Skipped, strings.Join(made.copied.SkippedNames, ", "))
	}
	return &made.volume, provisioning.ProvisioningFinished, nil
}

// cloneSource is the directory of the source claim's volume, which must
// be a volume of this node in base b. Whoever may write PersistentVolumes
// wrote its path, so it is only taken as a name: Store.Clone copies it
// only when the owner marker beside it names the volume.
func (p *Provisioner) cloneSource(source *provisioning.CloneSource, b base) (dirvol.CloneSource, error) {
	if source.Volume == nil {
		return dirvol.CloneSource{}, errors.New("the claim to clone is bound to no volume")
	}
	dir, err := p.ownDir(b.path, source.Volume)
	if err != nil {
		return dirvol.CloneSource{}, fmt.Errorf("cannot clone volume %s here: %w", source.Volume.Name, err)
	}
	return dirvol.CloneSource{PVName: source.Volume.Name, Dir: dir}, nil
}

// abandonClone stops the copy of a claim that abandoned its clone and
// removes what it made.
func (p *Provisioner) abandonClone(ctx context.Context, req dirvol.Request, b base) error {
	p.copies.Cancel(req.PVName)
	if err := b.store.DropClone(ctx, req); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Abandoned clone removed", "pv", req.PVName)
	return nil
}
