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
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/polltest"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/pkg/generated/clientset/versioned"
	"github.com/provfleet/provfleet/pkg/hostpathnodes"
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
	e := newNodeWorld(t, kubernetes.NewForConfigOrDie(env.Config()), "nodewatch")
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
	e.agent(a)
	e.agent(b)
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
	lease, err := leases.Get(ctx, hostpathnodes.NodeLeaseName(b), metav1.GetOptions{})
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
			Message: "no node agent renews Lease " + e.leaseNS + "/" + hostpathnodes.NodeLeaseName(b)}}})
}

// nodeWorld is a test's own namespaces, node names and provisioner on a
// shared control plane, with Nodes and node Leases written as the node
// agents would.
type nodeWorld struct {
	t          *testing.T
	ctx        context.Context
	client     kubernetes.Interface
	id         string // prefixes every cluster-scoped name
	ns         string // the provisioner's Lease
	leaseNS    string // node Leases
	configName string
	provName   string
}

func newNodeWorld(t *testing.T, client kubernetes.Interface, id string) *nodeWorld {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	e := &nodeWorld{t: t, ctx: ctx, client: client, id: id, ns: id, leaseNS: id + "-nodes", configName: id, provName: "provfleet.io/" + id}
	for _, ns := range []string{e.ns, e.leaseNS} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("cannot create namespace %s: %v", ns, err)
		}
	}
	return e
}

// node creates a Node object labelled labels.
func (e *nodeWorld) node(name string, labels map[string]string) {
	e.t.Helper()
	if _, err := e.client.CoreV1().Nodes().Create(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("cannot create node %s: %v", name, err)
	}
	e.t.Cleanup(func() {
		_ = e.client.CoreV1().Nodes().Delete(context.WithoutCancel(e.ctx), name, metav1.DeleteOptions{})
	})
}

// agent writes the node Lease of node as its agent would: held, renewed now
// for 600s, and running this world's ProvisionerConfig.
func (e *nodeWorld) agent(node string) {
	e.t.Helper()
	report := fmt.Sprintf(`{%q:{"generation":1,"reason":%q}}`, e.configName, v1alpha1.ReasonRunning)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.leaseNS, Name: hostpathnodes.NodeLeaseName(node),
			Annotations: map[string]string{hostpathnodes.AnnNodeReport: report}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent-" + node), LeaseDurationSeconds: ptr.To[int32](600),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	if _, err := e.client.CoordinationV1().Leases(e.leaseNS).Create(e.ctx, lease, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("cannot create the Lease of node %s: %v", node, err)
	}
}

// eventually polls condition until it holds, failing the test when it does
// not within two minutes.
func (e *nodeWorld) eventually(what string, condition func() (bool, error)) {
	e.t.Helper()
	polltest.Until(e.ctx, e.t, what, 100*time.Millisecond, 2*time.Minute, func(context.Context) (bool, error) { return condition() })
}
