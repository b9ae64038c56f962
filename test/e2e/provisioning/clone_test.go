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
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// cloningBackend is a dirBackend that supports clones and records the
// source claim and volume each Provision call was given, by volume name.
type cloningBackend struct {
	*dirBackend
	// copying, while set, has each call for a clone answer that its copy
	// goes on in the background.
	copying atomic.Bool

	mu      sync.Mutex
	sources map[string]string
}

func (b *cloningBackend) SupportsDataSource(_ context.Context, kind schema.GroupKind) bool {
	return kind == schema.GroupKind{Kind: "PersistentVolumeClaim"}
}

func (b *cloningBackend) Provision(ctx context.Context, options provisioning.ProvisionOptions) (*corev1.PersistentVolume, provisioning.ProvisioningState, error) {
	if source := options.CloneSource; source != nil {
		b.mu.Lock()
		b.sources[options.PVName] = source.Claim.Name + " " + source.Volume.Name
		b.mu.Unlock()
		if b.copying.Load() {
			return nil, provisioning.ProvisioningInBackground, errors.New("still copying")
		}
	}
	return b.dirBackend.Provision(ctx, options)
}

func (b *cloningBackend) sourceOf(pvName string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sources[pvName]
}

// cloneOf sets a claim's data source to the claim named source.
func cloneOf(source string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: source}
	}
}

func withRequest(size string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
	}
}

// waitRefused waits for the Warning that refuses claim for why, and checks
// that the claim stays Pending with no volume and the backend was not
// asked.
func (f *fixture) waitRefused(backend *dirBackend, claim *corev1.PersistentVolumeClaim, why string) {
	f.t.Helper()
	f.waitEventSaying(claim, provisioning.EventProvisioningFailed, why)
	for _, e := range ours(f.events(claim, provisioning.EventProvisioningFailed)) {
		if e.Type != corev1.EventTypeWarning {
			f.t.Errorf("%s Event of type %s, want Warning", e.Reason, e.Type)
		}
	}
	if got := backend.attemptsFor(volumeName(claim)); len(got) != 0 {
		f.t.Errorf("backend was asked to provision refused claim %s: %+v", claim.Name, got)
	}
	if _, err := f.admin.CoreV1().PersistentVolumes().Get(f.t.Context(), volumeName(claim), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		f.t.Errorf("want no PV for refused claim %s, got %v", claim.Name, err)
	}
	current, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(f.t.Context(), claim.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	if diff := cmp.Diff(corev1.ClaimPending, current.Status.Phase); diff != "" {
		f.t.Errorf("phase of refused claim %s (-want +got):\n%s", claim.Name, diff)
	}
}

// A backend that clones is handed the source claim and its volume; a clone
// of another StorageClass, one that requests less than its source holds and
// one of a source not Bound yet are refused with a Warning that says so and
// stay Pending, with no empty volume made for them; a clone refused while
// its source was Pending is provisioned once the source is Bound.
func TestCloneAdmission(t *testing.T) {
	f := newFixture(t)
	backend := &cloningBackend{dirBackend: &dirBackend{root: t.TempDir()}, sources: map[string]string{}}
	f.start(f.config(), backend)
	f.createClass(f.class, nil)
	other := f.createClass(f.class+"-other", nil)
	origin := f.createClaim("origin", f.class, withRequest("2Mi"))
	origin = f.waitBound(origin.Name)
	// A claim with a selector is refused, so it stays Pending.
	pending := f.createClaim("pending", f.class, func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"never": "matched"}}
	})

	clone := f.createClaim("clone", f.class, func(c *corev1.PersistentVolumeClaim) {
		cloneOf(origin.Name)(c)
		withRequest("2Mi")(c)
	})
	f.waitBound(clone.Name)
	if diff := cmp.Diff(origin.Name+" "+origin.Spec.VolumeName, backend.sourceOf(volumeName(clone))); diff != "" {
		t.Errorf("source given to the backend (-want +got):\n%s", diff)
	}

	otherClass := f.createClaim("other-class", other.Name, func(c *corev1.PersistentVolumeClaim) {
		cloneOf(origin.Name)(c)
		withRequest("2Mi")(c)
	})
	small := f.createClaim("small", f.class, cloneOf(origin.Name))
	ofPending := f.createClaim("of-pending", f.class, cloneOf(pending.Name))
	f.waitRefused(backend.dirBackend, otherClass, `its StorageClass is "`+f.class+`" and the clone's "`+other.Name+`"`)
	f.waitRefused(backend.dirBackend, small, "the clone requests 1Mi, less than the 2Mi of its source's volume")
	f.waitRefused(backend.dirBackend, ofPending, "cannot clone claim "+f.namespace+"/pending: it is Pending, not Bound to a PersistentVolume")

	// The binder binds the pending source to a volume of this provisioner
	// made for its selector; its clone, retried, is provisioned then.
	f.createVolumeFor(pending, "1Mi", t.TempDir())
	f.waitBound(pending.Name)
	f.waitBound(ofPending.Name)
	if diff := cmp.Diff(pending.Name+" "+pending.Name+"-volume", backend.sourceOf(volumeName(ofPending))); diff != "" {
		t.Errorf("source given to the backend (-want +got):\n%s", diff)
	}
}

// createVolumeFor makes a PersistentVolume of this provisioner, named after
// claim, of size and with path, that the binder binds to claim and no other:
// it is bound to claim beforehand and carries the labels of its selector.
func (f *fixture) createVolumeFor(claim *corev1.PersistentVolumeClaim, size, path string) {
	f.t.Helper()
	volume := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        claim.Name + "-volume",
			Labels:      claim.Spec.Selector.MatchLabels,
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": f.provisioner},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   claim.Spec.AccessModes,
			StorageClassName:              *claim.Spec.StorageClassName,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}},
		},
	}
	if _, err := f.admin.CoreV1().PersistentVolumes().Create(f.t.Context(), volume, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		_ = f.admin.CoreV1().PersistentVolumes().Delete(context.Background(), volume.Name, metav1.DeleteOptions{})
	})
}

// A claim whose data source is a VolumeSnapshot is refused by a backend
// that clones but cannot restore snapshots, with a Warning, and stays
// Pending with no volume made.
func TestSnapshotSourceRefused(t *testing.T) {
	f := newFixture(t)
	backend := &cloningBackend{dirBackend: &dirBackend{root: t.TempDir()}, sources: map[string]string{}}
	f.start(f.config(), backend)
	f.createClass(f.class, nil)
	claim := f.createClaim("restored", f.class, func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
	})
	f.waitRefused(backend.dirBackend, claim, "cannot fill a volume from data source VolumeSnapshot.snapshot.storage.k8s.io "+f.namespace+"/snap")
	if announced := ours(f.events(claim, provisioning.EventProvisioning)); len(announced) != 0 {
		t.Errorf("a refused snapshot restore was announced as provisioning")
	}
}

// A source claim deleted while a clone is copied from it in the background
// goes, and its PersistentVolume is Released, but its backend volume is
// kept until the copy ends, and deleted then.
func TestCloneSourceDeletedDuringCopy(t *testing.T) {
	f := newFixture(t)
	backend := &cloningBackend{dirBackend: &dirBackend{root: t.TempDir()}, sources: map[string]string{}}
	cfg := f.config()
	cfg.Retry.InitialDelay = 100 * time.Millisecond
	cfg.Retry.MaxDelay = 400 * time.Millisecond
	// The copy is retried until the test lets it end.
	cfg.Retry.ProvisionFailureThreshold = 0
	f.start(cfg, backend)
	f.createClass(f.class, nil)
	origin := f.waitBound(f.createClaim("origin", f.class, nil).Name)
	backend.copying.Store(true)
	clone := f.createClaim("clone", f.class, cloneOf(origin.Name))
	f.eventually("the copy begun", func(context.Context) (bool, error) {
		return backend.sourceOf(volumeName(clone)) != "", nil
	})

	f.deleteClaim(origin.Name)
	f.waitClaimGone(origin.Name)
	f.eventually("the source's volume Released", func(ctx context.Context) (bool, error) {
		volume, err := f.admin.CoreV1().PersistentVolumes().Get(ctx, origin.Spec.VolumeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// Deleted already: the check below tells.
			return true, nil
		}
		return err == nil && volume.Status.Phase == corev1.VolumeReleased, err
	})
	// Ten times the longest backoff: a deletion would show up.
	time.Sleep(10 * cfg.Retry.MaxDelay)
	if !slices.Contains(mustVolumes(t, backend.dirBackend), origin.Spec.VolumeName) {
		t.Fatalf("the source's backend volume was deleted during the copy")
	}

	backend.copying.Store(false)
	f.waitBound(clone.Name)
	f.waitVolumeGone(origin.Spec.VolumeName)
	if diff := cmp.Diff([]string{volumeName(clone)}, mustVolumes(t, backend.dirBackend)); diff != "" {
		t.Errorf("backend volumes once the copy ended (-want +got):\n%s", diff)
	}
}
