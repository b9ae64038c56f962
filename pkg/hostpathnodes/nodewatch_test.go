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
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

func TestChangedEntries(t *testing.T) {
	lease := func(annotations map[string]string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}}
	}
	report := func(entries string) map[string]string { return map[string]string{AnnNodeReport: entries} }
	tests := map[string]struct {
		old, lease *coordinationv1.Lease
		want       []string
	}{
		"created": {
			lease: lease(report(`{"a":{"generation":1,"reason":"Running"},"b":{"generation":1,"reason":"Paused"}}`)),
			want:  []string{"a", "b"},
		},
		"deleted": {
			old:  lease(report(`{"a":{"generation":1,"reason":"Running"}}`)),
			want: []string{"a"},
		},
		"renewed with the same report": {
			old:   lease(report(`{"a":{"generation":1,"reason":"Running","available":5}}`)),
			lease: lease(report(`{"a":{"generation":1,"reason":"Running","available":5}}`)),
		},
		"one entry's space changed": {
			old:   lease(report(`{"a":{"generation":1,"reason":"Running","available":5},"b":{"generation":1,"reason":"Running"}}`)),
			lease: lease(report(`{"a":{"generation":1,"reason":"Running","available":4},"b":{"generation":1,"reason":"Running"}}`)),
			want:  []string{"a"},
		},
		"an entry added and one dropped": {
			old:   lease(report(`{"a":{"generation":1,"reason":"Running"}}`)),
			lease: lease(report(`{"b":{"generation":1,"reason":"Running"}}`)),
			want:  []string{"a", "b"},
		},
		"removed volumes released": {
			old:   lease(map[string]string{AnnRemovedVolumes: `{"a":{"pv-1":"Delete","pv-2":"Delete"},"b":{"pv-3":"Retain"}}`}),
			lease: lease(map[string]string{AnnRemovedVolumes: `{"a":{"pv-2":"Delete"},"b":{"pv-3":"Retain"}}`}),
			want:  []string{"a"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := changedEntries(tt.old, tt.lease)
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("changed entries (-want +got):\n%s", diff)
			}
		})
	}
}

// recordedWaits records the waits of a delaying queue; it implements
// nothing else.
type recordedWaits struct {
	workqueue.TypedDelayingInterface[string]
	waits map[string]time.Duration
}

func (r *recordedWaits) AddAfter(key string, d time.Duration) { r.waits[key] = d }

// TestWatchExpiryWaitsByTheManagersClock: the watch looks at a node again
// one duration after it saw the Lease renewed, whatever the agent's clock
// wrote; with renewTime 45 s behind a 40 s Lease, not at once.
func TestWatchExpiryWaitsByTheManagersClock(t *testing.T) {
	now := time.Now()
	waits := &recordedWaits{waits: map[string]time.Duration{}}
	w := &nodeWatch{n: &Nodes{clock: newLeaseClock()}, expiries: waits}
	for name, renewed := range map[string]time.Time{"behind": now.Add(-45 * time.Second), "ahead": now.Add(time.Hour)} {
		w.watchExpiry(&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent"), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: renewed}},
		}, now)
	}
	want := map[string]time.Duration{"agents/behind": 40 * time.Second, "agents/ahead": 40 * time.Second}
	if diff := cmp.Diff(want, waits.waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}
