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
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/polltest"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
	"github.com/provfleet/provfleet/pkg/generated/clientset/versioned"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

const (
	// waitTimeout bounds every wait for the control plane or the manager.
	waitTimeout = 2 * time.Minute
	// Short Leases make failover quick.
	leaseDuration, renewDeadline, retryPeriod = 4 * time.Second, 3 * time.Second, time.Second
)

// managerBinary is built once per test binary.
var managerBinary string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runTests(m))
}

// runTests builds the manager, runs the tests and removes the build, which a
// deferred call in TestMain itself would not, as os.Exit skips it.
func runTests(m *testing.M) int {
	if !testing.Short() {
		dir, err := os.MkdirTemp("", "provfleet-manager-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		root, err := testenv.RepoRoot()
		if err == nil {
			managerBinary, err = managerproc.Build(context.Background(), root, dir)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return testenv.RunMain(m, testenv.Options{PVClaimBinderSyncPeriod: 2 * time.Second})
}

// kubeconfig is a kubeconfig file of one ServiceAccount, written once per
// test binary.
type kubeconfig struct {
	name   string
	config func(e *testenv.Environment, ctx context.Context, root string) (*rest.Config, error)

	once sync.Once
	path string
	err  error
}

// The ServiceAccount examples/deploy creates for the manager, so that it runs
// with exactly the RBAC the project ships.
var managerAccount = &kubeconfig{name: "manager", config: func(e *testenv.Environment, ctx context.Context, root string) (*rest.Config, error) {
	return e.ManagerServiceAccountConfig(ctx, root)
}}

// agentAccounts are, by node, the kubeconfigs of the node agents'
// ServiceAccount with a token bound to a Pod on the node, as the DaemonSet's
// agents get them: examples/deploy's RBAC and node restriction policies hold
// each to its own node.
var agentAccounts sync.Map

// agentKubeconfig returns the path of the kubeconfig of the node agent of
// node.
func agentKubeconfig(t *testing.T, node string) string {
	t.Helper()
	k, _ := agentAccounts.LoadOrStore(node, &kubeconfig{name: "agent-" + node, config: func(e *testenv.Environment, ctx context.Context, root string) (*rest.Config, error) {
		return e.NodeAgentPodConfig(ctx, root, node)
	}})
	return k.(*kubeconfig).file(t)
}

// file returns the path of the kubeconfig, writing it the first time.
func (k *kubeconfig) file(t *testing.T) string {
	t.Helper()
	env := testenv.Env(t)
	k.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		root, err := testenv.RepoRoot()
		if err != nil {
			k.err = err
			return
		}
		config, err := k.config(env, ctx, root)
		if err != nil {
			k.err = err
			return
		}
		dir, err := os.MkdirTemp("", "provfleet-kubeconfig-")
		if err != nil {
			k.err = err
			return
		}
		k.path = filepath.Join(dir, k.name+".kubeconfig")
		k.err = testenv.WriteKubeconfig(k.path, config)
	})
	if k.err != nil {
		t.Fatal(k.err)
	}
	return k.path
}

// managerKubeconfig is the kubeconfig of the manager's ServiceAccount.
func managerKubeconfig(t *testing.T) string {
	t.Helper()
	return managerAccount.file(t)
}

// fixture is one test's view of the cluster: admin clients, a namespace for
// its claims and a folder for its volumes.
type fixture struct {
	t         *testing.T
	ctx       context.Context
	kube      kubernetes.Interface
	pcfg      versioned.Interface
	namespace string
	root      string
	prefix    string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := testenv.Env(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kube, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	pcfg, err := versioned.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(prefix) > 30 {
		prefix = prefix[len(prefix)-30:]
	}
	prefix = strings.Trim(prefix, "-")
	f := &fixture{t: t, ctx: ctx, kube: kube, pcfg: pcfg, namespace: prefix, root: t.TempDir(), prefix: prefix}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), prefix, metav1.DeleteOptions{})
	})
	return f
}

// nodeLeaseDuration is the node agents' Lease: a killed agent's node is
// served again this long after.
const nodeLeaseDuration = "--node-lease-duration=4s"

// replicaLease are the timings of the managers' membership Leases, those of
// the provisioners' Leases: a killed manager's share moves this long after.
var replicaLease = []string{"--replica-lease-duration=4s", "--replica-renew-deadline=3s", "--replica-retry-period=1s"}

// startManager runs a manager process in both roles, the manager's and the
// node agent's of node-<identity>, whose Node it creates, as one-process
// setups do, until the test ends; then it checks that SIGTERM makes it exit
// 0 within 10 seconds.
func (f *fixture) startManager(identity string, args ...string) *managerproc.Process {
	f.t.Helper()
	return f.startManagerBinary(managerBinary, identity, args...)
}

// startManagerBinary is startManager running binary, which may be a wrapper
// that executes the manager with fewer privileges.
func (f *fixture) startManagerBinary(binary, identity string, args ...string) *managerproc.Process {
	f.t.Helper()
	node := "node-" + identity
	f.node(node, nil)
	return f.start(identity, managerproc.Options{
		Binary:       binary,
		Kubeconfig:   managerKubeconfig(f.t),
		Namespace:    testenv.ManagerNamespace,
		HostPathRoot: f.root,
		NodeName:     node,
		Args:         append(append([]string{"--role=manager,node", nodeLeaseDuration}, replicaLease...), args...),
	})
}

// startManagerRole runs a manager process in the manager's role only, as the
// Deployment does.
func (f *fixture) startManagerRole(identity string, args ...string) *managerproc.Process {
	f.t.Helper()
	return f.start(identity, managerproc.Options{
		Binary:     managerBinary,
		Kubeconfig: managerKubeconfig(f.t),
		Namespace:  testenv.ManagerNamespace,
		Args:       append(append([]string{"--role=manager", "--node-lease-namespace=" + testenv.NodeAgentNamespace}, replicaLease...), args...),
	})
}

// startAgent runs the node agent of node, whose disk is the folder root, as
// the DaemonSet does: under its own ServiceAccount, in its own namespace.
func (f *fixture) startAgent(identity, node, root string) *managerproc.Process {
	f.t.Helper()
	return f.start(identity, managerproc.Options{
		Binary:       managerBinary,
		Kubeconfig:   agentKubeconfig(f.t, node),
		Namespace:    testenv.NodeAgentNamespace,
		HostPathRoot: root,
		NodeName:     node,
		Args:         []string{"--role=node", nodeLeaseDuration},
	})
}

// node creates a Node named name, with its host name label and labels, and
// deletes it when the test ends.
func (f *fixture) node(name string, labels map[string]string) {
	f.t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	maps.Copy(node.Labels, labels)
	if _, err := f.kube.CoreV1().Nodes().Create(f.ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatalf("cannot create Node %s: %v", name, err)
	}
	f.t.Cleanup(func() { _ = f.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// start runs a manager process with opts, named identity, until the test
// ends, then checks that SIGTERM makes it exit 0 within 10 seconds.
func (f *fixture) start(identity string, opts managerproc.Options) *managerproc.Process {
	f.t.Helper()
	log, err := os.Create(filepath.Join(f.t.TempDir(), identity+".log"))
	if err != nil {
		f.t.Fatal(err)
	}
	opts.Identity, opts.Output = identity, log
	if opts.HostPathRoot == "" {
		opts.HostPathRoot = f.root
	}
	opts.Args = append([]string{"-v=2"}, opts.Args...)
	p, err := managerproc.Start(opts)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		if exited, _ := p.Exited(); !exited {
			if err := p.Terminate(10 * time.Second); err != nil {
				f.t.Errorf("manager %s on SIGTERM: %v", identity, err)
			}
		}
		if f.t.Failed() {
			data, _ := os.ReadFile(log.Name())
			f.t.Logf("log of manager %s:\n%s", identity, tailLines(string(data), 80))
		}
		_ = log.Close()
	})
	if err := p.WaitReady(f.ctx, waitTimeout); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func tailLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// provisioner creates a hostPath ProvisionerConfig named name, its
// StorageClass of the same name, and deletes both when the test ends (while
// the manager still runs, so its finalizer goes).
func (f *fixture) provisioner(name string, mutate ...func(*v1alpha1.ProvisionerConfig)) *v1alpha1.ProvisionerConfig {
	f.t.Helper()
	pc := &v1alpha1.ProvisionerConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
	pc.Spec.ProvisionerName = v1alpha1.ProvisionerName("e2e.provfleet.io/" + name)
	pc.Spec.Workers = 2
	pc.Spec.LeaderElection = v1alpha1.LeaderElectionSpec{
		LeaseDuration: &metav1.Duration{Duration: leaseDuration},
		RenewDeadline: &metav1.Duration{Duration: renewDeadline},
		RetryPeriod:   &metav1.Duration{Duration: retryPeriod},
	}
	pc.Spec.Backend.HostPath = &v1alpha1.HostPathBackend{
		Path:       v1alpha1.AbsolutePath(filepath.Join(f.root, name)),
		VolumeType: v1alpha1.HostPathVolumeHostPath,
	}
	for _, m := range mutate {
		m(pc)
	}
	created, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Create(f.ctx, pc, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("cannot create ProvisionerConfig %s: %v", name, err)
	}
	f.t.Cleanup(func() { f.deleteConfig(name) })
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       string(pc.Spec.ProvisionerName),
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if _, err := f.kube.StorageV1().StorageClasses().Create(f.ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatalf("cannot create StorageClass %s: %v", name, err)
	}
	f.t.Cleanup(func() {
		_ = f.kube.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return created
}

// deleteConfig deletes a ProvisionerConfig and waits until it is gone; a
// finalizer no manager removes is stripped so later tests start clean.
func (f *fixture) deleteConfig(name string) {
	ctx := context.Background()
	client := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs()
	if err := client.Delete(ctx, name, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err == nil {
		return
	}
	f.t.Errorf("ProvisionerConfig %s still exists 30s after its deletion", name)
	if pc, err := client.Get(ctx, name, metav1.GetOptions{}); err == nil {
		pc.Finalizers = nil
		_, _ = client.Update(ctx, pc, metav1.UpdateOptions{})
	}
}

func (f *fixture) claim(name, class string) {
	f.t.Helper()
	f.claimOn(name, class, "")
}

// claimOn creates a claim of class, its volume selected to node as the
// scheduler selects a WaitForFirstConsumer claim's when node is set.
func (f *fixture) claimOn(name, class, node string) {
	f.t.Helper()
	claim := f.newClaim(name, class)
	if node != "" {
		claim.Annotations = map[string]string{"volume.kubernetes.io/selected-node": node}
	}
	if _, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Create(f.ctx, claim, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("cannot create claim %s: %v", name, err)
	}
}

// newClaim returns a claim of 1Mi of class in the test's namespace.
func (f *fixture) newClaim(name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			},
		},
	}
}

// eventually polls cond until it holds, failing the test after waitTimeout.
func (f *fixture) eventually(what string, cond func(ctx context.Context) (bool, error)) {
	f.t.Helper()
	polltest.Until(f.ctx, f.t, what, 200*time.Millisecond, waitTimeout, cond)
}

// waitBound waits until every named claim is Bound. It lists the namespace's
// claims once a poll, however many are named.
func (f *fixture) waitBound(names ...string) {
	f.t.Helper()
	f.eventually(fmt.Sprintf("%d claims bound", len(names)), func(ctx context.Context) (bool, error) {
		claims, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound := map[string]bool{}
		for _, c := range claims.Items {
			bound[c.Name] = c.Status.Phase == corev1.ClaimBound
		}
		var waiting []string
		for _, name := range names {
			if !bound[name] {
				waiting = append(waiting, name)
			}
		}
		if len(waiting) > 0 {
			return false, fmt.Errorf("not bound: %v", waiting)
		}
		return true, nil
	})
}

// waitGone waits until the PV pvName is deleted.
func (f *fixture) waitGone(pvName string) {
	f.t.Helper()
	f.eventually("PV "+pvName+" deleted", func(ctx context.Context) (bool, error) {
		_, err := f.kube.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// volumesOf returns, per claim of the test's namespace, the PVs whose claimRef
// names it, and the provisioner that made each.
func (f *fixture) volumesOf() map[string][]string {
	f.t.Helper()
	pvs, err := f.kube.CoreV1().PersistentVolumes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == f.namespace {
			out[ref.Name] = append(out[ref.Name], pv.Annotations["pv.kubernetes.io/provisioned-by"])
		}
	}
	return out
}

func (f *fixture) config(name string) *v1alpha1.ProvisionerConfig {
	f.t.Helper()
	pc, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return pc
}

// waitReady waits until the status of name reports its current generation,
// at least minGeneration, with the given Ready reason, and returns the object.
func (f *fixture) waitReady(name string, minGeneration int64, reason string) *v1alpha1.ProvisionerConfig {
	f.t.Helper()
	var pc *v1alpha1.ProvisionerConfig
	f.eventually(fmt.Sprintf("ProvisionerConfig %s Ready reason %s from generation %d on", name, reason, minGeneration), func(ctx context.Context) (bool, error) {
		var err error
		pc, err = f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == reason && pc.Generation >= minGeneration && pc.Status.ObservedGeneration == pc.Generation, nil
	})
	return pc
}

// lease returns a provisioner's Lease; an empty one when there is none.
func (f *fixture) lease(provisionerName string) *coordinationv1.Lease {
	f.t.Helper()
	lease, err := f.kube.CoordinationV1().Leases(testenv.ManagerNamespace).Get(f.ctx, provisioning.LeaseName(provisionerName), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &coordinationv1.Lease{}
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return lease
}

// leaseHolder returns the holder of a provisioner's Lease, "" when released
// or missing.
func (f *fixture) leaseHolder(provisionerName string) string {
	f.t.Helper()
	return ptr.Deref(f.lease(provisionerName).Spec.HolderIdentity, "")
}

// waitEvent waits for an Event of type typ and reason about the object name
// in namespace whose message holds every part, and returns that message.
func (f *fixture) waitEvent(namespace, name, typ, reason string, parts ...string) string {
	f.t.Helper()
	var found string
	seen := map[string]bool{}
	what := fmt.Sprintf("a %s %s Event on %s holding %q", typ, reason, name, parts)
	polltest.Until(f.ctx, f.t, what, 200*time.Millisecond, waitTimeout, func(ctx context.Context) (bool, error) {
		events, err := f.kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name != name || e.Reason != reason || e.Type != typ {
				continue
			}
			seen[e.Message] = true
			if containsAll(e.Message, parts) {
				found = e.Message
				return true, nil
			}
		}
		return false, fmt.Errorf("its %s Events: %q", reason, slices.Sorted(maps.Keys(seen)))
	})
	return found
}

func containsAll(s string, parts []string) bool {
	return !slices.ContainsFunc(parts, func(part string) bool { return !strings.Contains(s, part) })
}
