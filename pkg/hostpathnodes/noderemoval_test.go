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
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// boundVolume makes a claim and a volume of node bound to each other and
// returns the volume.
func (e *coordEnv) boundVolume(name, node, class string) *corev1.PersistentVolume {
	e.t.Helper()
	claim := e.claim(name, class, "1Gi", nil)
	volume := e.volume(e.id+"-"+name, node, "1Gi", class, claim)
	e.eventually("claim "+name+" bound", func() (bool, error) {
		return e.getClaim(name).Spec.VolumeName == volume.Name, nil
	})
	return volume
}

func (e *coordEnv) getVolume(name string) (*corev1.PersistentVolume, error) {
	return e.client.CoreV1().PersistentVolumes().Get(e.ctx, name, metav1.GetOptions{})
}

func (e *coordEnv) removedGauge() float64 {
	return testutil.ToFloat64(e.metrics.removedNodeVolumes.WithLabelValues(e.provName))
}

func testRemovalReport(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	e := newCoordEnv(t, client, "report")
	class := e.class("Immediate")
	// Node report-gone never had a Node object: as if deleted already.
	e.node("report-live", nil)
	kept := e.boundVolume("kept", "report-live", class)
	lost := e.boundVolume("lost", "report-gone", class)
	e.start("replica-1", &v1alpha1.HostPathBackend{Path: "/var/lib/report"})

	e.waitEvent(metav1.NamespaceDefault, lost.Name, EventNodeRemoved)
	message := e.waitEvent(e.ns, "lost", EventNodeRemoved)
	if diff := cmp.Diff("Node report-gone has no Node object: this volume cannot be reached; it is kept (nodeRemoval policy Report)", message); diff != "" {
		t.Errorf("Event on the claim (-want +got):\n%s", diff)
	}
	e.eventually("the gauge", func() (bool, error) { return e.removedGauge() == 1, nil })
	for _, pv := range []*corev1.PersistentVolume{kept, lost} {
		got, err := e.getVolume(pv.Name)
		if err != nil {
			t.Fatalf("volume %s: %v", pv.Name, err)
		}
		if got.DeletionTimestamp != nil {
			t.Errorf("volume %s deleted under the Report policy", pv.Name)
		}
	}
	if len(e.events(metav1.NamespaceDefault, kept.Name, EventNodeRemoved)) != 0 {
		t.Errorf("the volume of a live node was reported removed")
	}
}

func testRemovalDelete(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	e := newCoordEnv(t, client, "delete")
	class := e.class("Immediate")
	e.node("delete-gone", nil)
	volume := e.boundVolume("lost", "delete-gone", class)
	// An admin switched this one to Retain: its directory is to be kept.
	retained := e.boundVolume("retained", "delete-gone", class)
	patch := []byte(`{"spec":{"persistentVolumeReclaimPolicy":"Retain"}}`)
	if _, err := e.client.CoreV1().PersistentVolumes().Patch(e.ctx, retained.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The node's removal list already names a volume removed earlier, and
	// one of another ProvisionerConfig: both stay.
	earlier := removedList{
		e.configName: {{Name: "pvc-earlier", UID: "uid-earlier", OnDelete: backend.OnDeleteDelete}},
		"other":      {{Name: "pvc-other", UID: "uid-other", OnDelete: backend.OnDeleteDelete}},
	}
	data, err := earlier.encode()
	if err != nil {
		t.Fatal(err)
	}
	e.create(func() error {
		cm := newRemovedList(e.leaseNS, "delete-gone")
		cm.Data = data
		_, err := e.client.CoreV1().ConfigMaps(e.leaseNS).Create(e.ctx, cm, metav1.CreateOptions{})
		return err
	})
	grace := 2 * time.Second
	e.start("replica-1", &v1alpha1.HostPathBackend{Path: "/var/lib/delete", OnDelete: v1alpha1.OnDeleteArchive,
		NodeRemoval: &v1alpha1.NodeRemoval{Policy: v1alpha1.NodeRemovalDelete, GracePeriod: &metav1.Duration{Duration: grace}}})
	if err := e.client.CoreV1().Nodes().Delete(e.ctx, "delete-gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	var goneSince time.Time
	e.eventually("the node's removal recorded on the volume", func() (bool, error) {
		pv, err := e.getVolume(volume.Name)
		if err != nil {
			return false, err
		}
		goneSince, err = time.Parse(time.RFC3339, pv.Annotations[AnnNodeGoneSince])
		return err == nil, nil
	})
	var deletedAt time.Time
	e.eventually("the volume deleted without its finalizer", func() (bool, error) {
		pv, err := e.getVolume(volume.Name)
		if err != nil {
			return false, err
		}
		if pv.DeletionTimestamp != nil {
			deletedAt = pv.DeletionTimestamp.Time
		}
		return pv.DeletionTimestamp != nil && !slices.Contains(pv.Finalizers, provisioning.VolumeFinalizer), nil
	})
	// Both stamps have whole seconds.
	if deletedAt.Before(goneSince.Add(grace)) {
		t.Errorf("volume deleted at %s, before the grace period that began at %s ended", deletedAt, goneSince)
	}
	cm, err := e.client.CoreV1().ConfigMaps(e.leaseNS).Get(e.ctx, RemovedListName("delete-gone"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	removed, err := readRemovedList(cm)
	if err != nil {
		t.Fatal(err)
	}
	want := removedList{
		e.configName: {
			{Name: volume.Name, UID: volume.UID, OnDelete: backend.OnDeleteArchive},
			{Name: "pvc-earlier", UID: "uid-earlier", OnDelete: backend.OnDeleteDelete},
			{Name: retained.Name, UID: retained.UID, OnDelete: backend.OnDeleteRetain},
		},
		"other": {{Name: "pvc-other", UID: "uid-other", OnDelete: backend.OnDeleteDelete}},
	}
	sortList := cmpopts.SortSlices(func(a, b removedVolume) bool { return a.Name < b.Name })
	if diff := cmp.Diff(want, removed, sortList); diff != "" {
		t.Errorf("removal list of the node (-want +got):\n%s", diff)
	}
	if _, err := e.client.CoordinationV1().Leases(e.leaseNS).Get(e.ctx, NodeLeaseName("delete-gone"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the node Lease was written: %v", err)
	}
	e.waitEvent(metav1.NamespaceDefault, volume.Name, EventNodeRemovedVolumeDelete)
	e.waitEvent(e.ns, "lost", EventNodeRemovedVolumeDelete)
	// A volume the leader deleted is deleted once: told once.
	if count := eventCount(e.events(e.ns, "lost", EventNodeRemovedVolumeDelete)); count != 1 {
		t.Errorf("the claim was told %d times of the deletion", count)
	}

	// The volume protection keeps a bound volume until its claim is gone.
	if err := e.client.CoreV1().PersistentVolumeClaims(e.ns).Delete(e.ctx, "lost", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the volume gone", func() (bool, error) {
		_, err := e.getVolume(volume.Name)
		return apierrors.IsNotFound(err), nil
	})
}

func testNodeBack(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	e := newCoordEnv(t, client, "back")
	class := e.class("Immediate")
	e.node("back-a", nil)
	volume := e.boundVolume("kept", "back-a", class)
	e.start("replica-1", &v1alpha1.HostPathBackend{Path: "/var/lib/back",
		NodeRemoval: &v1alpha1.NodeRemoval{Policy: v1alpha1.NodeRemovalDelete, GracePeriod: &metav1.Duration{Duration: time.Hour}}})
	if err := e.client.CoreV1().Nodes().Delete(e.ctx, "back-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the node's removal recorded on the volume", func() (bool, error) {
		pv, err := e.getVolume(volume.Name)
		return err == nil && pv.Annotations[AnnNodeGoneSince] != "", err
	})
	e.waitEvent(e.ns, "kept", EventNodeRemoved)
	e.eventually("the gauge", func() (bool, error) { return e.removedGauge() == 1, nil })

	e.node("back-a", nil)
	e.eventually("the node's removal forgotten", func() (bool, error) {
		pv, err := e.getVolume(volume.Name)
		if err != nil {
			return false, err
		}
		_, gone := pv.Annotations[AnnNodeGoneSince]
		return !gone, nil
	})
	e.eventually("the gauge back to zero", func() (bool, error) { return e.removedGauge() == 0, nil })
	pv, err := e.getVolume(volume.Name)
	if err != nil {
		t.Fatal(err)
	}
	if pv.DeletionTimestamp != nil || !slices.Contains(pv.Finalizers, provisioning.VolumeFinalizer) {
		t.Errorf("the volume of a node back within the grace period was touched: deletion %v, finalizers %v", pv.DeletionTimestamp, pv.Finalizers)
	}
	if _, err := e.client.CoordinationV1().Leases(e.leaseNS).Get(e.ctx, NodeLeaseName("back-a"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the node Lease was written: %v", err)
	}
}
