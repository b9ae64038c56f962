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

// server is an API of ConfigMaps that counts the lists the informer makes
// of it and the watches that start with the initial events.
type server struct {
	mu      sync.Mutex
	objects []*corev1.ConfigMap
	lists   atomic.Int32
	initial atomic.Int32
	// watchList is whether the informer may stream its lists.
	watchList bool
}

func (s *server) current() []*corev1.ConfigMap {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.objects)
}

func (s *server) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	s.lists.Add(1)
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
	for _, o := range s.current() {
		list.Items = append(list.Items, *o.DeepCopy())
	}
	return list, nil
}

func (s *server) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFake()
	if options.SendInitialEvents == nil || !*options.SendInitialEvents {
		return w, nil
	}
	s.initial.Add(1)
	objects := s.current()
	go func() {
		for _, o := range objects {
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
// widens, narrows and changes in a burst, and as an object goes unseen:
// each refresh brings what keep accepts within the watch, with no list.
func TestOnlyChangingInformer(t *testing.T) {
	for name, watchList := range map[string]bool{"no watch list: lists again": false, "watch list": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := &server{objects: []*corev1.ConfigMap{onNode("a", "node-1"), onNode("b", "node-2")}, watchList: watchList}
			var nodes atomic.Pointer[[]string]
			nodes.Store(&[]string{"node-1"})
			lw := OnlyChanging(src, func(obj runtime.Object) bool {
				cm, ok := obj.(*corev1.ConfigMap)
				return ok && slices.Contains(*nodes.Load(), cm.Labels["node"])
			})
			inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
			lw.Feeds(inf.GetStore())
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
			lw.Refresh()
			completeHolds(t, lw, inf, "ns/a", "ns/b")

			nodes.Store(&[]string{"node-2"})
			lw.Refresh()
			completeHolds(t, lw, inf, "ns/b")

			// b goes while nothing tells the informer: the refresh's
			// initial events no longer bring it.
			src.mu.Lock()
			src.objects = src.objects[:1]
			src.mu.Unlock()
			lw.Refresh()
			completeHolds(t, lw, inf)

			start := time.Now()
			before := src.initial.Load() + src.lists.Load()
			for i := range 100 {
				nodes.Store(&[][]string{{"node-1"}, {"node-2"}}[i%2])
				lw.Refresh()
				time.Sleep(10 * time.Millisecond)
			}
			nodes.Store(&[]string{"node-1"})
			lw.Refresh()
			completeHolds(t, lw, inf, "ns/a")
			// A watch lasts minWatch at least before a refresh ends it;
			// without a watch list, the reflector's backoff spaces lists.
			if refreshes, limit := int64(src.initial.Load()+src.lists.Load()-before), int64(2+time.Since(start)/minWatch); refreshes > limit {
				t.Errorf("101 changes of the scope made %d refreshes, want at most %d", refreshes, limit)
			}
			if lists := src.lists.Load(); watchList && lists > 0 {
				t.Errorf("the refreshes made the informer list %d times, want none", lists)
			}
		})
	}
}

// completeHolds waits until Complete reports true for lw and the store of
// inf holds exactly keys (what leaves it may go after Complete, which
// tells only that what is kept came in), and fails t if that does not come.
func completeHolds(t *testing.T, lw *Changing, inf cache.SharedIndexInformer, keys ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		got := inf.GetStore().ListKeys()
		slices.Sort(got)
		return lw.Complete() && slices.Equal(got, keys), nil
	})
	if err != nil {
		holds(t, inf, keys...)
		t.Fatalf("the refresh never completed (Complete: %v)", lw.Complete())
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
