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

package fleet

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/pkg/generated/clientset/versioned"
)

// The manager looks at a hostPath provisioner's nodes again when a Node or
// a node Lease changes, and when a Lease expires unrenewed; at no other
// time.
func TestNodeStatusFollowsNodesAndLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: needs a control plane")
	}
	_, ctx := ktesting.NewTestContext(t)
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		t.Fatalf("cannot start the control plane: %v", err)
	}
	t.Cleanup(env.Stop)
	e := newCoordEnv(t, kubernetes.NewForConfigOrDie(env.Config()), "nodewatch")
	pcfg := versioned.NewForConfigOrDie(env.Config())
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	m, err := New(env.Config(), Settings{Roles: Roles{Manager: true}, Namespace: e.ns, Identity: "manager-1",
		NodeLeaseNamespace: e.leaseNS, QPS: 100, Burst: 200})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- m.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	// Both agents' Leases last 600s: no expiry is due while the test runs,
	// so only the events of the Node and the Lease bring what follows.
	a, b := e.id+"-a", e.id+"-b"
	e.node(a, map[string]string{"disk": "nvme"})
	e.node(b, nil)
	e.agent(a, v1alpha1.ReasonRunning, true, nil)
	e.agent(b, v1alpha1.ReasonRunning, true, nil)
	pc := &v1alpha1.ProvisionerConfig{ObjectMeta: metav1.ObjectMeta{Name: e.configName}}
	pc.Spec.ProvisionerName = v1alpha1.ProvisionerName(e.provName)
	pc.Spec.Backend.HostPath = &v1alpha1.HostPathBackend{Path: "/srv/nodewatch",
		NodeSelector: &v1alpha1.NodeLabelSelector{MatchLabels: map[string]string{"disk": "nvme"}}}
	if _, err := pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("cannot create the ProvisionerConfig: %v", err)
	}
	t.Cleanup(func() {
		_ = pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Delete(context.WithoutCancel(ctx), pc.Name, metav1.DeleteOptions{})
	})
	nodesAre := func(what string, want *v1alpha1.NodesStatus) {
		t.Helper()
		var diff string
		e.eventually(what, func() (bool, error) {
			got, err := pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(ctx, pc.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			diff = cmp.Diff(want, got.Status.Nodes)
			return diff == "", nil
		})
		if diff != "" {
			t.Errorf("status.nodes (-want +got):\n%s", diff)
		}
	}
	nodesAre("node a served", &v1alpha1.NodesStatus{Selected: 1, Served: 1, Summary: "1/1"})

	patch := []byte(`{"metadata":{"labels":{"disk":"nvme"}}}`)
	if _, err := e.client.CoreV1().Nodes().Patch(ctx, b, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("cannot label node %s: %v", b, err)
	}
	nodesAre("node b selected by its new label", &v1alpha1.NodesStatus{Selected: 2, Served: 2, Summary: "2/2"})

	// The agent of b renews its Lease one last time, for 2s: a renewal
	// changes neither holder nor report, so only the expiry tells.
	leases := e.client.CoordinationV1().Leases(e.leaseNS)
	lease, err := leases.Get(ctx, NodeLeaseName(b), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](2)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("cannot renew the Lease of node %s: %v", b, err)
	}
	nodesAre("node b unserved once its Lease expired", &v1alpha1.NodesStatus{Selected: 2, Served: 1, Summary: "1/2",
		Unserved: []v1alpha1.UnservedNode{{Node: b, Reason: v1alpha1.ReasonNoNodeAgent,
			Message: "no node agent renews Lease " + e.leaseNS + "/" + NodeLeaseName(b)}}})
}

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
	w := &nodeWatch{m: &Manager{leaseClock: newLeaseClock()}, expiries: waits}
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
