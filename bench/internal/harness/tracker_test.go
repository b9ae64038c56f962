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

package harness

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/provfleet/provfleet/bench/internal/measure"
)

func claim(uid, annotation string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: types.UID(uid)}}
	if annotation != "" {
		c.Annotations = map[string]string{annotation: "bench.provfleet.io/x"}
	}
	c.Status.Phase = phase
	return c
}

// volumeU1 is the PV of claim u1, named as both provisioners name it.
func volumeU1() *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-u1"}}
}

func TestTrackerTimestampsFirstSightings(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	// event is what the watch delivers at second `at`.
	type event struct {
		at      int
		obj     any
		deleted bool
	}
	tests := map[string]struct {
		events     []event
		wantClaim  claimTimes
		wantVolume volumeTimes
	}{
		"annotated, provisioned, bound": {
			events: []event{
				{at: 1, obj: claim("u1", "", corev1.ClaimPending)},
				{at: 2, obj: claim("u1", annStorageProvisioner, corev1.ClaimPending)},
				{at: 3, obj: claim("u1", annStorageProvisioner, corev1.ClaimPending)},
				{at: 4, obj: volumeU1()},
				{at: 5, obj: claim("u1", annStorageProvisioner, corev1.ClaimBound)},
				{at: 6, obj: claim("u1", annStorageProvisioner, corev1.ClaimBound)},
			},
			wantClaim:  claimTimes{uid: "u1", annotated: at(2), bound: at(5)},
			wantVolume: volumeTimes{created: at(4)},
		},
		"the volume's watch delivers before the claim's": {
			events: []event{
				{at: 1, obj: claim("u1", "", corev1.ClaimPending)},
				{at: 3, obj: volumeU1()},
				{at: 4, obj: claim("u1", annStorageProvisioner, corev1.ClaimPending)},
			},
			wantClaim:  claimTimes{uid: "u1", annotated: at(3)},
			wantVolume: volumeTimes{created: at(3)},
		},
		"the beta annotation counts": {
			events:    []event{{at: 7, obj: claim("u1", annBetaStorageProvisioner, corev1.ClaimPending)}},
			wantClaim: claimTimes{uid: "u1", annotated: at(7)},
		},
		"a claim recreated under the same name starts over": {
			events: []event{
				{at: 1, obj: claim("old", annStorageProvisioner, corev1.ClaimBound)},
				{at: 9, obj: claim("u1", annStorageProvisioner, corev1.ClaimPending)},
			},
			wantClaim: claimTimes{uid: "u1", annotated: at(9)},
		},
		"a deleted volume, also through a tombstone": {
			events: []event{
				{at: 1, obj: claim("u1", annStorageProvisioner, corev1.ClaimBound)},
				{at: 2, obj: volumeU1()},
				{at: 8, obj: cache.DeletedFinalStateUnknown{Key: "pvc-u1", Obj: volumeU1()}, deleted: true},
			},
			wantClaim:  claimTimes{uid: "u1", annotated: at(1), bound: at(1)},
			wantVolume: volumeTimes{created: at(2), gone: at(8)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tr := newTracker()
			var now time.Time
			tr.now = func() time.Time { return now }
			for _, e := range tc.events {
				now = at(e.at)
				switch e.obj.(type) {
				case *corev1.PersistentVolumeClaim:
					tr.observeClaim(e.obj)
				default:
					if e.deleted {
						tr.observeVolumeDeleted(e.obj)
					} else {
						tr.observeVolume(e.obj)
					}
				}
			}
			c, v, ok := tr.claimVolume("ns", "c")
			if !ok {
				t.Fatal("the claim was never seen")
			}
			if diff := cmp.Diff(tc.wantClaim, c, cmp.AllowUnexported(claimTimes{})); diff != "" {
				t.Errorf("claim (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantVolume, v, cmp.AllowUnexported(volumeTimes{})); diff != "" {
				t.Errorf("volume (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrackerUnseenClaim(t *testing.T) {
	if _, _, ok := newTracker().claimVolume("ns", "nope"); ok {
		t.Error("an unseen claim is reported as seen")
	}
}

func TestCPUSinceLeavesOutExitedProcesses(t *testing.T) {
	before := map[int]measure.Usage{1: {CPU: time.Second}, 2: {CPU: 2 * time.Second}}
	after := map[int]measure.Usage{1: {CPU: 3 * time.Second}, 3: {CPU: 5 * time.Second}}
	if diff := cmp.Diff(2*time.Second, cpuSince(before, after)); diff != "" {
		t.Errorf("CPU (-want +got):\n%s", diff)
	}
}
