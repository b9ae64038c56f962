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

package provisioning

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// expandingBackend is a fakeBackend that grows volumes within a budget of
// limit bytes, or fails every Expand with err.
type expandingBackend struct {
	*fakeBackend
	limit int64
	err   error

	mu    sync.Mutex
	calls []string
}

func (b *expandingBackend) Expand(_ context.Context, volume *corev1.PersistentVolume, _ *corev1.PersistentVolumeClaim, size resource.Quantity) (resource.Quantity, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, volume.Name+"="+size.String())
	if b.err != nil {
		return resource.Quantity{}, b.err
	}
	if size.CmpInt64(b.limit) > 0 {
		return resource.Quantity{}, fmt.Errorf("%w: capacity budget exhausted", ErrNoRoom)
	}
	return size, nil
}

// resizeOutcome is what an expansion left in the API, in the events and in
// the backend.
type resizeOutcome struct {
	VolumeCapacity string
	Capacity       string
	Allocated      string
	Status         corev1.ClaimResourceStatus
	Conditions     []corev1.PersistentVolumeClaimConditionType
	Events         []string
	Calls          []string
	Metric         string
}

func TestExpansion(t *testing.T) {
	const class = "fast"
	tests := map[string]struct {
		request, capacity, volume string
		// status and allocated are the claim's resize status before.
		status    corev1.ClaimResourceStatus
		allocated string
		noExpand  bool
		notAllow  bool
		paused    bool
		err       error
		want      resizeOutcome
		wantErr   bool
	}{
		"grows within the budget": {
			request: "2Gi", capacity: "1Gi", volume: "1Gi",
			want: resizeOutcome{VolumeCapacity: "2Gi", Capacity: "2Gi", Allocated: "2Gi",
				Events: []string{EventResizing, EventResizeSuccessful}, Calls: []string{"pvc-uid-claim=2Gi"}, Metric: resultResizeSucceeded},
		},
		"a backend without Expander refuses": {
			request: "2Gi", capacity: "1Gi", volume: "1Gi", noExpand: true,
			want: resizeOutcome{VolumeCapacity: "1Gi", Capacity: "1Gi", Allocated: "2Gi", Status: corev1.PersistentVolumeClaimControllerResizeInfeasible,
				Conditions: []corev1.PersistentVolumeClaimConditionType{corev1.PersistentVolumeClaimControllerResizeError},
				Events:     []string{EventResizeFailed}, Metric: resultResizeNoExpander},
		},
		"a refusal already on the claim is not told again": {
			request: "2Gi", capacity: "1Gi", volume: "1Gi", noExpand: true, status: corev1.PersistentVolumeClaimControllerResizeInfeasible, allocated: "2Gi",
			want: resizeOutcome{VolumeCapacity: "1Gi", Capacity: "1Gi", Allocated: "2Gi", Status: corev1.PersistentVolumeClaimControllerResizeInfeasible},
		},
		"over the budget is infeasible": {
			request: "20Gi", capacity: "1Gi", volume: "1Gi",
			want: resizeOutcome{VolumeCapacity: "1Gi", Capacity: "1Gi", Allocated: "20Gi", Status: corev1.PersistentVolumeClaimControllerResizeInfeasible,
				Conditions: []corev1.PersistentVolumeClaimConditionType{corev1.PersistentVolumeClaimControllerResizeError},
				Events:     []string{EventResizing, EventResizeFailed}, Calls: []string{"pvc-uid-claim=20Gi"}, Metric: resultResizeInfeasible},
		},
		"an absurd size within int64 is refused by the budget": {
			request: "1Ei", capacity: "1Gi", volume: "1Gi",
			want: resizeOutcome{VolumeCapacity: "1Gi", Capacity: "1Gi", Allocated: "1Ei", Status: corev1.PersistentVolumeClaimControllerResizeInfeasible,
				Conditions: []corev1.PersistentVolumeClaimConditionType{corev1.PersistentVolumeClaimControllerResizeError},
				Events:     []string{EventResizing, EventResizeFailed}, Calls: []string{"pvc-uid-claim=1Ei"}, Metric: resultResizeInfeasible},
		},
		"a size beyond int64 is refused before the backend": {
			request: "1e30", capacity: "1Gi", volume: "1Gi",
			want: resizeOutcome{VolumeCapacity: "1Gi", Capacity: "1Gi", Allocated: "1e30", Status: corev1.PersistentVolumeClaimControllerResizeInfeasible,
				Conditions: []corev1.PersistentVolumeClaimConditionType{corev1.PersistentVolumeClaimControllerResizeError},
				Events:     []string{EventResizeFailed}, Metric: resultResizeInfeasible},
		},
		"a class that does not allow expansion refuses": {
			request: "2Gi", capacity: "1Gi", volume: "1Gi", notAllow: true,
			want: resizeOutcome{VolumeCapacity: "1Gi", Capacity: "1Gi", Allocated: "2Gi", Status: corev1.PersistentVolumeClaimControllerResizeInfeasible,
				Conditions: []corev1.PersistentVolumeClaimConditionType{corev1.PersistentVolumeClaimControllerResizeError},
				Events:     []string{EventResizeFailed}, Metric: resultResizeNotAllowed},
		},
		"a paused provisioner does nothing": {
			request: "2Gi", capacity: "1Gi", volume: "1Gi", paused: true,
			want: resizeOutcome{VolumeCapacity: "1Gi", Capacity: "1Gi"},
		},
		"a restart after the volume was raised finishes the claim": {
			request: "2Gi", capacity: "1Gi", volume: "2Gi", status: corev1.PersistentVolumeClaimControllerResizeInProgress, allocated: "2Gi",
			want: resizeOutcome{VolumeCapacity: "2Gi", Capacity: "2Gi", Allocated: "2Gi", Events: []string{EventResizeSuccessful}, Metric: resultResizeSucceeded},
		},
		"a restart before the volume was raised expands again": {
			request: "2Gi", capacity: "1Gi", volume: "1Gi", status: corev1.PersistentVolumeClaimControllerResizeInProgress, allocated: "2Gi",
			want: resizeOutcome{VolumeCapacity: "2Gi", Capacity: "2Gi", Allocated: "2Gi",
				Events: []string{EventResizing, EventResizeSuccessful}, Calls: []string{"pvc-uid-claim=2Gi"}, Metric: resultResizeSucceeded},
		},
		"a request lowered after a refusal grows to the new request": {
			request: "3Gi", capacity: "1Gi", volume: "1Gi", status: corev1.PersistentVolumeClaimControllerResizeInfeasible, allocated: "20Gi",
			want: resizeOutcome{VolumeCapacity: "3Gi", Capacity: "3Gi", Allocated: "3Gi",
				Events: []string{EventResizing, EventResizeSuccessful}, Calls: []string{"pvc-uid-claim=3Gi"}, Metric: resultResizeSucceeded},
		},
		"a request back at the capacity clears the refusal": {
			request: "1Gi", capacity: "1Gi", volume: "1Gi", status: corev1.PersistentVolumeClaimControllerResizeInfeasible, allocated: "20Gi",
			want: resizeOutcome{VolumeCapacity: "1Gi", Capacity: "1Gi", Allocated: "1Gi"},
		},
		"a refusal is not repeated for the same request": {
			request: "20Gi", capacity: "1Gi", volume: "1Gi", status: corev1.PersistentVolumeClaimControllerResizeInfeasible, allocated: "20Gi",
			want: resizeOutcome{VolumeCapacity: "1Gi", Capacity: "1Gi", Allocated: "20Gi", Status: corev1.PersistentVolumeClaimControllerResizeInfeasible},
		},
		"an unavailable backend is retried": {
			request: "2Gi", capacity: "1Gi", volume: "1Gi", err: fmt.Errorf("%w: server down", ErrBackendUnavailable),
			want: resizeOutcome{VolumeCapacity: "1Gi", Capacity: "1Gi", Allocated: "2Gi", Status: corev1.PersistentVolumeClaimControllerResizeInProgress,
				Conditions: []corev1.PersistentVolumeClaimConditionType{corev1.PersistentVolumeClaimResizing},
				Events:     []string{EventResizing, EventResizeFailed}, Calls: []string{"pvc-uid-claim=2Gi"}, Metric: resultResizeFailed},
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim, volume, sc := boundClaim(tc.request, tc.capacity, tc.volume, class)
			if tc.status != "" {
				claim.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: tc.status}
				claim.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(tc.allocated)}
			}
			sc.AllowVolumeExpansion = ptr.To(!tc.notAllow)
			f := newFixture(t, claim, volume, sc)
			f.fill(claim, volume, sc)
			fake := &expandingBackend{fakeBackend: newFakeBackend(), limit: 10 << 30, err: tc.err}
			var backend Provisioner = fake
			if tc.noExpand {
				backend = fake.fakeBackend
			}
			cfg := testConfig(testProvisioner)
			cfg.Paused = tc.paused
			recorder := &testRecorder{}
			c := f.newController(cfg, backend, recorder)
			if !c.claimInteresting(claim) && !tc.paused {
				t.Fatal("the claim is not looked at")
			}
			var err error
			if tc.paused {
				claimWorker{c: c}.work(t.Context(), keyOfClaim(claim))
			} else {
				_, err = c.syncClaim(t.Context(), nil, keyOfClaim(claim))
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync: %v, want an error: %v", err, tc.wantErr)
			}
			got := f.resizeOutcome(claim, recorder, fake, class)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}

// A claim bound to another provisioner's volume is left alone.
func TestExpansionLeavesOtherVolumes(t *testing.T) {
	claim, volume, class := boundClaim("2Gi", "1Gi", "1Gi", "fast")
	volume.Annotations[AnnDynamicallyProvisioned] = "other.example.com/provisioner"
	class.AllowVolumeExpansion = ptr.To(true)
	f := newFixture(t, claim, volume, class)
	f.fill(claim, volume, class)
	fake := &expandingBackend{fakeBackend: newFakeBackend(), limit: 10 << 30}
	recorder := &testRecorder{}
	c := f.newController(testConfig(testProvisioner), fake, recorder)
	if _, err := c.syncClaim(t.Context(), nil, keyOfClaim(claim)); err != nil {
		t.Fatal(err)
	}
	want := resizeOutcome{VolumeCapacity: "1Gi", Capacity: "1Gi"}
	if diff := cmp.Diff(want, f.resizeOutcome(claim, recorder, fake, "fast")); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
}

// The refusal of a backend without Expander says so.
func TestExpansionRefusalSaysWhy(t *testing.T) {
	claim, volume, class := boundClaim("2Gi", "1Gi", "1Gi", "fast")
	class.AllowVolumeExpansion = ptr.To(true)
	f := newFixture(t, claim, volume, class)
	f.fill(claim, volume, class)
	recorder := &testRecorder{}
	c := f.newController(testConfig(testProvisioner), newFakeBackend(), recorder)
	if _, err := c.syncClaim(t.Context(), nil, keyOfClaim(claim)); err != nil {
		t.Fatal(err)
	}
	messages := recorder.messagesOf(EventResizeFailed)
	if len(messages) != 1 || !strings.Contains(messages[0], "cannot expand volumes") {
		t.Errorf("VolumeResizeFailed Events %q, want one saying the provisioner cannot expand volumes", messages)
	}
}

// boundClaim returns a claim of request, bound with status capacity to a
// PersistentVolume of this provisioner of volumeSize, and its class.
func boundClaim(request, capacity, volumeSize, class string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume, *storagev1.StorageClass) {
	claim := newClaim("claim", class, testProvisioner)
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(request)
	claim.Spec.VolumeName = volumeNameFor(claim)
	claim.Status = corev1.PersistentVolumeClaimStatus{
		Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)},
	}
	volume := newVolume(claim.Spec.VolumeName, testProvisioner, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete)
	volume.Spec.ClaimRef = claimRef(claim)
	volume.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(volumeSize)}
	return claim, volume, newClass(class, testProvisioner)
}

// resizeOutcome reads what an expansion of claim left.
func (f *fixture) resizeOutcome(claim *corev1.PersistentVolumeClaim, recorder *testRecorder, backend *expandingBackend, class string) resizeOutcome {
	f.t.Helper()
	got := f.getClaim(claim.Name)
	volume, err := f.client.CoreV1().PersistentVolumes().Get(context.Background(), claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := resizeOutcome{
		VolumeCapacity: quantityString(volume.Spec.Capacity),
		Capacity:       quantityString(got.Status.Capacity),
		Allocated:      quantityString(got.Status.AllocatedResources),
		Status:         got.Status.AllocatedResourceStatuses[corev1.ResourceStorage],
		Events:         recorder.events(),
	}
	for _, c := range got.Status.Conditions {
		out.Conditions = append(out.Conditions, c.Type)
	}
	backend.mu.Lock()
	out.Calls = backend.calls
	backend.mu.Unlock()
	for _, result := range []string{resultResizeSucceeded, resultResizeInfeasible, resultResizeFailed, resultResizeNotAllowed, resultResizeNoExpander} {
		if testutil.ToFloat64(f.metrics.expandTotal.WithLabelValues(testProvisioner, class, result)) > 0 {
			out.Metric = result
		}
	}
	return out
}

func quantityString(list corev1.ResourceList) string {
	q, ok := list[corev1.ResourceStorage]
	if !ok {
		return ""
	}
	return q.String()
}
