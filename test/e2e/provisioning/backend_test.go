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

package provisioning_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// dirBackend is a provisioning.Provisioner whose volumes are directories under
// root, so a test can see exactly which backend volumes exist. Two dirBackends
// on the same root are two processes sharing one storage system.
type dirBackend struct {
	root string
	// fail, if set, is asked before each Provision with the 1-based attempt
	// number; an error fails that attempt before anything is created.
	fail func(attempt int) error
	// afterCreate, if set, runs once the directory exists and before
	// Provision returns.
	afterCreate func(ctx context.Context, options provisioning.ProvisionOptions)

	mu       sync.Mutex
	attempts []provisionAttempt
	deleted  []string
}

// provisionAttempt records one Provision call.
type provisionAttempt struct {
	pvName string
	node   string
	at     time.Time
	err    error
}

var _ provisioning.Provisioner = (*dirBackend)(nil)

func (b *dirBackend) Provision(ctx context.Context, options provisioning.ProvisionOptions) (*corev1.PersistentVolume, provisioning.ProvisioningState, error) {
	attempt := provisionAttempt{pvName: options.PVName, at: time.Now()}
	if options.SelectedNode != nil {
		attempt.node = options.SelectedNode.Name
	}
	b.mu.Lock()
	if b.fail != nil {
		attempt.err = b.fail(len(b.attempts) + 1)
	}
	b.attempts = append(b.attempts, attempt)
	b.mu.Unlock()
	if attempt.err != nil {
		return nil, provisioning.ProvisioningFinished, attempt.err
	}

	path := filepath.Join(b.root, options.PVName)
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, provisioning.ProvisioningFinished, fmt.Errorf("cannot create volume directory: %w", err)
	}
	if b.afterCreate != nil {
		b.afterCreate(ctx, options)
	}
	claim := options.PVC
	reclaim := corev1.PersistentVolumeReclaimDelete
	if options.StorageClass.ReclaimPolicy != nil {
		reclaim = *options.StorageClass.ReclaimPolicy
	}
	volume := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: options.PVName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   claim.Spec.AccessModes,
			VolumeMode:                    claim.Spec.VolumeMode,
			PersistentVolumeReclaimPolicy: reclaim,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path},
			},
		},
	}
	if attempt.node != "" {
		volume.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{attempt.node},
			}}}},
		}}
	}
	return volume, provisioning.ProvisioningFinished, nil
}

func (b *dirBackend) Delete(_ context.Context, volume *corev1.PersistentVolume) error {
	if err := os.RemoveAll(filepath.Join(b.root, volume.Name)); err != nil {
		return fmt.Errorf("cannot delete volume directory: %w", err)
	}
	b.mu.Lock()
	b.deleted = append(b.deleted, volume.Name)
	b.mu.Unlock()
	return nil
}

// setFail replaces fail while the backend is in use.
func (b *dirBackend) setFail(fail func(attempt int) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fail = fail
}

// volumes lists the backend volumes that exist, sorted.
func (b *dirBackend) volumes() ([]string, error) {
	entries, err := os.ReadDir(b.root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("cannot list backend volumes: %w", err)
	}
	var names []string
	for _, entry := range entries {
		names = append(names, entry.Name())
	}
	slices.Sort(names)
	return names, nil
}

// attemptsFor returns the Provision calls for one PV name, in order.
func (b *dirBackend) attemptsFor(pvName string) []provisionAttempt {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []provisionAttempt
	for _, a := range b.attempts {
		if a.pvName == pvName {
			out = append(out, a)
		}
	}
	return out
}

// allAttempts returns every Provision call, in order.
func (b *dirBackend) allAttempts() []provisionAttempt {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.attempts)
}

func (b *dirBackend) deletedVolumes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.deleted)
}
