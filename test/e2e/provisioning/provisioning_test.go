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
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// A claim gets PV pvc-<uid>, the real binder binds both, and deleting the claim
// releases the PV, deletes the backend volume and then the PV; with the PV
// finalizer the PV object cannot go before its backend volume.
func TestProvisionBindReleaseDelete(t *testing.T) {
	cases := map[string]struct {
		finalizer bool
	}{
		"with the PV finalizer":    {finalizer: true},
		"without the PV finalizer": {finalizer: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			backend := &dirBackend{root: t.TempDir()}
			cfg := f.config()
			cfg.Finalizer = tc.finalizer
			f.start(cfg, backend)
			f.createClass(f.class, nil)
			claim := f.createClaim("data", f.class, nil)

			bound := f.waitBound(claim.Name)
			pvName := volumeName(claim)
			if diff := cmp.Diff(pvName, bound.Spec.VolumeName); diff != "" {
				t.Errorf("claim bound to the wrong volume (-want +got):\n%s", diff)
			}
			volume := f.volume(pvName)
			if diff := cmp.Diff(tc.finalizer, slices.Contains(volume.Finalizers, provisioning.VolumeFinalizer)); diff != "" {
				t.Errorf("PV finalizer present (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(f.provisioner, volume.Annotations["pv.kubernetes.io/provisioned-by"]); diff != "" {
				t.Errorf("provisioned-by annotation (-want +got):\n%s", diff)
			}
			if got := mustVolumes(t, backend); !cmp.Equal([]string{pvName}, got) {
				t.Fatalf("backend volumes: want [%s], got %v", pvName, got)
			}
			if n := len(f.events(claim, provisioning.EventProvisioningSucceeded)); n == 0 {
				t.Errorf("no %s Event on the claim", provisioning.EventProvisioningSucceeded)
			}

			f.deleteClaim(claim.Name)
			f.waitVolumeGone(pvName)
			if got := mustVolumes(t, backend); len(got) != 0 {
				t.Errorf("backend volumes left after the PV was deleted: %v", got)
			}
			if diff := cmp.Diff([]string{pvName}, backend.deletedVolumes()); diff != "" {
				t.Errorf("backend deletions (-want +got):\n%s", diff)
			}
		})
	}
}

// With reclaim policy Retain a released volume stays, in the API and in the
// backend, while a released volume of a Delete class is deleted.
func TestRetainedVolumeIsKept(t *testing.T) {
	f := newFixture(t)
	backend := &dirBackend{root: t.TempDir()}
	f.start(f.config(), backend)
	f.createClass(f.class, nil)
	retain := f.createClass(f.class+"-retain", func(c *storagev1.StorageClass) {
		c.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain)
	})
	kept := f.createClaim("kept", retain.Name, nil)
	gone := f.createClaim("gone", f.class, nil)
	f.waitBound(kept.Name)
	f.waitBound(gone.Name)

	f.deleteClaim(kept.Name)
	f.eventually("the retained PV to be Released", func(ctx context.Context) (bool, error) {
		volume, err := f.admin.CoreV1().PersistentVolumes().Get(ctx, volumeName(kept), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return volume.Status.Phase == corev1.VolumeReleased, nil
	})
	// Released after the retained one: once its volume is deleted, the
	// controller has seen the retained one released too.
	f.deleteClaim(gone.Name)
	f.waitVolumeGone(volumeName(gone))

	if diff := cmp.Diff([]string{volumeName(gone)}, backend.deletedVolumes()); diff != "" {
		t.Errorf("backend deletions (-want +got):\n%s", diff)
	}
	if got := mustVolumes(t, backend); !cmp.Equal([]string{volumeName(kept)}, got) {
		t.Errorf("backend volumes: want [%s], got %v", volumeName(kept), got)
	}
	if phase := f.volume(volumeName(kept)).Status.Phase; phase != corev1.VolumeReleased {
		t.Errorf("retained PV phase: want Released, got %s", phase)
	}
}

// WaitForFirstConsumer: nothing is provisioned until the scheduler (the test)
// picks a node; the backend then gets that Node.
func TestWaitForFirstConsumerUsesSelectedNode(t *testing.T) {
	f := newFixture(t)
	backend := &dirBackend{root: t.TempDir()}
	f.start(f.config(), backend)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   "node-" + f.namespace,
		Labels: map[string]string{"kubernetes.io/hostname": "node-" + f.namespace},
	}}
	if _, err := f.admin.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.admin.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
	})
	f.createClass(f.class, func(c *storagev1.StorageClass) {
		c.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	})
	claim := f.createClaim("local", f.class, nil)

	// The binder leaves the claim to the scheduler.
	f.eventually("the binder to wait for the first consumer", func(ctx context.Context) (bool, error) {
		return len(f.events(claim, "WaitForFirstConsumer")) > 0, nil
	})
	if got := backend.allAttempts(); len(got) != 0 {
		t.Fatalf("provisioned before a node was selected: %+v", got)
	}

	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":%q}}}`, node.Name)
	if _, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Patch(t.Context(), claim.Name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitBound(claim.Name)
	attempts := backend.attemptsFor(volumeName(claim))
	if len(attempts) != 1 {
		t.Fatalf("want one Provision call, got %+v", attempts)
	}
	if diff := cmp.Diff(node.Name, attempts[0].node); diff != "" {
		t.Errorf("selected node given to the backend (-want +got):\n%s", diff)
	}
	affinity := f.volume(volumeName(claim)).Spec.NodeAffinity
	if affinity == nil || affinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != node.Name {
		t.Errorf("PV node affinity does not name %s: %+v", node.Name, affinity)
	}
}

// A block claim to a backend without block support is refused with a Warning
// Event; no backend call, no volume.
func TestBlockClaimRefused(t *testing.T) {
	f := newFixture(t)
	backend := &dirBackend{root: t.TempDir()}
	f.start(f.config(), backend)
	f.createClass(f.class, nil)
	claim := f.createClaim("raw", f.class, func(c *corev1.PersistentVolumeClaim) {
		c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
	})

	var warnings []corev1.Event
	f.eventually("a ProvisioningFailed Event", func(context.Context) (bool, error) {
		warnings = ours(f.events(claim, provisioning.EventProvisioningFailed))
		return len(warnings) > 0, nil
	})
	if diff := cmp.Diff(corev1.EventTypeWarning, warnings[0].Type); diff != "" {
		t.Errorf("Event type (-want +got):\n%s", diff)
	}
	if got := backend.allAttempts(); len(got) != 0 {
		t.Errorf("backend was asked to provision a block claim: %+v", got)
	}
	if _, err := f.admin.CoreV1().PersistentVolumes().Get(t.Context(), volumeName(claim), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("want no PV for a refused block claim, got %v", err)
	}
	current, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(t.Context(), claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(corev1.ClaimPending, current.Status.Phase); diff != "" {
		t.Errorf("claim phase (-want +got):\n%s", diff)
	}
}

// A claim whose StorageClass does not exist yet is provisioned once the class
// appears, exactly once.
func TestClassCreatedLater(t *testing.T) {
	f := newFixture(t)
	backend := &dirBackend{root: t.TempDir()}
	f.start(f.config(), backend)
	claim := f.createClaim("early", f.class, nil)

	f.eventually("the binder to report the missing class", func(context.Context) (bool, error) {
		return len(f.events(claim, "ProvisioningFailed")) > 0, nil
	})
	if got := backend.allAttempts(); len(got) != 0 {
		t.Fatalf("provisioned without a class: %+v", got)
	}
	f.createClass(f.class, nil)
	f.waitBound(claim.Name)
	attempts := backend.attemptsFor(volumeName(claim))
	if len(attempts) != 1 {
		t.Fatalf("want exactly one Provision call, got %+v", attempts)
	}
}

// A backend that fails twice is retried with a growing per-claim delay, each
// failure is an Event, and the claim ends with exactly one volume.
func TestBackendFailuresAreRetriedWithBackoff(t *testing.T) {
	const failures = 2
	f := newFixture(t)
	backend := &dirBackend{
		root: t.TempDir(),
		fail: func(attempt int) error {
			if attempt <= failures {
				return fmt.Errorf("injected failure %d of %d", attempt, failures)
			}
			return nil
		},
	}
	cfg := f.config()
	cfg.Retry.ProvisionFailureThreshold = failures + 2
	cfg.Retry.InitialDelay = 500 * time.Millisecond
	cfg.Retry.MaxDelay = 5 * time.Second
	f.start(cfg, backend)
	f.createClass(f.class, nil)
	claim := f.createClaim("flaky", f.class, nil)

	f.waitBound(claim.Name)
	attempts := backend.attemptsFor(volumeName(claim))
	if len(attempts) != failures+1 {
		t.Fatalf("want %d Provision calls, got %d: %+v", failures+1, len(attempts), attempts)
	}
	// The backoff is a lower bound: the nth retry waits InitialDelay*2^(n-1).
	for i := 1; i < len(attempts); i++ {
		want := cfg.Retry.InitialDelay << (i - 1)
		if gap := attempts[i].at.Sub(attempts[i-1].at); gap < want {
			t.Errorf("retry %d came %v after the previous attempt, want at least %v", i, gap, want)
		}
	}
	if got := mustVolumes(t, backend); !cmp.Equal([]string{volumeName(claim)}, got) {
		t.Errorf("backend volumes: want exactly [%s], got %v", volumeName(claim), got)
	}
	f.eventually("one ProvisioningFailed Event per failure", func(context.Context) (bool, error) {
		var count int32
		for _, e := range ours(f.events(claim, provisioning.EventProvisioningFailed)) {
			count += max(e.Count, 1)
		}
		return count >= failures, nil
	})
}

// After threshold retries the controller gives up on the claim until it
// changes: exactly threshold+1 attempts, then none.
func TestFailureThresholdStopsRetries(t *testing.T) {
	const threshold, tries = 3, 4
	f := newFixture(t)
	backend := &dirBackend{
		root: t.TempDir(),
		fail: func(attempt int) error { return fmt.Errorf("injected failure %d", attempt) },
	}
	cfg := f.config()
	cfg.Retry.ProvisionFailureThreshold = threshold
	cfg.Retry.InitialDelay = 100 * time.Millisecond
	cfg.Retry.MaxDelay = 400 * time.Millisecond
	f.start(cfg, backend)
	f.createClass(f.class, nil)
	claim := f.createClaim("doomed", f.class, nil)

	f.eventually(fmt.Sprintf("%d Provision calls", tries), func(context.Context) (bool, error) {
		return len(backend.attemptsFor(volumeName(claim))) >= tries, nil
	})
	// Ten times the longest backoff: a retry past the threshold would show up.
	time.Sleep(10 * cfg.Retry.MaxDelay)
	if got := len(backend.attemptsFor(volumeName(claim))); got != tries {
		t.Errorf("want exactly %d Provision calls, got %d", tries, got)
	}

	// A change of the claim is a new chance.
	backend.setFail(nil)
	patch := []byte(`{"metadata":{"labels":{"retry":"please"}}}`)
	if _, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Patch(t.Context(), claim.Name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitBound(claim.Name)
}

// Claims of another provisioner's class are left alone.
func TestOtherProvisionersClaimsAreIgnored(t *testing.T) {
	f := newFixture(t)
	backend := &dirBackend{root: t.TempDir()}
	f.start(f.config(), backend)
	f.createClass(f.class, nil)
	other := f.createClass(f.class+"-other", func(c *storagev1.StorageClass) {
		c.Provisioner = "e2e.provfleet.io/someone-else"
	})
	foreign := f.createClaim("foreign", other.Name, nil)
	mine := f.createClaim("mine", f.class, nil)

	// The foreign claim was created first: once ours is bound, the controller
	// has long seen the foreign one.
	f.waitBound(mine.Name)
	if got := backend.attemptsFor(volumeName(foreign)); len(got) != 0 {
		t.Errorf("provisioned a claim of another provisioner: %+v", got)
	}
	current, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(t.Context(), foreign.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fins := current.Finalizers; len(fins) != 1 || fins[0] != "kubernetes.io/pvc-protection" {
		t.Errorf("foreign claim finalizers touched: %v", fins)
	}
}

// Turning the PV finalizer off takes it off the PersistentVolumes that carry
// it, so once the provisioner is gone (its ProvisionerConfig deleted) a
// deleted PV goes instead of hanging in Terminating.
func TestFinalizerTurnedOffLetsVolumesGo(t *testing.T) {
	f := newFixture(t)
	backend := &dirBackend{root: t.TempDir()}
	cfg := f.config()
	cfg.Finalizer = true
	in := f.start(cfg, backend)
	f.createClass(f.class, nil)
	claim := f.createClaim("data", f.class, nil)
	f.waitBound(claim.Name)
	pvName := volumeName(claim)
	if fins := f.volume(pvName).Finalizers; !slices.Contains(fins, provisioning.VolumeFinalizer) {
		t.Fatalf("PV finalizers %v, want %s", fins, provisioning.VolumeFinalizer)
	}

	cfg.Finalizer = false
	if err := in.controller.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	f.eventually("the PV finalizer to be taken off", func(ctx context.Context) (bool, error) {
		volume, err := f.admin.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return !slices.Contains(volume.Finalizers, provisioning.VolumeFinalizer), nil
	})
	in.stop(t)

	f.deleteClaim(claim.Name)
	f.waitClaimGone(claim.Name)
	if err := f.admin.CoreV1().PersistentVolumes().Delete(t.Context(), pvName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitVolumeGone(pvName)
}

func mustVolumes(t *testing.T, backend *dirBackend) []string {
	t.Helper()
	volumes, err := backend.volumes()
	if err != nil {
		t.Fatal(err)
	}
	return volumes
}
