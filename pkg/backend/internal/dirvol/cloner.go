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
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// maxCopies is how many clones a Cloner copies at once: each holds a
// copy buffer and a few descriptors or file handles, and a disk or a
// server serves few copies well.
const maxCopies = 2

// cloned is what a clone's copy gave.
type cloned struct {
	volume Volume
	copied Copied
}

// Cloner copies the clones of a backend's stores in the background, at
// most maxCopies at once, with Store.Clone: the first Provision of a clone
// starts its copy, later ones report it under way until it finished.
type Cloner struct {
	copies *backend.Background[cloned]
}

// NewCloner returns a Cloner; Close stops its copies.
func NewCloner() *Cloner {
	return &Cloner{copies: backend.NewBackground[cloned](maxCopies)}
}

// Close stops the copies under way, once the provisioner's instance
// stopped: each leaves a record, which the next instance's reclaim or a
// retry of the claim settles.
func (c *Cloner) Close() {
	c.copies.Close()
}

// Clone makes the claim's directory in store a copy of the source
// claim's volume, in the background. sourceDir returns the directory of
// the source's PersistentVolume below the store's base, or why it is no
// volume of the backend: whoever may write PersistentVolumes wrote its
// path, so it is only taken as a name, which Store.Clone copies only when
// the owner marker beside it names the volume. A copy that failed leaves
// nothing. The copy's end wakes the claim (ProvisionOptions.Wake), whose
// next Provision reports it.
func (c *Cloner) Clone(ctx context.Context, store *Store, opts provisioning.ProvisionOptions, req Request, sourceDir func(*corev1.PersistentVolume) (string, error)) (*Volume, provisioning.ProvisioningState, error) {
	if opts.CloneSource == nil {
		// An empty volume would pass for the copy the claim asked for.
		return nil, provisioning.ProvisioningFinished, fmt.Errorf("the claim to clone, %s, was not found", opts.DataSource.Name)
	}
	if opts.CloneSource.Volume == nil {
		return nil, provisioning.ProvisioningFinished, errors.New("the claim to clone is bound to no volume")
	}
	pv := opts.CloneSource.Volume
	dir, err := sourceDir(pv)
	if err != nil {
		return nil, provisioning.ProvisioningFinished, fmt.Errorf("cannot clone volume %s here: %w", pv.Name, err)
	}
	source := CloneSource{PVName: pv.Name, Dir: dir}
	made, done, err := c.copies.Poll(ctx, req.PVName, func(ctx context.Context) (cloned, error) {
		vol, copied, err := store.Clone(ctx, req, source)
		if err != nil && ctx.Err() == nil {
			// Failed on its own: nothing is left for a claim that may
			// fix its source or size and try again.
			err = errors.Join(err, store.DropClone(ctx, req))
		}
		return cloned{volume: vol, copied: copied}, err
	}, opts.Wake)
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

// Abandon stops the copy of a claim that abandoned its clone and removes
// what it made in store.
func (c *Cloner) Abandon(ctx context.Context, store *Store, req Request) error {
	c.copies.Cancel(req.PVName)
	if err := store.DropClone(ctx, req); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Abandoned clone removed", "pv", req.PVName)
	return nil
}
