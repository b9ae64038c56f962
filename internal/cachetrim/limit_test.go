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

package cachetrim

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// server is an API of ConfigMaps that counts the full reads the informer
// makes of it: lists, and watches that start with the initial events.
type server struct {
	objects []*corev1.ConfigMap
	reads   atomic.Int32
	// watchList is whether the informer may stream its lists.
	watchList bool
}

func (s *server) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	s.reads.Add(1)
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
	for _, o := range s.objects {
		list.Items = append(list.Items, *o.DeepCopy())
	}
	return list, nil
}

func (s *server) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFake()
	if options.SendInitialEvents == nil || !*options.SendInitialEvents {
		return w, nil
	}
	s.reads.Add(1)
	go func() {
		for _, o := range s.objects {
			w.Add(o.DeepCopy())
		}
		w.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: "7", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		}})
	}()
	return w, nil
}

func (s *server) List(options metav1.ListOptions) (runtime.Object, error) {
	return s.ListWithContext(context.Background(), options)
}

func (s *server) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return s.WatchWithContext(context.Background(), options)
}

func (s *server) IsWatchListSemanticsUnSupported() bool { return !s.watchList }

// TestOnlyChangingInformer runs an informer over OnlyChanging as its keep
// widens, narrows and changes in a burst.
func TestOnlyChangingInformer(t *testing.T) {
	for name, watchList := range map[string]bool{"list": false, "watch list": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := &server{objects: []*corev1.ConfigMap{onNode("a", "node-1"), onNode("b", "node-2")}, watchList: watchList}
			var nodes atomic.Pointer[[]string]
			nodes.Store(&[]string{"node-1"})
			lw, relist := OnlyChanging(src, func(obj runtime.Object) bool {
				cm, ok := obj.(*corev1.ConfigMap)
				return ok && slices.Contains(*nodes.Load(), cm.Labels["node"])
			})
			inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
			ctx, cancel := context.WithCancel(t.Context())
			var ran sync.WaitGroup
			ran.Go(func() { inf.RunWithContext(ctx) })
			defer ran.Wait()
			defer cancel()
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatal("the informer did not sync")
			}
			holds(t, inf, "ns/a")

			nodes.Store(&[]string{"node-1", "node-2"})
			relist()
			eventually(t, inf, "ns/a", "ns/b")

			nodes.Store(&[]string{"node-2"})
			relist()
			eventually(t, inf, "ns/b")

			before := src.reads.Load()
			for i := range 100 {
				nodes.Store(&[][]string{{"node-1"}, {"node-2"}}[i%2])
				relist()
				time.Sleep(20 * time.Millisecond)
			}
			nodes.Store(&[]string{"node-1"})
			relist()
			eventually(t, inf, "ns/a")
			// The reflector's backoff after the two relists above is
			// at least 3.2s, longer than the burst.
			if reads := src.reads.Load() - before; reads > 3 {
				t.Errorf("101 changes of the scope made %d full reads, want at most 3", reads)
			}
		})
	}
}

// holds fails t unless the store of inf holds exactly keys.
func holds(t *testing.T, inf cache.SharedIndexInformer, keys ...string) {
	t.Helper()
	got := inf.GetStore().ListKeys()
	slices.Sort(got)
	if diff := cmp.Diff(keys, got); diff != "" {
		t.Errorf("cached keys (-want +got):\n%s", diff)
	}
}

// eventually waits until the store of inf holds exactly keys, and fails t
// if it does not soon.
func eventually(t *testing.T, inf cache.SharedIndexInformer, keys ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		got := inf.GetStore().ListKeys()
		slices.Sort(got)
		return slices.Equal(got, keys), nil
	})
	if err != nil {
		holds(t, inf, keys...)
		t.Fatal("the cache did not come to hold what it should")
	}
}
