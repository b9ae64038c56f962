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
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// events records what subscribers were handed, as "subscriber event object".
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) handler(subscriber string) cache.ResourceEventHandler {
	record := func(event string, obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		name := "?"
		if m, ok := obj.(metav1.Object); ok {
			name = m.GetName()
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.got = append(e.got, subscriber+" "+event+" "+name)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record("add", obj) },
		UpdateFunc: func(_, obj any) { record("update", obj) },
		DeleteFunc: func(obj any) { record("delete", obj) },
	}
}

func (e *events) sorted() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Sorted(slices.Values(e.got))
}

func fixedKeys(keys ...routeKey) func() []routeKey {
	return func() []routeKey { return keys }
}

// A claim goes to the provisioner its storage-provisioner annotation names
// and to those whose intent finalizer it carries, an update to those of the
// old and of the new object, a volume to the provisioner that provisioned
// it, a Lease to the elector of its namespace and name; each subscriber
// hears of an event once.
func TestRouterRoutes(t *testing.T) {
	const a, b, b2 = "provfleet.io/a", "provfleet.io/b", "provfleet.io/b2"
	claim := func(name string, annotations map[string]string, finalizers ...string) *v1.PersistentVolumeClaim {
		return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", Annotations: annotations, Finalizers: finalizers,
		}}
	}
	annotated := func(name, provisioner string, finalizers ...string) *v1.PersistentVolumeClaim {
		return claim(name, map[string]string{annStorageProvisioner: provisioner}, finalizers...)
	}
	lease := func(namespace, name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	}
	tests := map[string]struct {
		route func(*Router) *route
		send  func(cache.ResourceEventHandler)
		want  []string
	}{
		"claim by annotation": {
			route: func(r *Router) *route { return r.claims },
			send:  func(h cache.ResourceEventHandler) { h.OnAdd(annotated("c", a), false) },
			want:  []string{"a add c"},
		},
		"claim of the store replayed to a new handler": {
			route: func(r *Router) *route { return r.claims },
			send:  func(h cache.ResourceEventHandler) { h.OnAdd(annotated("c", a), true) },
		},
		"claim by additional name": {
			route: func(r *Router) *route { return r.claims },
			send:  func(h cache.ResourceEventHandler) { h.OnAdd(annotated("c", b2), false) },
			want:  []string{"b add c"},
		},
		"claim by beta annotation": {
			route: func(r *Router) *route { return r.claims },
			send: func(h cache.ResourceEventHandler) {
				h.OnAdd(claim("c", map[string]string{annBetaStorageProvisioner: b}), false)
			},
			want: []string{"b add c"},
		},
		"claim annotation wins over the beta one": {
			route: func(r *Router) *route { return r.claims },
			send: func(h cache.ResourceEventHandler) {
				h.OnAdd(claim("c", map[string]string{annStorageProvisioner: a, annBetaStorageProvisioner: b}), false)
			},
			want: []string{"a add c"},
		},
		"claim by intent finalizer": {
			route: func(r *Router) *route { return r.claims },
			send: func(h cache.ResourceEventHandler) {
				h.OnAdd(annotated("c", b, "kubernetes.io/pvc-protection", IntentFinalizer(a)), false)
			},
			want: []string{"a add c", "b add c"},
		},
		"claim of another provisioner": {
			route: func(r *Router) *route { return r.claims },
			send:  func(h cache.ResourceEventHandler) { h.OnAdd(annotated("c", "provfleet.io/other"), false) },
		},
		"claim without annotation": {
			route: func(r *Router) *route { return r.claims },
			send:  func(h cache.ResourceEventHandler) { h.OnAdd(claim("c", nil), false) },
		},
		"claim update moving the annotation": {
			route: func(r *Router) *route { return r.claims },
			send:  func(h cache.ResourceEventHandler) { h.OnUpdate(annotated("c", a), annotated("c", b)) },
			want:  []string{"a update c", "b update c"},
		},
		"claim update between names of one provisioner": {
			route: func(r *Router) *route { return r.claims },
			send:  func(h cache.ResourceEventHandler) { h.OnUpdate(annotated("c", b), annotated("c", b2)) },
			want:  []string{"b update c"},
		},
		"claim update dropping the intent finalizer": {
			route: func(r *Router) *route { return r.claims },
			send: func(h cache.ResourceEventHandler) {
				h.OnUpdate(annotated("c", b, IntentFinalizer(a)), annotated("c", b))
			},
			want: []string{"a update c", "b update c"},
		},
		"claim deleted": {
			route: func(r *Router) *route { return r.claims },
			send:  func(h cache.ResourceEventHandler) { h.OnDelete(annotated("c", a)) },
			want:  []string{"a delete c"},
		},
		"claim deleted while the watch was down": {
			route: func(r *Router) *route { return r.claims },
			send: func(h cache.ResourceEventHandler) {
				h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/c", Obj: annotated("c", a)})
			},
			want: []string{"a delete c"},
		},
		"volume by provisioned-by": {
			route: func(r *Router) *route { return r.volumes },
			send: func(h cache.ResourceEventHandler) {
				h.OnAdd(newVolume("v", b2, v1.VolumeBound, v1.PersistentVolumeReclaimDelete), false)
			},
			want: []string{"b add v"},
		},
		"volume not provisioned": {
			route: func(r *Router) *route { return r.volumes },
			send: func(h cache.ResourceEventHandler) {
				h.OnAdd(&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "v"}}, false)
			},
		},
		"volume update": {
			route: func(r *Router) *route { return r.volumes },
			send: func(h cache.ResourceEventHandler) {
				v := newVolume("v", a, v1.VolumeBound, v1.PersistentVolumeReclaimDelete)
				h.OnUpdate(v, v)
			},
			want: []string{"a update v"},
		},
		"Lease by namespace and name": {
			route: func(r *Router) *route { return r.leases },
			send:  func(h cache.ResourceEventHandler) { h.OnUpdate(lease("default", "la"), lease("default", "la")) },
			want:  []string{"a update la"},
		},
		"Lease of another namespace": {
			route: func(r *Router) *route { return r.leases },
			send:  func(h cache.ResourceEventHandler) { h.OnDelete(lease("other", "la")) },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// Informers that never run: the test hands the events to the
			// route's handler itself.
			factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
			router := NewRouter(factory.Core().V1().PersistentVolumeClaims().Informer(),
				factory.Core().V1().PersistentVolumes().Informer(), factory.Coordination().V1().Leases().Informer())
			var got events
			subscribers := map[string]map[*route][]routeKey{
				"a": {
					router.claims:  {provisionerKey(a), finalizerKey(IntentFinalizer(a))},
					router.volumes: {provisionerKey(a)},
					router.leases:  {{namespace: "default", name: "la"}},
				},
				"b": {
					router.claims:  {provisionerKey(b), provisionerKey(b2), finalizerKey(IntentFinalizer(b))},
					router.volumes: {provisionerKey(b), provisionerKey(b2)},
					router.leases:  {{namespace: "default", name: "lb"}},
				},
			}
			for subscriber, routes := range subscribers {
				for r, keys := range routes {
					s := r.subscription(fixedKeys(keys...))
					if err := s.start(got.handler(subscriber)); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() {
						if err := s.stop(); err != nil {
							t.Error(err)
						}
					})
				}
			}
			r := tc.route(router)
			tc.send(r.listener)
			if diff := cmp.Diff(tc.want, got.sorted()); diff != "" {
				t.Errorf("delivered (-want +got):\n%s", diff)
			}
		})
	}
}

// A subscription moves with its keys when they are refreshed, and only while
// it is started.
func TestRouterRefresh(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	r := newRoute(factory.Core().V1().PersistentVolumes().Informer(), volumeKeys)
	var names atomic.Pointer[[]string]
	setNames := func(n ...string) { names.Store(&n) }
	setNames("provfleet.io/a")
	s := r.subscription(func() []routeKey {
		var keys []routeKey
		for _, name := range *names.Load() {
			keys = append(keys, provisionerKey(name))
		}
		return keys
	})
	var got events
	send := func() {
		for _, name := range []string{"provfleet.io/a", "provfleet.io/alias"} {
			r.listener.OnAdd(newVolume(name, name, v1.VolumeBound, v1.PersistentVolumeReclaimDelete), false)
		}
	}

	s.refresh() // not started: no effect
	if err := s.start(got.handler("s")); err != nil {
		t.Fatal(err)
	}
	send()
	setNames("provfleet.io/a", "provfleet.io/alias")
	s.refresh()
	send()
	setNames("provfleet.io/alias")
	s.refresh()
	send()
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	want := []string{"s add provfleet.io/a", "s add provfleet.io/a", "s add provfleet.io/alias", "s add provfleet.io/alias"}
	if diff := cmp.Diff(want, got.sorted()); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	if len(r.subs) != 0 {
		t.Errorf("keys left after the last subscriber stopped: %v", r.subs)
	}
}

// However many subscribe, a route has one handler on its informer, and none
// once the last subscriber stopped.
func TestRouterOneHandlerPerInformer(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	informer := &countingInformer{SharedIndexInformer: factory.Core().V1().PersistentVolumeClaims().Informer()}
	r := newRoute(informer, claimKeys)
	const n = 50
	subs := make([]*subscription, n)
	for i := range subs {
		subs[i] = r.subscription(fixedKeys(provisionerKey(fmt.Sprintf("provfleet.io/p%d", i))))
		if err := subs[i].start(cache.ResourceEventHandlerFuncs{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []int32
	got = append(got, informer.handlers.Load())
	for _, s := range subs[1:] {
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
	}
	got = append(got, informer.handlers.Load())
	if err := subs[0].stop(); err != nil {
		t.Fatal(err)
	}
	got = append(got, informer.handlers.Load())
	if err := subs[0].start(cache.ResourceEventHandlerFuncs{}); err != nil {
		t.Fatal(err)
	}
	got = append(got, informer.handlers.Load())
	if err := subs[0].stop(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int32{1, 1, 0, 1}, got); diff != "" {
		t.Errorf("handlers with %d, 1, 0, then 1 subscriber (-want +got):\n%s", n, diff)
	}
}

// Subscribers come and go while events flow: none is called once its stop
// returned, and those that stay keep receiving.
func TestRouterStopWhileEventsFlow(t *testing.T) {
	const provisioner = "provfleet.io/a"
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	r := newRoute(factory.Core().V1().PersistentVolumeClaims().Informer(), claimKeys)
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	var writer sync.WaitGroup
	defer func() {
		cancel()
		writer.Wait()
		factory.Shutdown()
	}()

	// Claims of the provisioner change all the time.
	writer.Go(func() {
		claims := client.CoreV1().PersistentVolumeClaims("default")
		for i := 0; ctx.Err() == nil; i++ {
			claim := newClaim(fmt.Sprintf("c%d", i%10), "fast", provisioner)
			claim.Labels = map[string]string{"n": strconv.Itoa(i)}
			claim.ResourceVersion = ""
			if i < 10 {
				_, _ = claims.Create(ctx, claim, metav1.CreateOptions{})
			} else {
				_, _ = claims.Update(ctx, claim, metav1.UpdateOptions{})
			}
			time.Sleep(time.Millisecond)
		}
	})

	type counted struct {
		sub     *subscription
		calls   atomic.Int32
		stopped atomic.Bool
		late    atomic.Int32 // calls after stop returned
	}
	subscribe := func() *counted {
		c := &counted{sub: r.subscription(fixedKeys(provisionerKey(provisioner)))}
		count := func() {
			if c.stopped.Load() {
				c.late.Add(1)
			}
			c.calls.Add(1)
		}
		if err := c.sub.start(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { count() },
			UpdateFunc: func(any, any) { count() },
			DeleteFunc: func(any) { count() },
		}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	stop := func(c *counted) {
		if err := c.sub.stop(); err != nil {
			t.Error(err)
		}
		c.stopped.Store(true)
	}

	var all []*counted
	for round := range 20 {
		// Every other round someone stays, so that the handler is kept;
		// otherwise the last subscriber removes it.
		var stays *counted
		if round%2 == 0 {
			stays = subscribe()
			all = append(all, stays)
		}
		c := subscribe()
		all = append(all, c)
		eventually(t, "events", func() bool { return c.calls.Load() > 0 })
		stop(c)
		if stays != nil {
			seen := stays.calls.Load()
			eventually(t, "events for the subscriber that stays", func() bool { return stays.calls.Load() > seen })
			stop(stays)
		}
	}
	// Give late deliveries a chance to show.
	time.Sleep(50 * time.Millisecond)
	for i, c := range all {
		if late := c.late.Load(); late != 0 {
			t.Errorf("subscriber %d called %d times after it stopped", i, late)
		}
	}
	if r.listener != nil {
		t.Error("the handler stays after the last subscriber stopped")
	}
}

// Leases reach their electors through a running informer; a stopped informer
// refuses the subscription.
func TestRouterLeases(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	r := NewRouter(factory.Core().V1().PersistentVolumeClaims().Informer(), factory.Core().V1().PersistentVolumes().Informer(),
		factory.Coordination().V1().Leases().Informer()).leases
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	var got events
	var subs []*subscription
	for _, name := range []string{"a", "b"} {
		s := r.subscription(fixedKeys(routeKey{namespace: "default", name: name}))
		if err := s.start(got.handler(name)); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	leases := client.CoordinationV1().Leases("default")
	for _, name := range []string{"a", "c"} {
		if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := leases.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Lease deleted", func() bool { return len(got.sorted()) == 2 })
	if diff := cmp.Diff([]string{"a add a", "a delete a"}, got.sorted()); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	for _, s := range subs {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
	}

	cancel()
	factory.Shutdown()
	late := NewRouter(factory.Core().V1().PersistentVolumeClaims().Informer(), factory.Core().V1().PersistentVolumes().Informer(),
		factory.Coordination().V1().Leases().Informer()).leases
	if err := late.subscription(fixedKeys()).start(cache.ResourceEventHandlerFuncs{}); err == nil {
		t.Error("subscribing on a stopped informer succeeded")
	}
}

// A controller hears of its claims under the names Reconfigure gives it,
// without a listing of the store.
func TestReconfigureRoutesNewNames(t *testing.T) {
	const alias = "provfleet.io/alias"
	f := newFixture(t)
	f.informers.Router = NewRouter(f.informers.Claims, f.informers.Volumes, f.informers.Leases)
	f.start()
	f.createClass("fast", testProvisioner)
	f.createClass("alias", alias)
	cfg := testConfig(testProvisioner)
	c := f.newController(cfg, newFakeBackend(), &testRecorder{})
	run(t, c)
	eventually(t, "leading", c.IsLeader)

	cfg.AdditionalProvisionerNames = []string{alias}
	if err := c.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	f.createClaim(newClaim("a", "alias", alias))
	eventually(t, "the claim of the new name provisioned", func() bool { return f.volumeExists("pvc-uid-a") })

	cfg.AdditionalProvisionerNames = nil
	if err := c.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	routes := f.informers.Router
	routes.claims.mu.RLock()
	_, claimRouted := routes.claims.subs[provisionerKey(alias)]
	routes.claims.mu.RUnlock()
	routes.volumes.mu.RLock()
	_, volumeRouted := routes.volumes.subs[provisionerKey(alias)]
	routes.volumes.mu.RUnlock()
	if claimRouted || volumeRouted {
		t.Errorf("events of a dropped name still routed: claims %v, volumes %v", claimRouted, volumeRouted)
	}
}

// asyncClock calls AfterFunc functions in their own goroutine, as the real
// clock does, rather than while the fake clock is locked.
type asyncClock struct{ *testingclock.FakeClock }

func (c asyncClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.FakeClock.AfterFunc(d, func() { go f() })
}

// Once the term started, claims are queued by their events and every resync
// period, not otherwise: a claim whose events were missed waits for the
// resync.
func TestResyncQueuesMissedClaims(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)
	cfg := testConfig(testProvisioner)
	cfg.ResyncPeriod = time.Minute
	c := f.newController(cfg, newFakeBackend(), &testRecorder{})
	fakeClock := testingclock.NewFakeClock(time.Now())
	c.clock = asyncClock{fakeClock}
	stop := run(t, c)
	eventually(t, "the resync timer", fakeClock.HasWaiters)

	// Missed events: as if the informer had dropped them.
	if err := c.claimEvents.stop(); err != nil {
		t.Fatal(err)
	}
	f.createClaim(newClaim("a", "fast", testProvisioner))
	eventually(t, "the claim in the informer", func() bool {
		_, exists, _ := f.informers.Claims.GetStore().GetByKey("default/a")
		return exists
	})
	fakeClock.Step(cfg.ResyncPeriod - time.Second)
	time.Sleep(50 * time.Millisecond)
	if f.volumeExists("pvc-uid-a") {
		t.Fatal("the claim was provisioned before the resync")
	}
	fakeClock.Step(time.Second)
	eventually(t, "the claim provisioned at the resync", func() bool { return f.volumeExists("pvc-uid-a") })
	eventually(t, "the next resync timer", fakeClock.HasWaiters)

	stop()
	if fakeClock.HasWaiters() {
		t.Error("the resync timer outlives Run")
	}
}

// Only an update of nothing but the finalizers is no reason to look again.
func TestFinalizersOnlyChanged(t *testing.T) {
	claim := func(mutate func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
		c := newClaim("c", "fast", testProvisioner)
		mutate(c)
		return c
	}
	withFinalizer := func(c *v1.PersistentVolumeClaim) {
		c.Finalizers = append(c.Finalizers, IntentFinalizer(testProvisioner))
		c.ResourceVersion = "2"
	}
	volume := func(mutate func(*v1.PersistentVolume)) *v1.PersistentVolume {
		v := newVolume("v", testProvisioner, v1.VolumeBound, v1.PersistentVolumeReclaimDelete)
		mutate(v)
		return v
	}
	unchanged := func(*v1.PersistentVolumeClaim) {}
	tests := map[string]struct {
		got, want bool
	}{
		"claim finalizer added": {
			got:  claimFinalizersOnlyChanged(claim(unchanged), claim(withFinalizer)),
			want: true,
		},
		"claim finalizer removed, managed fields changed": {
			got: claimFinalizersOnlyChanged(claim(withFinalizer), claim(func(c *v1.PersistentVolumeClaim) {
				c.ResourceVersion = "3"
				c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
			})),
			want: true,
		},
		"claim finalizer and annotation": {
			got: claimFinalizersOnlyChanged(claim(unchanged), claim(func(c *v1.PersistentVolumeClaim) {
				withFinalizer(c)
				c.Annotations[annSelectedNode] = "node"
			})),
		},
		"claim finalizer and spec": {
			got: claimFinalizersOnlyChanged(claim(unchanged), claim(func(c *v1.PersistentVolumeClaim) {
				withFinalizer(c)
				c.Spec.VolumeName = "pv"
			})),
		},
		"claim finalizer and deletion": {
			got: claimFinalizersOnlyChanged(claim(unchanged), claim(func(c *v1.PersistentVolumeClaim) {
				withFinalizer(c)
				c.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			})),
		},
		"claim status only": {
			got: claimFinalizersOnlyChanged(claim(unchanged), claim(func(c *v1.PersistentVolumeClaim) {
				c.ResourceVersion = "2"
				c.Status.Phase = v1.ClaimBound
			})),
		},
		"volume finalizer added": {
			got: volumeFinalizersOnlyChanged(volume(func(*v1.PersistentVolume) {}), volume(func(v *v1.PersistentVolume) {
				v.Finalizers = []string{VolumeFinalizer}
			})),
			want: true,
		},
		"volume finalizer and phase": {
			got: volumeFinalizersOnlyChanged(volume(func(*v1.PersistentVolume) {}), volume(func(v *v1.PersistentVolume) {
				v.Finalizers = []string{VolumeFinalizer}
				v.Status.Phase = v1.VolumeReleased
			})),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("finalizers only changed (-want +got):\n%s", diff)
			}
		})
	}
}
