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
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/provfleet/provfleet/internal/eventrouter"
	"github.com/provfleet/provfleet/internal/eventrouter/eventroutertest"
	"github.com/provfleet/provfleet/internal/polltest"
)

// informerName names an informer of a Router.
type informerName string

const (
	claims  informerName = "claims"
	volumes informerName = "volumes"
	leases  informerName = "leases"
)

// capturingInformer keeps the event handler last added to an informer, for
// tests that hand it events themselves.
type capturingInformer struct {
	cache.SharedIndexInformer
	handler cache.ResourceEventHandler
}

func (i *capturingInformer) AddEventHandlerWithOptions(handler cache.ResourceEventHandler, options cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	i.handler = handler
	return i.SharedIndexInformer.AddEventHandlerWithOptions(handler, options)
}

// subscribeRecorder records what r delivers to subscriber under keys in got, until
// the test ends.
func subscribeRecorder[K comparable](t *testing.T, r *eventrouter.Router[K], subscriber string, got *eventroutertest.Recorder, keys ...K) {
	t.Helper()
	s, err := r.Subscribe(func() []K { return keys }, got.Handler(subscriber))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
}

// A claim goes to the provisioner its storage-provisioner annotation names
// and to those whose intent finalizer it carries, an update to those of the
// old and of the new object, a volume to the provisioner that provisioned
// it, a Lease to the elector of its namespace and name; each subscriber
// hears of an event once.
func TestRouterRoutes(t *testing.T) {
	const a, b, b2 = "provfleet.io/a", "provfleet.io/b", "provfleet.io/b2"
	claim := func(name string, annotations map[string]string, finalizers ...string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", Annotations: annotations, Finalizers: finalizers,
		}}
	}
	annotated := func(name, provisioner string, finalizers ...string) *corev1.PersistentVolumeClaim {
		return claim(name, map[string]string{AnnStorageProvisioner: provisioner}, finalizers...)
	}
	lease := func(namespace, name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	}
	tests := map[string]struct {
		route informerName
		send  func(cache.ResourceEventHandler)
		want  []string
	}{
		"claim by annotation": {
			route: claims,
			send:  func(h cache.ResourceEventHandler) { h.OnAdd(annotated("c", a), false) },
			want:  []string{"a add c"},
		},
		"claim of the store replayed to a new handler": {
			route: claims,
			send:  func(h cache.ResourceEventHandler) { h.OnAdd(annotated("c", a), true) },
		},
		"claim by additional name": {
			route: claims,
			send:  func(h cache.ResourceEventHandler) { h.OnAdd(annotated("c", b2), false) },
			want:  []string{"b add c"},
		},
		"claim by beta annotation": {
			route: claims,
			send: func(h cache.ResourceEventHandler) {
				h.OnAdd(claim("c", map[string]string{AnnBetaStorageProvisioner: b}), false)
			},
			want: []string{"b add c"},
		},
		"claim annotation wins over the beta one": {
			route: claims,
			send: func(h cache.ResourceEventHandler) {
				h.OnAdd(claim("c", map[string]string{AnnStorageProvisioner: a, AnnBetaStorageProvisioner: b}), false)
			},
			want: []string{"a add c"},
		},
		"claim by intent finalizer": {
			route: claims,
			send: func(h cache.ResourceEventHandler) {
				h.OnAdd(annotated("c", b, "kubernetes.io/pvc-protection", IntentFinalizer(a)), false)
			},
			want: []string{"a add c", "b add c"},
		},
		"claim of another provisioner": {
			route: claims,
			send:  func(h cache.ResourceEventHandler) { h.OnAdd(annotated("c", "provfleet.io/other"), false) },
		},
		"claim without annotation": {
			route: claims,
			send:  func(h cache.ResourceEventHandler) { h.OnAdd(claim("c", nil), false) },
		},
		"claim update moving the annotation": {
			route: claims,
			send:  func(h cache.ResourceEventHandler) { h.OnUpdate(annotated("c", a), annotated("c", b)) },
			want:  []string{"a update c", "b update c"},
		},
		"claim update between names of one provisioner": {
			route: claims,
			send:  func(h cache.ResourceEventHandler) { h.OnUpdate(annotated("c", b), annotated("c", b2)) },
			want:  []string{"b update c"},
		},
		"claim update dropping the intent finalizer": {
			route: claims,
			send: func(h cache.ResourceEventHandler) {
				h.OnUpdate(annotated("c", b, IntentFinalizer(a)), annotated("c", b))
			},
			want: []string{"a update c", "b update c"},
		},
		"claim deleted": {
			route: claims,
			send:  func(h cache.ResourceEventHandler) { h.OnDelete(annotated("c", a)) },
			want:  []string{"a delete c"},
		},
		"claim deleted while the watch was down": {
			route: claims,
			send: func(h cache.ResourceEventHandler) {
				h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/c", Obj: annotated("c", a)})
			},
			want: []string{"a delete c"},
		},
		"volume by provisioned-by": {
			route: volumes,
			send: func(h cache.ResourceEventHandler) {
				h.OnAdd(newVolume("v", b2, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete), false)
			},
			want: []string{"b add v"},
		},
		"volume not provisioned": {
			route: volumes,
			send: func(h cache.ResourceEventHandler) {
				h.OnAdd(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "v"}}, false)
			},
		},
		"volume update": {
			route: volumes,
			send: func(h cache.ResourceEventHandler) {
				v := newVolume("v", a, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete)
				h.OnUpdate(v, v)
			},
			want: []string{"a update v"},
		},
		"Lease by namespace and name": {
			route: leases,
			send:  func(h cache.ResourceEventHandler) { h.OnUpdate(lease("default", "la"), lease("default", "la")) },
			want:  []string{"a update la"},
		},
		"Lease of another namespace": {
			route: leases,
			send:  func(h cache.ResourceEventHandler) { h.OnDelete(lease("other", "la")) },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// Informers that never run: the test hands the events to the
			// router's handler itself.
			factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
			informers := map[informerName]*capturingInformer{
				claims:  {SharedIndexInformer: factory.Core().V1().PersistentVolumeClaims().Informer()},
				volumes: {SharedIndexInformer: factory.Core().V1().PersistentVolumes().Informer()},
				leases:  {SharedIndexInformer: factory.Coordination().V1().Leases().Informer()},
			}
			router := NewRouter(informers[claims], informers[volumes], informers[leases])
			var got eventroutertest.Recorder
			subscribeRecorder(t, router.claims, "a", &got, provisionerKey(a), finalizerKey(IntentFinalizer(a)))
			subscribeRecorder(t, router.volumes, "a", &got, provisionerKey(a))
			subscribeRecorder(t, router.leases, "a", &got, types.NamespacedName{Namespace: "default", Name: "la"})
			subscribeRecorder(t, router.claims, "b", &got, provisionerKey(b), provisionerKey(b2), finalizerKey(IntentFinalizer(b)))
			subscribeRecorder(t, router.volumes, "b", &got, provisionerKey(b), provisionerKey(b2))
			subscribeRecorder(t, router.leases, "b", &got, types.NamespacedName{Namespace: "default", Name: "lb"})
			tc.send(informers[tc.route].handler)
			if diff := cmp.Diff(tc.want, got.Sorted()); diff != "" {
				t.Errorf("delivered (-want +got):\n%s", diff)
			}
		})
	}
}

// However many subscribe, a router has one handler on its informer, and none
// once the last subscriber stopped.
func TestRouterOneHandlerPerInformer(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	informer := &countingInformer{SharedIndexInformer: factory.Core().V1().PersistentVolumeClaims().Informer()}
	r := NewRouter(informer, factory.Core().V1().PersistentVolumes().Informer(), nil).claims
	subscribeTo := func(name string) *eventrouter.Subscription[routeKey] {
		s, err := r.Subscribe(func() []routeKey { return []routeKey{provisionerKey(name)} }, cache.ResourceEventHandlerFuncs{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const n = 50
	subs := make([]*eventrouter.Subscription[routeKey], n)
	for i := range subs {
		subs[i] = subscribeTo(fmt.Sprintf("provfleet.io/p%d", i))
	}
	var got []int32
	got = append(got, informer.handlers.Load())
	for _, s := range subs[1:] {
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	got = append(got, informer.handlers.Load())
	if err := subs[0].Stop(); err != nil {
		t.Fatal(err)
	}
	got = append(got, informer.handlers.Load())
	subs[0] = subscribeTo("provfleet.io/p0")
	got = append(got, informer.handlers.Load())
	if err := subs[0].Stop(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int32{1, 1, 0, 1}, got); diff != "" {
		t.Errorf("handlers with %d, 1, 0, then 1 subscriber (-want +got):\n%s", n, diff)
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
	startController(t, c)
	polltest.Eventually(t, "leading", c.IsLeader)

	cfg.AdditionalProvisionerNames = []string{alias}
	if err := c.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	f.createClaim(newClaim("a", "alias", alias))
	polltest.Eventually(t, "the claim of the new name provisioned", func() bool { return f.volumeExists("pvc-uid-a") })

	cfg.AdditionalProvisionerNames = nil
	if err := c.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	routes := f.informers.Router
	claimRouted := routes.claims.Subscribed(provisionerKey(alias))
	volumeRouted := routes.volumes.Subscribed(provisionerKey(alias))
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
	stop := startController(t, c)
	polltest.Eventually(t, "the resync timer", fakeClock.HasWaiters)

	// Missed events: as if the informer had dropped them. The claims
	// subscription comes first.
	c.eventsMu.Lock()
	claimEvents := c.events[0]
	c.eventsMu.Unlock()
	if err := claimEvents.Stop(); err != nil {
		t.Fatal(err)
	}
	f.createClaim(newClaim("a", "fast", testProvisioner))
	polltest.Eventually(t, "the claim in the informer", func() bool {
		_, exists, _ := f.informers.Claims.GetStore().GetByKey("default/a")
		return exists
	})
	fakeClock.Step(cfg.ResyncPeriod - time.Second)
	time.Sleep(50 * time.Millisecond)
	if f.volumeExists("pvc-uid-a") {
		t.Fatal("the claim was provisioned before the resync")
	}
	fakeClock.Step(time.Second)
	polltest.Eventually(t, "the claim provisioned at the resync", func() bool { return f.volumeExists("pvc-uid-a") })
	polltest.Eventually(t, "the next resync timer", fakeClock.HasWaiters)

	stop()
	if fakeClock.HasWaiters() {
		t.Error("the resync timer outlives Run")
	}
}

// Only an update of nothing but the finalizers is no reason to look again.
func TestFinalizersOnlyChanged(t *testing.T) {
	claim := func(mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
		c := newClaim("c", "fast", testProvisioner)
		mutate(c)
		return c
	}
	withFinalizer := func(c *corev1.PersistentVolumeClaim) {
		c.Finalizers = append(c.Finalizers, IntentFinalizer(testProvisioner))
		c.ResourceVersion = "2"
	}
	volume := func(mutate func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
		v := newVolume("v", testProvisioner, corev1.VolumeBound, corev1.PersistentVolumeReclaimDelete)
		mutate(v)
		return v
	}
	unchanged := func(*corev1.PersistentVolumeClaim) {}
	tests := map[string]struct {
		got, want bool
	}{
		"claim finalizer added": {
			got:  claimFinalizersOnlyChanged(claim(unchanged), claim(withFinalizer)),
			want: true,
		},
		"claim finalizer removed, managed fields changed": {
			got: claimFinalizersOnlyChanged(claim(withFinalizer), claim(func(c *corev1.PersistentVolumeClaim) {
				c.ResourceVersion = "3"
				c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
			})),
			want: true,
		},
		"claim finalizer and annotation": {
			got: claimFinalizersOnlyChanged(claim(unchanged), claim(func(c *corev1.PersistentVolumeClaim) {
				withFinalizer(c)
				c.Annotations[AnnSelectedNode] = "node"
			})),
		},
		"claim finalizer and spec": {
			got: claimFinalizersOnlyChanged(claim(unchanged), claim(func(c *corev1.PersistentVolumeClaim) {
				withFinalizer(c)
				c.Spec.VolumeName = "pv"
			})),
		},
		"claim finalizer and deletion": {
			got: claimFinalizersOnlyChanged(claim(unchanged), claim(func(c *corev1.PersistentVolumeClaim) {
				withFinalizer(c)
				c.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			})),
		},
		"claim status only": {
			got: claimFinalizersOnlyChanged(claim(unchanged), claim(func(c *corev1.PersistentVolumeClaim) {
				c.ResourceVersion = "2"
				c.Status.Phase = corev1.ClaimBound
			})),
		},
		"volume finalizer added": {
			got: volumeFinalizersOnlyChanged(volume(func(*corev1.PersistentVolume) {}), volume(func(v *corev1.PersistentVolume) {
				v.Finalizers = []string{VolumeFinalizer}
			})),
			want: true,
		},
		"volume finalizer and phase": {
			got: volumeFinalizersOnlyChanged(volume(func(*corev1.PersistentVolume) {}), volume(func(v *corev1.PersistentVolume) {
				v.Finalizers = []string{VolumeFinalizer}
				v.Status.Phase = corev1.VolumeReleased
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
