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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestLeaseClockLive(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		spec coordinationv1.LeaseSpec
		// seenAgo is how long ago the manager first saw the renewal.
		seenAgo time.Duration
		want    bool
	}{
		"renewal seen within its duration": {
			spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent"), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: now.Add(-30 * time.Second)}},
			seenAgo: 30 * time.Second,
			want:    true,
		},
		"renewal seen longer ago than its duration": {
			spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent"), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: now.Add(-41 * time.Second)}},
			seenAgo: 41 * time.Second,
		},
		"renewal first seen now, written by a clock an hour behind": {
			spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent"), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: now.Add(-time.Hour)}},
			want: true,
		},
		"renewal seen 41 s ago, written by a clock an hour ahead": {
			spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent"), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: now.Add(time.Hour)}},
			seenAgo: 41 * time.Second,
		},
		"no holder": {
			spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: now}},
		},
		"never renewed": {
			spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent"), LeaseDurationSeconds: ptr.To[int32](40)},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			clock := newLeaseClock()
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "l"}, Spec: tt.spec}
			clock.expiry(lease, now.Add(-tt.seenAgo))
			got := clock.live(lease.DeepCopy(), now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("live (-want +got):\n%s", diff)
			}
		})
	}
}
