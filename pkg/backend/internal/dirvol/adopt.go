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
	"io/fs"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// checkOverlapOrAdopt is checkOverlap for a new volume, which, with
// Config.Adopt, may take the directory of the one volume that proves it is
// the directory an earlier claim of the same namespace and name used: that
// volume is returned. Without proof it refuses, saying why when Adopt is
// on.
func (s *Store) checkOverlapOrAdopt(ctx context.Context, req Request, dir string) (*corev1.PersistentVolume, error) {
	others, err := s.overlapping(ctx, req.PVName, dir)
	if err != nil {
		return nil, err
	}
	var adopted *corev1.PersistentVolume
	if len(others) > 0 {
		if !s.cfg.Adopt {
			return nil, errOverlap(dir)
		}
		if adopted, err = s.adoptable(req.Claim, dir, others); err != nil {
			return nil, fmt.Errorf("%w; not adopted: %w", errOverlap(dir), err)
		}
	}
	return adopted, s.checkReserved(req.PVName, dir)
}

// adoptable returns the one volume of others, the known volumes whose
// directory is, contains or lies inside dir, that proves dir is the
// directory an earlier claim of claim's namespace and name used: it names
// exactly dir, on this Store's file system, it was provisioned under one
// of this provisioner's names, its claimRef names claim's namespace and
// name with another UID, it is Released, and its directory is retained.
// Nothing weaker counts: directories of other provisioners carry no marker.
// Its error says why none proves it, without naming a volume, since the
// claim's owner reads it.
func (s *Store) adoptable(claim *corev1.PersistentVolumeClaim, dir string, others []*corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	if len(others) != 1 {
		return nil, fmt.Errorf("%d PersistentVolumes name it or a directory around or inside it, not one", len(others))
	}
	pv := others[0]
	if other, err := s.cfg.VolumeDir(pv); err != nil || other != dir {
		return nil, errors.New("the PersistentVolume there names a directory around or inside it, not it")
	}
	if s.cfg.Holds != nil && !s.cfg.Holds(pv) {
		return nil, errors.New("the PersistentVolume that names it is not pinned to this node")
	}
	if !slices.Contains(s.cfg.Options.ProvisionerNames, pv.Annotations[provisioning.AnnDynamicallyProvisioned]) {
		return nil, errors.New("the PersistentVolume that names it was not provisioned under this provisioner's names")
	}
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Namespace != claim.Namespace || ref.Name != claim.Name {
		return nil, errors.New("the PersistentVolume that names it was not made for a claim of this namespace and name")
	}
	if ref.UID == "" || ref.UID == claim.UID {
		return nil, errors.New("the PersistentVolume that names it was not bound to an earlier claim of this name")
	}
	if pv.Status.Phase != corev1.VolumeReleased {
		return nil, fmt.Errorf("the PersistentVolume %s that names it is %s, not Released", pv.Name, pv.Status.Phase)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain && pv.Annotations[backend.AnnOnDelete] != string(backend.OnDeleteRetain) {
		return nil, fmt.Errorf("the PersistentVolume %s that names it is not retained: its reclaim policy is not Retain and its %s is not Retain", pv.Name, backend.AnnOnDelete)
	}
	return pv, nil
}

// notAdopted adds to err, a refusal of a directory, why it was not adopted
// when Config.Adopt is on and no volume was found to adopt it from.
func (s *Store) notAdopted(err error, adopted *corev1.PersistentVolume) error {
	switch {
	case !s.cfg.Adopt || adopted != nil:
		return err
	case errors.Is(err, errExists):
		return fmt.Errorf("%w; not adopted: no PersistentVolume names it", err)
	case errors.Is(err, errOtherVolumes):
		return fmt.Errorf("%w; not adopted: its owner marker names another volume", err)
	}
	return err
}

// adoptVolume takes the existing directory dir for PV pvName: it writes its
// owner marker and nothing else, leaving its contents, mode and owner as
// they are, and reports whether the marker is the PV's. A directory that is
// gone is refused: there is nothing to adopt.
func (s *Store) adoptVolume(ctx context.Context, base Dir, dir, pvName string) (bool, error) {
	components := strings.Split(dir, "/")
	parents, leaf := components[:len(components)-1], components[len(components)-1]
	parent, err := openDir(ctx, base, parents)
	if err == nil {
		defer parent.Close()
		err = checkIsDir(ctx, parent, leaf)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("%w: the directory to adopt is gone; delete the released PersistentVolume that names it for a new one", errNotOurs)
	}
	if err != nil {
		return false, err
	}
	if _, err := takeMarker(ctx, parent, leaf, pvName); err != nil {
		return false, err
	}
	return true, s.did(stepVolumeMade)
}

// checkIsDir refuses leaf in parent unless it is a directory, never
// following a symlink.
func checkIsDir(ctx context.Context, parent Dir, leaf string) error {
	info, err := parent.Lstat(ctx, leaf)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%w: %q is not a directory (%s)", errNotOurs, leaf, info.Mode().Type())
	}
	return nil
}

// RecordAdoption finishes, for a Volume whose directory was adopted, the
// PersistentVolume pv Provision returns: it records the volume it came from
// and the fate Retain, which the old volume's retained directory keeps
// until an administrator records another; marks the old volume with
// backend.AnnAdoptedBy through the controller's client; and tells the
// claim's owner with a Normal Event. A failed mark fails the Provision,
// which a retry finishes: the directory's owner marker is the new volume's
// already, so nothing else can take it meanwhile.
func RecordAdoption(ctx context.Context, opts provisioning.ProvisionOptions, pv *corev1.PersistentVolume, vol Volume) error {
	old := vol.AdoptedFrom
	if old == nil {
		return nil
	}
	setAdopted(pv, old.Name)
	if old.Annotations[backend.AnnAdoptedBy] != pv.Name {
		if err := opts.AnnotateVolume(ctx, old, map[string]string{backend.AnnAdoptedBy: pv.Name}); err != nil {
			return fmt.Errorf("cannot mark the released PersistentVolume %s whose directory %q was adopted: %w", old.Name, vol.Dir, err)
		}
	}
	opts.Event(corev1.EventTypeNormal, backend.EventDirectoryAdopted,
		"Adopted directory %q of the released PersistentVolume %s, made for an earlier claim of this namespace and name: its contents are as that volume left them", vol.Dir, old.Name)
	return nil
}

// setAdopted records on pv, a volume whose directory was adopted, the
// volume it came from and the fate Retain.
func setAdopted(pv *corev1.PersistentVolume, from string) {
	if pv.Annotations == nil {
		pv.Annotations = map[string]string{}
	}
	maps.Copy(pv.Annotations, map[string]string{backend.AnnAdoptedFrom: from, backend.AnnOnDelete: string(backend.OnDeleteRetain)})
}
