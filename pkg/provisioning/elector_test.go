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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/provfleet/provfleet/internal/leaderelection"
	"github.com/provfleet/provfleet/internal/polltest"
)

func leaderConfig(identity string) Config {
	cfg := testConfig(testProvisioner)
	cfg.LeaderElection = LeaderElectionConfig{
		Enabled:       true,
		Namespace:     "default",
		Identity:      identity,
		LeaseDuration: 2 * time.Second,
		RenewDeadline: 1500 * time.Millisecond,
		RetryPeriod:   100 * time.Millisecond,
	}
	return cfg
}

func TestTwoReplicasLeaderElection(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)

	var mu sync.Mutex
	var holders []string
	newReplica := func(identity string, backend *fakeBackend) *Controller {
		c, err := New(leaderConfig(identity), Dependencies{
			Client:        f.client,
			Informers:     f.informers,
			EventRecorder: &testRecorder{},
			Provisioner:   backend,
			OnLeaderChange: func(holder string) {
				mu.Lock()
				defer mu.Unlock()
				if identity == "b" {
					holders = append(holders, holder)
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	backendA, backendB := newFakeBackend(), newFakeBackend()
	a := newReplica("a", backendA)
	stopA := startController(t, a)
	polltest.Eventually(t, "a leading", a.IsLeader)
	b := newReplica("b", backendB)
	startController(t, b)

	provision := func(prefix string) []string {
		var pvs []string
		for i := range 5 {
			name := fmt.Sprintf("%s-%d", prefix, i)
			f.createClaim(newClaim(name, "fast", testProvisioner))
			pvs = append(pvs, "pvc-uid-"+name)
		}
		for _, pv := range pvs {
			polltest.Eventually(t, "volume "+pv, func() bool { return f.volumeExists(pv) })
		}
		return pvs
	}
	first := provision("first")
	if b.IsLeader() {
		t.Error("both replicas lead")
	}
	if err := a.LeaseHealthy(); err != nil {
		t.Errorf("leader's lease unhealthy: %v", err)
	}
	if err := b.LeaseHealthy(); err != nil {
		t.Errorf("follower's lease unhealthy: %v", err)
	}

	stopA()
	if a.IsLeader() {
		t.Error("a stopped replica still leads")
	}
	polltest.Eventually(t, "b leading", b.IsLeader)
	second := provision("second")

	for _, pv := range first {
		if got := [2]int{backendA.provisionCount(pv), backendB.provisionCount(pv)}; got != [2]int{1, 0} {
			t.Errorf("%s provisioned by (a, b) = %v, want only by a, once", pv, got)
		}
	}
	for _, pv := range second {
		if got := [2]int{backendA.provisionCount(pv), backendB.provisionCount(pv)}; got != [2]int{0, 1} {
			t.Errorf("%s provisioned by (a, b) = %v, want only by b, once", pv, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(holders) < 2 || holders[0] != "a" || holders[len(holders)-1] != "b" {
		t.Errorf("b saw lease holders %q, want a first and b last", holders)
	}
}

// getLease reads the Lease of testProvisioner.
func getLease(t *testing.T, client *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	lease, err := client.CoordinationV1().Leases("default").Get(context.Background(), LeaseName(testProvisioner), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

func TestLeaseName(t *testing.T) {
	tests := map[string]struct{ name, want string }{
		"with slash":    {name: "provfleet.io/fast-local", want: "provfleet.io-fast-local"},
		"many slashes":  {name: "a/b/c", want: "a-b-c"},
		"without slash": {name: "example", want: "example"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := LeaseName(tc.name); got != tc.want {
				t.Errorf("LeaseName(%q) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}

// A stopped informer refuses handlers; Run must still end with its context.
func TestRunWithStoppedInformers(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	f.factory.Start(ctx.Done())
	f.factory.WaitForCacheSync(ctx.Done())
	cancel()
	f.factory.Shutdown()
	polltest.Eventually(t, "informers stopped", func() bool { return f.informers.Claims.IsStopped() })

	c := f.newController(testConfig(testProvisioner), newFakeBackend(), &testRecorder{})
	stop := startController(t, c)
	polltest.Eventually(t, "running", func() bool { return c.IsLeader() && c.started.Load() })
	stop()
}

// leaseDeliveries records, by Lease name, the resource version of the last
// event of a Lease its handlers returned from: once it is the current one,
// every elector of that Lease has seen the current Lease.
type leaseDeliveries struct {
	cache.SharedIndexInformer
	mu       sync.Mutex
	versions map[string]string
}

func (i *leaseDeliveries) AddEventHandlerWithOptions(handler cache.ResourceEventHandler, options cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			handler.OnAdd(obj, isInInitialList)
			i.delivered(obj)
		},
		UpdateFunc: func(oldObj, newObj any) {
			handler.OnUpdate(oldObj, newObj)
			i.delivered(newObj)
		},
		DeleteFunc: handler.OnDelete,
	}, options)
}

func (i *leaseDeliveries) delivered(obj any) {
	if lease, ok := obj.(*coordinationv1.Lease); ok {
		i.mu.Lock()
		defer i.mu.Unlock()
		i.versions[lease.Name] = lease.ResourceVersion
	}
}

func (i *leaseDeliveries) version(name string) string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.versions[name]
}

// With two replicas, a fleet of idle provisioners costs at most 0.2 API
// requests per provisioner and second at the default lease timings: the
// holders renew, the followers only watch.
func TestLeaseElectorRequestRate(t *testing.T) {
	const (
		provisioners = 10
		window       = 30 * time.Second
	)
	f := newFixture(t)
	f.start()
	second := informers.NewSharedInformerFactory(f.client, 0)
	replicas := map[string]SharedInformers{
		"replica-1": f.informers,
		"replica-2": {
			Claims:  second.Core().V1().PersistentVolumeClaims().Informer(),
			Volumes: second.Core().V1().PersistentVolumes().Informer(),
			Classes: second.Storage().V1().StorageClasses().Informer(),
			Nodes:   second.Core().V1().Nodes().Informer(),
			Leases:  second.Coordination().V1().Leases().Informer(),
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	second.Start(ctx.Done())
	second.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() {
		cancel()
		second.Shutdown()
	})

	fakeClock := testingclock.NewFakeClock(time.Now())
	controllers := map[string][]*Controller{}
	deliveries := map[string]*leaseDeliveries{}
	for replica, shared := range replicas {
		leases := &leaseDeliveries{SharedIndexInformer: shared.Leases, versions: map[string]string{}}
		deliveries[replica], shared.Leases = leases, leases
		shared.Router = NewRouter(shared.Claims, shared.Volumes, shared.Leases)
		for i := range provisioners {
			cfg := testConfig(fmt.Sprintf("provfleet.io/p%d", i))
			cfg.LeaderElection = DefaultConfig("").LeaderElection
			cfg.LeaderElection.Namespace, cfg.LeaderElection.Identity = "default", replica
			c, err := New(cfg, Dependencies{Client: f.client, Informers: shared, Metrics: f.metrics, Provisioner: newFakeBackend()})
			if err != nil {
				t.Fatal(err)
			}
			lec := c.electionConfig(cfg.LeaderElection, ElectedDeps{Client: f.client, Informers: shared, Leader: c})
			lec.Clock = fakeClock
			c.elector = leaderelection.NewLeaderElector(lec)
			controllers[replica] = append(controllers[replica], c)
			startController(t, c)
		}
	}
	// Every elector waits on one timer, the holder to renew, the follower for
	// the lease to expire, and has seen the current Lease: the fake clock
	// must not run ahead of the informers.
	settle := func() {
		polltest.Eventually(t, "electors waiting on the current Leases", func() bool {
			if fakeClock.Waiters() != 2*provisioners {
				return false
			}
			for replica, cs := range controllers {
				for _, c := range cs {
					var want string
					current, err := f.client.Tracker().Get(coordinationv1.SchemeGroupVersion.WithResource("leases"), "default", LeaseName(c.name))
					if err == nil {
						want = current.(*coordinationv1.Lease).ResourceVersion
					}
					if deliveries[replica].version(LeaseName(c.name)) != want {
						return false
					}
				}
			}
			return true
		})
	}
	holders := func() []string {
		var ids []string
		for i := range provisioners {
			leading := 0
			for replica := range replicas {
				if controllers[replica][i].IsLeader() {
					leading++
					ids = append(ids, replica)
				}
			}
			if leading != 1 {
				t.Fatalf("provisioner %d has %d leaders", i, leading)
			}
		}
		return ids
	}
	settle()
	fakeClock.Step(DefaultConfig("").LeaderElection.RetryPeriod)
	settle()
	before := holders()

	f.client.ClearActions()
	for range window / time.Second {
		fakeClock.Step(time.Second)
		settle()
	}
	actions := f.client.Actions()
	if diff := cmp.Diff(before, holders()); diff != "" {
		t.Errorf("leaders changed (-before +after):\n%s", diff)
	}
	requests := map[string]int{}
	for _, action := range actions {
		requests[action.GetVerb()+" "+action.GetResource().Resource]++
	}
	// Renewals at least prove that the window passed for the holders.
	if requests["update leases"] < provisioners {
		t.Errorf("%d renewals of %d Leases in %v", requests["update leases"], provisioners, window)
	}
	if limit := int(0.2 * provisioners * window.Seconds()); len(actions) > limit {
		t.Errorf("%d requests in %v for %d provisioners on two replicas, want at most %d: %v", len(actions), window, provisioners, limit, requests)
	}
}

// A controller started while a cache lists again for a scope that grew
// waits for it before it leads: its volumes may not be in the cache yet.
func TestControllerWaitsForCompleteCaches(t *testing.T) {
	f := newFixture(t)
	f.start()
	var complete atomic.Bool
	inf := f.informers
	inf.Complete = complete.Load
	c, err := New(leaderConfig("a"), Dependencies{Client: f.client, Informers: inf, EventRecorder: &testRecorder{}, Provisioner: newFakeBackend()})
	if err != nil {
		t.Fatal(err)
	}
	startController(t, c)
	// Several retry periods: it would have led by then.
	time.Sleep(500 * time.Millisecond)
	if c.IsLeader() {
		t.Fatal("the controller leads while its caches are not complete")
	}
	if _, err := f.client.CoordinationV1().Leases("default").Get(t.Context(), LeaseName(testProvisioner), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Lease was written while the caches were not complete: %v", err)
	}
	complete.Store(true)
	polltest.Eventually(t, "leading once the caches are complete", c.IsLeader)
}
