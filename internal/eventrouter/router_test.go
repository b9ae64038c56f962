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

package eventrouter

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/provfleet/provfleet/internal/eventrouter/eventroutertest"
	"github.com/provfleet/provfleet/internal/polltest"
)

// ownerAnnotation names the owner of a test object, the key it is routed by.
const ownerAnnotation = "example.com/owner"

func ownerKeys(obj any, yield func(string)) {
	if m, ok := obj.(metav1.Object); ok {
		if owner := m.GetAnnotations()[ownerAnnotation]; owner != "" {
			yield(owner)
		}
	}
}

func owned(name, owner string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{ownerAnnotation: owner}}}
}

func fixedKeys(keys ...string) func() []string {
	return func() []string { return keys }
}

// A subscription moves with its keys when they are refreshed, and only until
// it is stopped.
func TestRouterRefresh(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	r := New(factory.Core().V1().PersistentVolumes().Informer(), ownerKeys)
	var names atomic.Pointer[[]string]
	setNames := func(n ...string) { names.Store(&n) }
	setNames("a")
	var got eventroutertest.Recorder
	s, err := r.Subscribe(func() []string { return *names.Load() }, got.Handler("s"))
	if err != nil {
		t.Fatal(err)
	}
	send := func() {
		for _, name := range []string{"a", "alias"} {
			r.listener.OnAdd(owned(name, name), false)
		}
	}

	send()
	setNames("a", "alias")
	s.Refresh()
	send()
	setNames("alias")
	s.Refresh()
	send()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	s.Refresh() // stopped: no effect
	want := []string{"s add a", "s add a", "s add alias", "s add alias"}
	if diff := cmp.Diff(want, got.Sorted()); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	if len(r.subs) != 0 {
		t.Errorf("keys left after the last subscriber stopped: %v", r.subs)
	}
}

// Subscribers come and go while events flow: none is called once its stop
// returned, and those that stay keep receiving.
func TestRouterStopWhileEventsFlow(t *testing.T) {
	const owner = "a"
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	r := New(factory.Core().V1().PersistentVolumeClaims().Informer(), ownerKeys)
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	var writer sync.WaitGroup
	defer func() {
		cancel()
		writer.Wait()
		factory.Shutdown()
	}()

	// Objects of the owner change all the time.
	writer.Go(func() {
		claims := client.CoreV1().PersistentVolumeClaims("default")
		for i := 0; ctx.Err() == nil; i++ {
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("c%d", i%10), Namespace: "default",
				Annotations: map[string]string{ownerAnnotation: owner},
				Labels:      map[string]string{"n": strconv.Itoa(i)},
			}}
			if i < 10 {
				_, _ = claims.Create(ctx, claim, metav1.CreateOptions{})
			} else {
				_, _ = claims.Update(ctx, claim, metav1.UpdateOptions{})
			}
			time.Sleep(time.Millisecond)
		}
	})

	type counted struct {
		sub     *Subscription[string]
		calls   atomic.Int32
		stopped atomic.Bool
		late    atomic.Int32 // calls after stop returned
	}
	subscribe := func() *counted {
		c := &counted{}
		count := func() {
			if c.stopped.Load() {
				c.late.Add(1)
			}
			c.calls.Add(1)
		}
		sub, err := r.Subscribe(fixedKeys(owner), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { count() },
			UpdateFunc: func(any, any) { count() },
			DeleteFunc: func(any) { count() },
		})
		if err != nil {
			t.Fatal(err)
		}
		c.sub = sub
		return c
	}
	stop := func(c *counted) {
		if err := c.sub.Stop(); err != nil {
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
		polltest.Eventually(t, "events", func() bool { return c.calls.Load() > 0 })
		stop(c)
		if stays != nil {
			seen := stays.calls.Load()
			polltest.Eventually(t, "events for the subscriber that stays", func() bool { return stays.calls.Load() > seen })
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
