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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/polltest"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// coordWait bounds every wait for the control plane or a coordinator.
const coordWait = 2 * time.Minute

// TestCoordinator runs coordinators against a real control plane, where node
// Leases written by the test stand for the node agents.
func TestCoordinator(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: needs a control plane")
	}
	_, ctx := ktesting.NewTestContext(t)
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		t.Fatalf("cannot start the control plane: %v", err)
	}
	t.Cleanup(env.Stop)
	client := kubernetes.NewForConfigOrDie(env.Config())
	t.Run("places by room, then by fewest volumes, on served nodes only", func(t *testing.T) { testPlacementByRoom(t, client) })
	t.Run("a full budget waits until room frees up", func(t *testing.T) { testFullBudgetWaits(t, client) })
	t.Run("a burst placed at once counts each choice against the budget", func(t *testing.T) { testBurstWithinBudget(t, client) })
	t.Run("two racing leaders place a claim once", func(t *testing.T) { testRacingLeaders(t, client) })
	t.Run("a claim selected to an unserved node is sent back to the scheduler, a bounded number of times", func(t *testing.T) { testUnservedNode(t, client) })
	t.Run("a claim placed on an agent that stops is placed again", func(t *testing.T) { testAgentExpiry(t, client) })
	t.Run("node removal reported", func(t *testing.T) { testRemovalReport(t, client) })
	t.Run("node removal deletes after the grace period", func(t *testing.T) { testRemovalDelete(t, client) })
	t.Run("a node back within the grace period keeps its volumes", func(t *testing.T) { testNodeBack(t, client) })
	if t.Failed() {
		env.DumpLogs(testWriter{t})
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// coordEnv is one subtest's world: its own namespaces, node names and
// provisioner, so that subtests share the control plane only.
type coordEnv struct {
	t          *testing.T
	ctx        context.Context
	client     kubernetes.Interface
	id         string // prefixes every cluster-scoped name
	ns         string // claims and the provisioner's Lease
	leaseNS    string // node Leases
	configName string
	provName   string
	metrics    *coordinatorMetrics
	// clock judges the node Leases' expiry for every coordinator of the
	// subtest, as the manager's does for its coordinators.
	clock *leaseClock
	// retry is the coordinator's retry delay.
	retry time.Duration
}

func newCoordEnv(t *testing.T, client kubernetes.Interface, id string) *coordEnv {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	e := &coordEnv{t: t, ctx: ctx, client: client, id: id, ns: id, leaseNS: id + "-nodes",
		configName: id, provName: "provfleet.io/" + id, retry: time.Second, clock: newLeaseClock()}
	for _, ns := range []string{e.ns, e.leaseNS} {
		e.create(func() error {
			_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		})
	}
	m, err := newCoordinatorMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	e.metrics = m
	return e
}

func (e *coordEnv) create(create func() error) {
	e.t.Helper()
	if err := create(); err != nil {
		e.t.Fatalf("cannot create: %v", err)
	}
}

// start runs a coordinator of spec as identity, with its own informers and
// Event broadcaster, until the subtest ends; identity "" turns leader
// election off.
func (e *coordEnv) start(identity string, spec *v1alpha1.HostPathBackend) *Coordinator {
	e.t.Helper()
	cfg := provisioning.DefaultConfig(e.provName)
	cfg.Retry.InitialDelay = e.retry
	cfg.LeaderElection = provisioning.LeaderElectionConfig{Enabled: identity != "", Namespace: e.ns, Identity: identity,
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second}
	factory := informers.NewSharedInformerFactory(e.client, 0)
	leases := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(e.ns))
	nodeLeases := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(e.leaseNS))
	broadcaster := record.NewBroadcaster(record.WithContext(e.ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: e.client.CoreV1().Events("")})
	c, err := buildCoordinator(e.configName, cfg, spec, coordinatorDeps{
		CoordinatorDeps: CoordinatorDeps{
			Client: e.client,
			Informers: provisioning.SharedInformers{
				Claims:  factory.Core().V1().PersistentVolumeClaims().Informer(),
				Volumes: factory.Core().V1().PersistentVolumes().Informer(),
				Classes: factory.Storage().V1().StorageClasses().Informer(),
				Nodes:   factory.Core().V1().Nodes().Informer(),
				Leases:  leases.Coordination().V1().Leases().Informer(),
			},
			EventRecorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "coordinator-" + identity}),
		},
		NodeLeases:         nodeLeases.Coordination().V1().Leases().Informer(),
		NodeLeaseNamespace: e.leaseNS,
		LeaseClock:         e.clock,
		Metrics:            e.metrics,
	})
	if err != nil {
		e.t.Fatalf("buildCoordinator: %v", err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	for _, f := range []informers.SharedInformerFactory{factory, leases, nodeLeases} {
		f.Start(ctx.Done())
	}
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
		for _, f := range []informers.SharedInformerFactory{factory, leases, nodeLeases} {
			f.Shutdown()
		}
		broadcaster.Shutdown()
	})
	return c
}

// node creates a Node object labelled labels.
func (e *coordEnv) node(name string, labels map[string]string) {
	e.create(func() error {
		_, err := e.client.CoreV1().Nodes().Create(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		return err
	})
	e.t.Cleanup(func() {
		_ = e.client.CoreV1().Nodes().Delete(context.WithoutCancel(e.ctx), name, metav1.DeleteOptions{})
	})
}

// agent writes the node Lease of node as its agent would: held and renewed
// now, and reporting reason for this ProvisionerConfig. Unless live, the
// manager saw that renewal an hour ago.
func (e *coordEnv) agent(node, reason string, live bool, available *int64) {
	lease := e.nodeLease(node, reason, time.Now(), 600, available)
	if !live {
		// Before any coordinator can see it first.
		e.clock.expiry(lease, time.Now().Add(-time.Hour))
	}
	e.createLease(lease)
}

// agentLease writes the node Lease of node, renewed at renewed for seconds.
func (e *coordEnv) agentLease(node, reason string, renewed time.Time, seconds int32, available *int64) {
	e.createLease(e.nodeLease(node, reason, renewed, seconds, available))
}

// nodeLease is the node Lease of node, renewed at renewed for seconds.
func (e *coordEnv) nodeLease(node, reason string, renewed time.Time, seconds int32, available *int64) *coordinationv1.Lease {
	report, err := json.Marshal(nodeReport{e.configName: {Generation: 1, Reason: reason, Available: available}})
	if err != nil {
		e.t.Fatal(err)
	}
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.leaseNS, Name: NodeLeaseName(node), Annotations: map[string]string{AnnNodeReport: string(report)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent-" + node), LeaseDurationSeconds: ptr.To(seconds),
			RenewTime: &metav1.MicroTime{Time: renewed}},
	}
}

func (e *coordEnv) createLease(lease *coordinationv1.Lease) {
	e.create(func() error {
		_, err := e.client.CoordinationV1().Leases(e.leaseNS).Create(e.ctx, lease, metav1.CreateOptions{})
		return err
	})
}

// class creates the StorageClass of the provisioner with mode.
func (e *coordEnv) class(mode storagev1.VolumeBindingMode) string {
	name := e.id
	e.create(func() error {
		_, err := e.client.StorageV1().StorageClasses().Create(e.ctx, &storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: e.provName, VolumeBindingMode: &mode,
		}, metav1.CreateOptions{})
		return err
	})
	e.t.Cleanup(func() {
		_ = e.client.StorageV1().StorageClasses().Delete(context.WithoutCancel(e.ctx), name, metav1.DeleteOptions{})
	})
	return name
}

// claim creates a claim of class asking for size, with annotations.
func (e *coordEnv) claim(name, class, size string, annotations map[string]string) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	claim, err := e.client.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("cannot create claim %s: %v", name, err)
	}
	return claim
}

// volume creates a PersistentVolume of the provisioner on node, as an agent
// would have made it, bound to claim when claim is set.
func (e *coordEnv) volume(name, node, size, class string, claim *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	e.t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{provisioning.VolumeFinalizer},
			Annotations: map[string]string{provisioning.AnnDynamicallyProvisioned: e.provName, backend.AnnNode: node}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              class,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
		},
	}
	// Reserved for a claim that never comes, so that the binder binds no
	// claim of the test to it.
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: e.ns, Name: "reserved-" + name}
	if claim != nil {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}
	}
	created, err := e.client.CoreV1().PersistentVolumes().Create(e.ctx, pv, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("cannot create volume %s: %v", name, err)
	}
	e.t.Cleanup(func() { e.forgetVolume(name) })
	return created
}

// forgetVolume deletes a volume whatever its finalizers.
func (e *coordEnv) forgetVolume(name string) {
	ctx := context.WithoutCancel(e.ctx)
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	_, _ = e.client.CoreV1().PersistentVolumes().Patch(ctx, name, "application/merge-patch+json", patch, metav1.PatchOptions{})
	_ = e.client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{})
}

// eventually polls condition until it holds, failing the test when it does
// not within coordWait.
func (e *coordEnv) eventually(what string, condition func() (bool, error)) {
	e.t.Helper()
	polltest.Until(e.ctx, e.t, what, 100*time.Millisecond, coordWait, func(context.Context) (bool, error) { return condition() })
}

func (e *coordEnv) getClaim(name string) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	claim, err := e.client.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("cannot get claim %s: %v", name, err)
	}
	return claim
}

// placedOn waits until claim has a selected node and returns it.
func (e *coordEnv) placedOn(name string) string {
	e.t.Helper()
	var node string
	e.eventually("claim "+name+" placed", func() (bool, error) {
		node = e.getClaim(name).Annotations[provisioning.AnnSelectedNode]
		return node != "", nil
	})
	return node
}

// events returns the Events of reason about the object name in namespace.
func (e *coordEnv) events(namespace, name, reason string) []corev1.Event {
	e.t.Helper()
	list, err := e.client.CoreV1().Events(namespace).List(e.ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": name, "reason": reason}.String(),
	})
	if err != nil {
		e.t.Fatalf("cannot list Events: %v", err)
	}
	return list.Items
}

// waitEvent waits for an Event of reason about name and returns its message.
func (e *coordEnv) waitEvent(namespace, name, reason string) string {
	e.t.Helper()
	var message string
	e.eventually(reason+" Event on "+name, func() (bool, error) {
		events := e.events(namespace, name, reason)
		if len(events) > 0 {
			message = events[0].Message
		}
		return len(events) > 0, nil
	})
	return message
}

// eventCount is how many times events were recorded.
func eventCount(events []corev1.Event) int32 {
	count := int32(0)
	for _, ev := range events {
		count += ev.Count
	}
	return count
}

func testPlacementByRoom(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	e := newCoordEnv(t, client, "room")
	served := map[string]string{"disk": "local"}
	for _, n := range []string{"room-a", "room-b", "room-c", "room-expired", "room-starting", "room-unselected"} {
		labels := served
		if n == "room-unselected" {
			labels = nil
		}
		e.node(n, labels)
	}
	// The nodes with the most room on paper are not served: no live agent,
	// an agent that does not run this provisioner, a node not selected.
	e.agent("room-a", v1alpha1.ReasonRunning, true, nil)
	e.agent("room-b", v1alpha1.ReasonRunning, true, nil)
	e.agent("room-c", v1alpha1.ReasonRunning, true, nil)
	e.agent("room-expired", v1alpha1.ReasonRunning, false, nil)
	e.agent("room-starting", v1alpha1.ReasonBackendUnavailable, true, nil)
	e.agent("room-unselected", v1alpha1.ReasonRunning, true, nil)
	class := e.class(storagev1.VolumeBindingImmediate)
	// Of a 10Gi budget per node: a has 6Gi left, b and c 9Gi, b with the
	// fewer volumes.
	e.volume("room-pv-a", "room-a", "4Gi", class, nil)
	e.volume("room-pv-b", "room-b", "1Gi", class, nil)
	e.volume("room-pv-c1", "room-c", "512Mi", class, nil)
	e.volume("room-pv-c2", "room-c", "512Mi", class, nil)
	c := e.start("replica-1", &v1alpha1.HostPathBackend{Path: "/var/lib/room",
		NodeSelector: &v1alpha1.NodeLabelSelector{MatchLabels: served},
		Capacity:     &v1alpha1.CapacitySpec{Storage: ptr.To(resource.MustParse("10Gi"))}})

	e.claim("first", class, "1Gi", nil)
	if diff := cmp.Diff("room-b", e.placedOn("first")); diff != "" {
		t.Errorf("node of the first claim (-want +got):\n%s", diff)
	}
	message := e.waitEvent(e.ns, "first", EventNodeSelected)
	if !strings.Contains(message, "room-b") || !strings.Contains(message, "9Gi left") {
		t.Errorf("the placement Event does not say the node and why: %q", message)
	}
	// It leads on the provisioner's own Lease, as a manager that ran the
	// whole controller did.
	lease, err := e.client.CoordinationV1().Leases(e.ns).Get(e.ctx, provisioning.LeaseName(e.provName), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the provisioner's Lease: %v", err)
	}
	if diff := cmp.Diff("replica-1", ptr.Deref(lease.Spec.HolderIdentity, "")); diff != "" || !c.IsLeader() {
		t.Errorf("holder of the provisioner's Lease (-want +got):\n%s", diff)
	}
	// b now holds 2Gi in two volumes, c 1Gi in two: c has the most room.
	e.claim("second", class, "2Gi", nil)
	if diff := cmp.Diff("room-c", e.placedOn("second")); diff != "" {
		t.Errorf("node of the second claim (-want +got):\n%s", diff)
	}
}

func testFullBudgetWaits(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	e := newCoordEnv(t, client, "full")
	e.node("full-a", nil)
	e.agent("full-a", v1alpha1.ReasonRunning, true, ptr.To(100*gi))
	class := e.class(storagev1.VolumeBindingImmediate)
	e.volume("full-pv", "full-a", "1Gi", class, nil)
	e.start("replica-1", &v1alpha1.HostPathBackend{Path: "/var/lib/full", Capacity: &v1alpha1.CapacitySpec{MaxVolumes: 1}})

	e.claim("waits", class, "1Gi", nil)
	message := e.waitEvent(e.ns, "waits", EventNoNodeWithRoom)
	if !strings.Contains(message, "maxVolumes 1") {
		t.Errorf("the Event does not say the budget: %q", message)
	}
	if node := e.getClaim("waits").Annotations[provisioning.AnnSelectedNode]; node != "" {
		t.Fatalf("claim placed on %s past the budget", node)
	}
	e.forgetVolume("full-pv")
	if diff := cmp.Diff("full-a", e.placedOn("waits")); diff != "" {
		t.Errorf("node once room freed up (-want +got):\n%s", diff)
	}
}

// testBurstWithinBudget starts the coordinator after a burst of claims
// that the nodes' budgets cannot all take, so that it places them in one
// go: each choice counts the earlier ones, and no node goes past its
// budget.
func testBurstWithinBudget(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	e := newCoordEnv(t, client, "burst")
	nodes := []string{"burst-a", "burst-b"}
	for _, n := range nodes {
		e.node(n, nil)
		e.agent(n, v1alpha1.ReasonRunning, true, ptr.To(100*gi))
	}
	class := e.class(storagev1.VolumeBindingImmediate)
	var claims []string
	for i := range 6 {
		name := fmt.Sprintf("burst-%d", i)
		e.claim(name, class, "1Gi", nil)
		claims = append(claims, name)
	}
	e.start("replica-1", &v1alpha1.HostPathBackend{Path: "/var/lib/burst",
		Capacity: &v1alpha1.CapacitySpec{Storage: ptr.To(resource.MustParse("2Gi"))}})

	perNode := map[string]int{}
	e.eventually("every claim of the burst placed or refused", func() (bool, error) {
		clear(perNode)
		for _, name := range claims {
			if node := e.getClaim(name).Annotations[provisioning.AnnSelectedNode]; node != "" {
				perNode[node]++
			} else if len(e.events(e.ns, name, EventNoNodeWithRoom)) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if diff := cmp.Diff(map[string]int{"burst-a": 2, "burst-b": 2}, perNode); diff != "" {
		t.Errorf("claims placed per node of a 2Gi budget (-want +got):\n%s", diff)
	}
}

// testRacingLeaders runs two coordinators that both lead, as two replicas
// would for a moment if leader election failed: the resourceVersion of the
// placement lets only one of them place each claim.
func testRacingLeaders(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	e := newCoordEnv(t, client, "race")
	for _, n := range []string{"race-a", "race-b", "race-c"} {
		e.node(n, nil)
		e.agent(n, v1alpha1.ReasonRunning, true, nil)
	}
	class := e.class(storagev1.VolumeBindingImmediate)
	spec := &v1alpha1.HostPathBackend{Path: "/var/lib/race"}
	e.start("", spec)
	e.start("", spec)

	const claims = 10
	for i := range claims {
		e.claim(fmt.Sprintf("claim-%d", i), class, "1Gi", nil)
	}
	for i := range claims {
		name := fmt.Sprintf("claim-%d", i)
		e.placedOn(name)
		e.waitEvent(e.ns, name, EventNodeSelected)
	}
	// Both would have told their placement: their recorders differ.
	for i := range claims {
		name := fmt.Sprintf("claim-%d", i)
		if count := eventCount(e.events(e.ns, name, EventNodeSelected)); count != 1 {
			t.Errorf("claim %s placed %d times", name, count)
		}
	}
}

// testAgentExpiry: an Immediate claim placed on a node whose agent stops
// renewing its Lease, which sends no event, is placed again once the Lease
// expires, not at the next retry, 15 minutes later.
func testAgentExpiry(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	e := newCoordEnv(t, client, "expiry")
	e.retry = 15 * time.Minute
	e.node("expiry-a", nil)
	e.node("expiry-b", nil)
	e.agentLease("expiry-a", v1alpha1.ReasonRunning, time.Now(), 4, nil)
	class := e.class(storagev1.VolumeBindingImmediate)
	e.start("replica-1", &v1alpha1.HostPathBackend{Path: "/var/lib/expiry"})
	e.claim("waiting", class, "1Gi", nil)
	if diff := cmp.Diff("expiry-a", e.placedOn("waiting")); diff != "" {
		t.Fatalf("node of the claim (-want +got):\n%s", diff)
	}
	// Its event wakes the coordinator, which leaves the claim where it is:
	// the agent of a still renews, as far as anyone can tell.
	e.agent("expiry-b", v1alpha1.ReasonRunning, true, nil)
	e.eventually("the claim placed again on b", func() (bool, error) {
		return e.getClaim("waiting").Annotations[provisioning.AnnSelectedNode] == "expiry-b", nil
	})
}

// testUnservedNode: a WaitForFirstConsumer claim selected to a node the
// provisioner does not select is sent back to the scheduler, at most
// provisioning.MaxReschedules times, however often the scheduler chooses
// that node again; the removal loses to a write it did not see.
func testUnservedNode(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	e := newCoordEnv(t, client, "unserved")
	e.node("unserved-a", map[string]string{"disk": "local"})
	e.node("unserved-b", map[string]string{"disk": "local"})
	e.node("unserved-x", nil)
	class := e.class(storagev1.VolumeBindingWaitForFirstConsumer)
	e.start("replica-1", &v1alpha1.HostPathBackend{Path: "/var/lib/unserved",
		NodeSelector: &v1alpha1.NodeLabelSelector{MatchLabels: map[string]string{"disk": "local"}}})

	// As the scheduler and the binder would annotate it.
	e.claim("elsewhere", class, "1Gi", map[string]string{provisioning.AnnSelectedNode: "unserved-x", provisioning.AnnStorageProvisioner: e.provName})
	for sent := 1; sent <= provisioning.MaxReschedules; sent++ {
		e.eventually(fmt.Sprintf("the claim sent back to the scheduler %d times", sent), func() (bool, error) {
			claim := e.getClaim("elsewhere")
			_, selected := claim.Annotations[provisioning.AnnSelectedNode]
			return !selected && claim.Annotations[provisioning.AnnReschedules] == strconv.Itoa(sent), nil
		})
		// The scheduler, which does not know the served nodes, chooses the
		// same node again.
		e.selectNode("elsewhere", "unserved-x")
	}
	message := e.waitEvent(e.ns, "elsewhere", EventNodeNotServed)
	for _, want := range []string{"unserved-x", "nodes unserved-a, unserved-b", "scheduler chooses again", "allowedTopologies"} {
		if !strings.Contains(message, want) {
			t.Errorf("the Event does not say %q: %q", want, message)
		}
	}
	message = e.waitEvent(e.ns, "elsewhere", provisioning.EventRescheduleLimit)
	for _, want := range []string{"unserved-x", fmt.Sprintf("%d times", provisioning.MaxReschedules), provisioning.AnnSelectedNode} {
		if !strings.Contains(message, want) {
			t.Errorf("the Event of the bound does not say %q: %q", want, message)
		}
	}
	// The Event comes from a sync that saw the claim as it is now.
	claim := e.getClaim("elsewhere")
	if node := claim.Annotations[provisioning.AnnSelectedNode]; node != "unserved-x" || claim.Annotations[provisioning.AnnReschedules] != strconv.Itoa(provisioning.MaxReschedules) {
		t.Errorf("past the bound the claim is selected to %q, sent back %s times; want it left on unserved-x", node, claim.Annotations[provisioning.AnnReschedules])
	}

	// A removal at a version older than the scheduler's new choice fails
	// and leaves that choice.
	e.claim("raced", class, "1Gi", map[string]string{provisioning.AnnSelectedNode: "unserved-a"})
	stale := e.getClaim("raced")
	e.selectNode("raced", "unserved-b")
	if _, err := provisioning.Reschedule(e.ctx, e.client, stale); !errors.Is(err, provisioning.ErrSelectionChanged) {
		t.Errorf("removal at a stale version: %v, want %v", err, provisioning.ErrSelectionChanged)
	}
	if node := e.getClaim("raced").Annotations[provisioning.AnnSelectedNode]; node != "unserved-b" {
		t.Errorf("the claim is selected to %q after the stale removal, want the scheduler's unserved-b", node)
	}
}

// selectNode selects node for the claim name, as the scheduler does.
func (e *coordEnv) selectNode(name, node string) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, provisioning.AnnSelectedNode, node)
	if _, err := e.client.CoreV1().PersistentVolumeClaims(e.ns).Patch(e.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("cannot select node %s for claim %s: %v", node, name, err)
	}
}

// fakeCoordinator is a coordinator over a fake clientset, without leader
// election, and its informers' factory, not started yet.
func fakeCoordinator(t *testing.T, client kubernetes.Interface, spec *v1alpha1.HostPathBackend) (*Coordinator, informers.SharedInformerFactory) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	m, err := newCoordinatorMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c, err := buildCoordinator("fake", fakeConfig(), spec, coordinatorDeps{
		CoordinatorDeps: CoordinatorDeps{
			Client: client,
			Informers: provisioning.SharedInformers{
				Claims:  factory.Core().V1().PersistentVolumeClaims().Informer(),
				Volumes: factory.Core().V1().PersistentVolumes().Informer(),
				Classes: factory.Storage().V1().StorageClasses().Informer(),
				Nodes:   factory.Core().V1().Nodes().Informer(),
			},
			EventRecorder: record.NewFakeRecorder(100),
		},
		NodeLeases:         factory.Coordination().V1().Leases().Informer(),
		NodeLeaseNamespace: "nodes",
		LeaseClock:         newLeaseClock(),
		Metrics:            m,
	})
	if err != nil {
		t.Fatalf("buildCoordinator: %v", err)
	}
	return c, factory
}

// fakeConfig is the configuration of a fake coordinator: leader election
// off.
func fakeConfig() provisioning.Config {
	cfg := provisioning.DefaultConfig("provfleet.io/fake")
	cfg.LeaderElection.Enabled = false
	return cfg
}

// TestCoordinatorRun proves that a coordinator works once run and that no
// goroutine of its outlives Run.
func TestCoordinatorRun(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	_, ctx := ktesting.NewTestContext(t)
	report, err := json.Marshal(nodeReport{"fake": {Reason: v1alpha1.ReasonRunning}})
	if err != nil {
		t.Fatal(err)
	}
	client := kubefake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}},
		&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "nodes", Name: NodeLeaseName("node-1"), Annotations: map[string]string{AnnNodeReport: string(report)}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent"), LeaseDurationSeconds: ptr.To[int32](600),
				RenewTime: &metav1.MicroTime{Time: time.Now()}},
		},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fake"}, Provisioner: "provfleet.io/fake"},
		&corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim", UID: "uid-1",
				Annotations: map[string]string{provisioning.AnnStorageProvisioner: "provfleet.io/fake"}},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("fake")},
		},
	)
	c, factory := fakeCoordinator(t, client, &v1alpha1.HostPathBackend{Path: "/var/lib/fake"})
	runCtx, cancel := context.WithCancel(ctx)
	factory.Start(runCtx.Done())
	done := make(chan error)
	go func() { done <- c.Run(runCtx) }()
	polltest.Until(ctx, t, "the claim placed", 10*time.Millisecond, coordWait, func(ctx context.Context) (bool, error) {
		claim, err := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
		return err == nil && claim.Annotations[provisioning.AnnSelectedNode] == "node-1", err
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	factory.Shutdown()
	if err := c.Run(ctx); err == nil {
		t.Errorf("a second Run did not fail")
	}
}

func TestCoordinatorReconfigure(t *testing.T) {
	tests := map[string]struct {
		change      func(*provisioning.Config)
		wantRestart bool
	}{
		"paused":              {change: func(c *provisioning.Config) { c.Paused = true }},
		"another name":        {change: func(c *provisioning.Config) { c.AdditionalProvisionerNames = []string{"provfleet.io/old"} }},
		"other retries":       {change: func(c *provisioning.Config) { c.Retry.InitialDelay = time.Second }},
		"another resync":      {change: func(c *provisioning.Config) { c.ResyncPeriod = time.Minute }, wantRestart: true},
		"other leader leases": {change: func(c *provisioning.Config) { c.LeaderElection.LeaseDuration *= 2 }, wantRestart: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c, _ := fakeCoordinator(t, kubefake.NewClientset(), &v1alpha1.HostPathBackend{Path: "/var/lib/fake"})
			cfg := fakeConfig()
			tt.change(&cfg)
			err := c.Reconfigure(cfg)
			if diff := cmp.Diff(tt.wantRestart, errors.Is(err, provisioning.ErrRestartRequired)); diff != "" {
				t.Fatalf("restart required (-want +got):\n%s\nerr: %v", diff, err)
			}
			want := cfg
			if tt.wantRestart {
				want = fakeConfig()
			}
			if diff := cmp.Diff(want, c.config()); diff != "" {
				t.Errorf("config applied (-want +got):\n%s", diff)
			}
		})
	}
}
