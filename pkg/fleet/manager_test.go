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
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/polltest"
	"github.com/provfleet/provfleet/pkg/generated/clientset/versioned/fake"
	"github.com/provfleet/provfleet/pkg/hostpathnodes"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// fixture runs a Manager over fake clientsets, with fake instances whose
// creation it records per provisioner name.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	kube    *kubefake.Clientset
	pcfg    *fake.Clientset
	manager *Manager

	mu        sync.Mutex
	instances map[string][]*fakeController
	restartOn func(before, after provisioning.Config) bool
	leader    bool
}

func newFixture(t *testing.T, opts ...Option) *fixture {
	t.Helper()
	// Registered first, so it runs after the manager stopped.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	_, ctx := ktesting.NewTestContext(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	f := &fixture{t: t, ctx: ctx, kube: kubefake.NewClientset(node), pcfg: fake.NewSimpleClientset(), instances: map[string][]*fakeController{}, leader: true}
	servesAdmissionPolicies(f.kube)
	storeLikeTheAPIServer(f.pcfg)
	m, err := newManager(Settings{Roles: Roles{Manager: true, Node: true}, Namespace: "provfleet-system", Identity: "replica-1", LeaderElection: true,
		HostPathRoot: t.TempDir(), NodeName: "node-1"},
		dependencies{
			client:  f.kube,
			pcfg:    f.pcfg,
			tenants: fixtureTenants{f},
			stop:    func() {},
		}, append(opts, WithBackend(managedDriver, func(context.Context, BackendRequest) (provisioning.Provisioner, error) {
			return newFakeBackend(), nil
		}))...)
	if err != nil {
		t.Fatalf("newManager: %v", err)
	}
	f.manager = m
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- m.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return f
}

// fixtureTenants gives every provisioner the fixture's client and a fake
// instance whose creation the fixture records.
type fixtureTenants struct{ f *fixture }

func (ft fixtureTenants) clientFor(string) (provisioning.Client, error) { return ft.f.kube, nil }

func (ft fixtureTenants) newController(cfg provisioning.Config, deps provisioning.Dependencies) (controller, error) {
	f := ft.f
	if deps.Provisioner == nil || deps.Metrics == nil || deps.Informers.Claims == nil {
		return nil, errors.New("incomplete dependencies")
	}
	inst := newFakeController(cfg)
	f.mu.Lock()
	defer f.mu.Unlock()
	inst.restartOn, inst.leader, inst.onStuck, inst.onHealth = f.restartOn, f.leader, deps.OnStuck, deps.OnHealthChange
	f.instances[cfg.ProvisionerName] = append(f.instances[cfg.ProvisionerName], inst)
	if f.leader {
		deps.OnLeaderChange("replica-1")
	}
	return inst, nil
}

func (f *fixture) started(provisioner string) []*fakeController {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeController(nil), f.instances[provisioner]...)
}

func (f *fixture) create(pc *v1alpha1.ProvisionerConfig) {
	f.t.Helper()
	if _, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Create(f.ctx, pc, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("cannot create %s: %v", pc.Name, err)
	}
}

func (f *fixture) get(name string) *v1alpha1.ProvisionerConfig {
	f.t.Helper()
	pc, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("cannot get %s: %v", name, err)
	}
	return pc
}

func (f *fixture) delete(name string) {
	f.t.Helper()
	if err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
		f.t.Fatalf("cannot delete %s: %v", name, err)
	}
}

// gone reports whether the object no longer exists.
func (f *fixture) gone(name string) bool {
	f.t.Helper()
	_, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatalf("cannot get %s: %v", name, err)
	}
	return apierrors.IsNotFound(err)
}

// edit changes the spec, again at the latest version after a conflict.
func (f *fixture) edit(name string, change func(*v1alpha1.ProvisionerConfig)) {
	f.t.Helper()
	polltest.Until(f.ctx, f.t, "an edit of "+name, 10*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		pc := f.get(name)
		change(pc)
		_, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Update(ctx, pc, metav1.UpdateOptions{})
		return err == nil, err
	})
}

func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	polltest.Until(f.ctx, f.t, what, 10*time.Millisecond, 30*time.Second, func(context.Context) (bool, error) { return cond(), nil })
}

// readyReason returns the Ready reason once the status reports generation.
func (f *fixture) readyReason(name string, generation int64) string {
	pc := f.get(name)
	c := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || pc.Status.ObservedGeneration != generation {
		return ""
	}
	return c.Reason
}

func (f *fixture) warnings(name string) []string {
	events, err := f.kube.CoreV1().Events("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatalf("cannot list events: %v", err)
	}
	var reasons []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Type == corev1.EventTypeWarning {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

func hostPathConfig(name, provisioner string, created int64) *v1alpha1.ProvisionerConfig {
	pc := &v1alpha1.ProvisionerConfig{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1, CreationTimestamp: metav1.Unix(created, 0)}}
	pc.Spec.ProvisionerName = v1alpha1.ProvisionerName(provisioner)
	pc.Spec.Backend.HostPath = &v1alpha1.HostPathBackend{Path: "/"}
	return pc
}

// managedDriver is the custom backend of every fixture: its instances run
// in the manager, which hostPath ones do not.
const managedDriver = "fleet-test"

// managed returns ProvisionerConfig a, of provisioner x.io/a, whose instance
// the manager runs.
func managed() *v1alpha1.ProvisionerConfig {
	pc := hostPathConfig("a", "x.io/a", 1)
	pc.Spec.Backend = v1alpha1.BackendSpec{Custom: &v1alpha1.CustomBackend{Driver: managedDriver}}
	return pc
}

func (f *fixture) hostPath(name, provisioner string, created int64) *v1alpha1.ProvisionerConfig {
	pc := hostPathConfig(name, provisioner, created)
	pc.Spec.Backend.HostPath.Path = v1alpha1.AbsolutePath(f.manager.settings.HostPathRoot + "/" + name)
	return pc
}

func TestManagerStartsRetunesAndStopsInstances(t *testing.T) {
	f := newFixture(t)
	f.create(managed())
	f.eventually("a is Running", func() bool { return f.readyReason("a", 1) == v1alpha1.ReasonRunning })
	if got := f.get("a"); got.Status.Leader != "replica-1" || got.Finalizers[0] != v1alpha1.InstanceCleanupFinalizer {
		t.Errorf("status.leader = %q, finalizers = %v", got.Status.Leader, got.Finalizers)
	}

	f.edit("a", func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Workers = 9 })
	f.eventually("a observes generation 2", func() bool { return f.readyReason("a", 2) == v1alpha1.ReasonRunning })
	instances := f.started("x.io/a")
	if len(instances) != 1 {
		t.Fatalf("a re-tune started %d instances, want the same one", len(instances))
	}
	first := instances[0]
	first.mu.Lock()
	if len(first.reconfigured) != 1 || first.reconfigured[0].Workers != 9 {
		t.Errorf("Reconfigure calls = %+v, want one with 9 workers", first.reconfigured)
	}
	first.mu.Unlock()

	f.mu.Lock()
	f.restartOn = func(before, after provisioning.Config) bool { return before.ResyncPeriod != after.ResyncPeriod }
	first.restartOn = f.restartOn
	f.mu.Unlock()
	f.edit("a", func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.ResyncPeriod = &metav1.Duration{Duration: time.Minute} })
	f.eventually("a restarts", func() bool { return len(f.started("x.io/a")) == 2 && f.readyReason("a", 3) == v1alpha1.ReasonRunning })
	if !isStopped(first) {
		t.Errorf("the first instance still runs after its replacement started")
	}
	second := f.started("x.io/a")[1]
	if second.cfg.ResyncPeriod != time.Minute || second.cfg.Workers != 9 {
		t.Errorf("the replacement runs with %+v", second.cfg)
	}
	first.mu.Lock()
	if !first.handedOver {
		t.Errorf("a restart with the same lease settings released the Lease instead of handing it over")
	}
	first.mu.Unlock()

	f.mu.Lock()
	f.restartOn = func(before, after provisioning.Config) bool { return before.LeaderElection != after.LeaderElection }
	second.restartOn = f.restartOn
	f.mu.Unlock()
	f.edit("a", func(pc *v1alpha1.ProvisionerConfig) {
		pc.Spec.LeaderElection.LeaseDuration = &metav1.Duration{Duration: time.Minute}
	})
	f.eventually("a restarts with new lease settings", func() bool {
		return len(f.started("x.io/a")) == 3 && f.readyReason("a", 4) == v1alpha1.ReasonRunning
	})
	second.mu.Lock()
	if second.handedOver {
		t.Errorf("a restart for new lease settings handed the old Lease over")
	}
	second.mu.Unlock()
	second = f.started("x.io/a")[2]

	f.delete("a")
	f.eventually("a lets go of its finalizer and is gone", func() bool { return f.gone("a") })
	if !isStopped(second) {
		t.Errorf("the finalizer was removed before the instance stopped")
	}
}

func TestManagerNameConflict(t *testing.T) {
	f := newFixture(t)
	f.create(f.hostPath("old", "x.io/shared", 1))
	f.create(f.hostPath("new", "x.io/shared", 2))
	f.eventually("old runs, new conflicts", func() bool {
		return f.readyReason("old", 1) == v1alpha1.ReasonRunning && f.readyReason("new", 1) == v1alpha1.ReasonProvisionerNameConflict
	})
	if got := len(f.started("x.io/shared")); got != 1 {
		t.Fatalf("%d instances started for one provisioner name, want 1", got)
	}
	f.eventually("a Warning Event on new", func() bool {
		return cmp.Equal(f.warnings("new"), []string{v1alpha1.ReasonProvisionerNameConflict})
	})

	f.delete("old")
	f.eventually("new takes over", func() bool { return f.readyReason("new", 1) == v1alpha1.ReasonRunning })
	instances := f.started("x.io/shared")
	if len(instances) != 2 || !isStopped(instances[0]) || isStopped(instances[1]) {
		t.Errorf("after the takeover: %d instances, old stopped %v", len(instances), isStopped(instances[0]))
	}
}

func TestManagerBackendFailuresStayWithTheirObject(t *testing.T) {
	f := newFixture(t,
		WithBackend("panics", func(context.Context, BackendRequest) (provisioning.Provisioner, error) { panic("driver bug") }),
		WithBackend("works", func(_ context.Context, req BackendRequest) (provisioning.Provisioner, error) {
			if req.Spec.Custom.Parameters["size"] != "large" {
				return nil, fmt.Errorf("unexpected parameters %v", req.Spec.Custom.Parameters)
			}
			return newFakeBackend(), nil
		}),
	)
	custom := func(name, driver string) *v1alpha1.ProvisionerConfig {
		pc := hostPathConfig(name, "x.io/"+name, 1)
		pc.Spec.Backend = v1alpha1.BackendSpec{Custom: &v1alpha1.CustomBackend{Driver: driver, Parameters: map[string]string{"size": "large"}}}
		return pc
	}
	outside := hostPathConfig("outside", "x.io/outside", 1)
	outside.Spec.Backend.HostPath.Path = "/etc"
	for _, pc := range []*v1alpha1.ProvisionerConfig{custom("panicking", "panics"), custom("unknown", "missing"), custom("good", "works"), outside} {
		f.create(pc)
	}
	want := map[string]string{
		"panicking": v1alpha1.ReasonBackendUnavailable,
		"unknown":   v1alpha1.ReasonBackendUnavailable,
		"good":      v1alpha1.ReasonRunning,
		// The node agent refuses the path: its only node is not served,
		// for that reason.
		"outside": v1alpha1.ReasonInvalidSpec,
	}
	f.eventually("every object reports its own outcome", func() bool {
		for name, reason := range want {
			if f.readyReason(name, 1) != reason {
				return false
			}
		}
		return true
	})
	f.eventually("the node's refusal of the path reported", func() bool {
		nodes := f.get("outside").Status.Nodes
		return nodes != nil && len(nodes.Unserved) == 1 && nodes.Unserved[0].Reason == v1alpha1.ReasonInvalidSpec &&
			strings.Contains(nodes.Unserved[0].Message, "outside the host path root")
	})
	if got := f.get("good").Status.Backend; got != "custom/works" {
		t.Errorf("status.backend = %q, want custom/works", got)
	}
	for name, reason := range want {
		if reason == v1alpha1.ReasonRunning {
			continue
		}
		// outside may first say that its node's agent has not started yet.
		f.eventually("a Warning Event on "+name, func() bool { return slices.Contains(f.warnings(name), reason) })
	}
}

// closingBackend counts the calls of Close.
type closingBackend struct {
	fakeBackend
	closed atomic.Int32
}

func (b *closingBackend) Close() { b.closed.Add(1) }

// A backend that holds a connection has it released once its instance
// stopped: on a change of spec.backend, which builds a new one, and on
// deletion.
func TestManagerClosesTheBackendsOfStoppedInstances(t *testing.T) {
	var mu sync.Mutex
	var built []*closingBackend
	f := newFixture(t, WithBackend("closing", func(context.Context, BackendRequest) (provisioning.Provisioner, error) {
		mu.Lock()
		defer mu.Unlock()
		b := &closingBackend{}
		built = append(built, b)
		return b, nil
	}))
	closed := func() []int32 {
		mu.Lock()
		defer mu.Unlock()
		var counts []int32
		for _, b := range built {
			counts = append(counts, b.closed.Load())
		}
		return counts
	}
	pc := hostPathConfig("a", "x.io/a", 1)
	pc.Spec.Backend = v1alpha1.BackendSpec{Custom: &v1alpha1.CustomBackend{Driver: "closing", Parameters: map[string]string{"v": "1"}}}
	f.create(pc)
	f.eventually("a is Running", func() bool { return f.readyReason("a", 1) == v1alpha1.ReasonRunning })
	if diff := cmp.Diff([]int32{0}, closed()); diff != "" {
		t.Errorf("Close calls of a running backend (-want +got):\n%s", diff)
	}
	f.edit("a", func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Backend.Custom.Parameters["v"] = "2" })
	f.eventually("a runs its second backend", func() bool { return f.readyReason("a", 2) == v1alpha1.ReasonRunning })
	if diff := cmp.Diff([]int32{1, 0}, closed()); diff != "" {
		t.Errorf("Close calls after a change of backend (-want +got):\n%s", diff)
	}
	f.delete("a")
	f.eventually("a lets go of its finalizer and is gone", func() bool { return f.gone("a") })
	if diff := cmp.Diff([]int32{1, 1}, closed()); diff != "" {
		t.Errorf("Close calls after deletion (-want +got):\n%s", diff)
	}
}

func TestManagerStandbyAndPause(t *testing.T) {
	f := newFixture(t)
	f.mu.Lock()
	f.leader = false
	f.mu.Unlock()
	f.create(managed())
	f.eventually("a stands by", func() bool { return f.readyReason("a", 1) == v1alpha1.ReasonStandby })
	f.edit("a", func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Paused = true })
	f.eventually("a is paused", func() bool { return f.readyReason("a", 2) == v1alpha1.ReasonPaused })
	if instances := f.started("x.io/a"); len(instances) != 1 || !instances[0].cfg.Paused {
		t.Errorf("pausing did not re-tune the running instance")
	}
}

func TestWithBackendRefusesDuplicates(t *testing.T) {
	factory := func(context.Context, BackendRequest) (provisioning.Provisioner, error) { return newFakeBackend(), nil }
	_, err := newManager(Settings{Roles: Roles{Manager: true}}, dependencies{client: kubefake.NewClientset(), pcfg: fake.NewSimpleClientset()},
		WithBackend("x", factory), WithBackend("x", factory))
	if err == nil {
		t.Errorf("registering a driver twice succeeded")
	}
}

// fakeBackend provisions nothing; the fake instances never call it.
type fakeBackend struct{}

func newFakeBackend() *fakeBackend { return &fakeBackend{} }

func (*fakeBackend) Provision(context.Context, provisioning.ProvisionOptions) (*corev1.PersistentVolume, provisioning.ProvisioningState, error) {
	return nil, provisioning.ProvisioningFinished, errors.New("not implemented by the fake")
}

func (*fakeBackend) Delete(context.Context, *corev1.PersistentVolume) error { return nil }

func TestManagerNameConflictTieGoesToTheFirstName(t *testing.T) {
	f := newFixture(t)
	// Created in the same second: the name decides, even against arrival order.
	f.create(f.hostPath("zeta", "x.io/shared", 1))
	f.eventually("zeta runs", func() bool { return f.readyReason("zeta", 1) == v1alpha1.ReasonRunning })
	f.create(f.hostPath("alpha", "x.io/shared", 1))
	f.eventually("alpha takes the name, zeta conflicts", func() bool {
		return f.readyReason("alpha", 1) == v1alpha1.ReasonRunning && f.readyReason("zeta", 1) == v1alpha1.ReasonProvisionerNameConflict
	})
	instances := f.started("x.io/shared")
	if len(instances) != 2 || !isStopped(instances[0]) || isStopped(instances[1]) {
		t.Fatalf("want zeta's instance stopped and alpha's running; got %d instances", len(instances))
	}
}

// TestManagerBackendsShareTheVolumePathIndex: every backend finds the
// volumes of the shared informer through one path index the fleet adds,
// the volumes of another provisioner of the fleet too.
func TestManagerBackendsShareTheVolumePathIndex(t *testing.T) {
	var mu sync.Mutex
	volumes := map[string]Volumes{}
	f := newFixture(t, WithBackend("records", func(_ context.Context, req BackendRequest) (provisioning.Provisioner, error) {
		mu.Lock()
		defer mu.Unlock()
		volumes[req.ProvisionerNames[0]] = req.Volumes
		return newFakeBackend(), nil
	}))
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-a", Annotations: map[string]string{provisioning.AnnDynamicallyProvisioned: "x.io/one"}},
		Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/vols/a"}}},
	}
	if _, err := f.kube.CoreV1().PersistentVolumes().Create(f.ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"one", "two"} {
		pc := hostPathConfig(name, "x.io/"+name, 1)
		pc.Spec.Backend = v1alpha1.BackendSpec{Custom: &v1alpha1.CustomBackend{Driver: "records"}}
		f.create(pc)
	}
	f.eventually("both run", func() bool {
		return f.readyReason("one", 1) == v1alpha1.ReasonRunning && f.readyReason("two", 1) == v1alpha1.ReasonRunning
	})
	mu.Lock()
	defer mu.Unlock()
	for name, v := range volumes {
		f.eventually(name+" finds the volume inside a directory", func() bool {
			found, err := v.Overlapping("", "/srv/vols")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return len(found) == 1 && found[0].Name == pv.Name
		})
	}
	if len(volumes) != 2 {
		t.Errorf("backends built: %d, want 2", len(volumes))
	}
}

// TestManagerRefusesPathPatternsThatClimb checks that a pathPattern whose
// fixed text renders ".." for every claim, which the CRD's rules cannot see,
// makes its ProvisionerConfig Ready=False InvalidSpec instead of Ready with
// every claim refused.
func TestManagerRefusesPathPatternsThatClimb(t *testing.T) {
	f := newFixture(t)
	onHost := hostPathConfig("on-host", "x.io/on-host", 1)
	onHost.Spec.Backend.HostPath.PathPattern = `{{".."}}/{{.PVName}}`
	onNFS := hostPathConfig("on-nfs", "x.io/on-nfs", 1)
	onNFS.Spec.Backend = v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{Server: "nfs.example", Path: "/export", PathPattern: `{{.PVC.Namespace}}/.{{"."}}/x`}}
	f.create(onHost)
	f.create(onNFS)
	for _, name := range []string{"on-host", "on-nfs"} {
		f.eventually(name+" refused for its pathPattern", func() bool {
			c := meta.FindStatusCondition(f.get(name).Status.Conditions, v1alpha1.ConditionReady)
			return f.readyReason(name, 1) == v1alpha1.ReasonInvalidSpec && strings.Contains(c.Message, `renders ".." for every claim`)
		})
	}
}

// servesAdmissionPolicies makes client's discovery that of a 1.37 API
// server, which holds the node agents to their nodes.
func servesAdmissionPolicies(client *kubefake.Clientset) {
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "validatingadmissionpolicies"}}}}
	client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: "37"}
}

// A manager whose API server cannot hold the node agents to their nodes
// tells each hostPath ProvisionerConfig, once.
func TestManagerWarnsUnrestrictedAgents(t *testing.T) {
	f := newFixture(t, func(m *Manager) error {
		m.deps.client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: "29"}
		return nil
	})
	f.create(f.hostPath("local", "x.io/local", 1))
	f.eventually("a Warning Event on the hostPath ProvisionerConfig", func() bool {
		return slices.Contains(f.warnings("local"), hostpathnodes.EventNodeAgentsUnrestricted)
	})
	f.edit("local", func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Workers = 7 })
	f.eventually("the edit seen", func() bool { return f.get("local").Status.ObservedGeneration == 2 })
	count := 0
	for _, reason := range f.warnings("local") {
		if reason == hostpathnodes.EventNodeAgentsUnrestricted {
			count++
		}
	}
	if count != 1 {
		t.Errorf("told %d times, want once", count)
	}
}
