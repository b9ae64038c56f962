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

// onNode is an object of the tests: a ConfigMap whose label says its node.
func onNode(name, node string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"node": node}}}
}

func keepNode1(obj runtime.Object) bool {
	cm, ok := obj.(*corev1.ConfigMap)
	return ok && cm.Labels["node"] == "node-1"
}

// source is the API behind Only: the pages it serves, the one it serves
// next, and the watches it opened.
type source struct {
	pages   map[string][]corev1.ConfigMap
	serve   string
	watches []*watch.FakeWatcher
}

func (s *source) listWatch() *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: s.pages[s.serve]}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewFake()
			s.watches = append(s.watches, w)
			return w, nil
		},
	}
}

// step is one thing done to Only: a list (its pages, in order: the first
// asked for with no continue token), a watch, or an event on the last watch
// with the event expected out of Only, if any.
type step struct {
	list    []string
	watch   bool
	initial bool
	send    *watch.Event
	want    *watch.Event
}

func event(t watch.EventType, name, node string) *watch.Event {
	return &watch.Event{Type: t, Object: onNode(name, node)}
}

func TestOnly(t *testing.T) {
	pages := map[string][]corev1.ConfigMap{
		"a-and-b": {*onNode("a", "node-1"), *onNode("b", "node-2")},
		"c":       {*onNode("c", "node-1")},
		"b":       {*onNode("b", "node-2")},
	}
	// keptOfPage are the names of each page's objects of node-1.
	keptOfPage := map[string][]string{"a-and-b": {"a"}, "c": {"c"}}
	tests := map[string][]step{
		"objects of the node pass, others are dropped": {
			{watch: true},
			{send: event(watch.Added, "a", "node-1"), want: event(watch.Added, "a", "node-1")},
			{send: event(watch.Added, "b", "node-2")},
			{send: event(watch.Modified, "b", "node-2")},
			{send: event(watch.Deleted, "b", "node-2")},
			{send: event(watch.Deleted, "a", "node-1"), want: event(watch.Deleted, "a", "node-1")},
		},
		"an object leaving the node leaves the cache once": {
			{watch: true},
			{send: event(watch.Added, "a", "node-1"), want: event(watch.Added, "a", "node-1")},
			{send: event(watch.Modified, "a", "node-2"), want: event(watch.Deleted, "a", "node-2")},
			{send: event(watch.Modified, "a", "node-2")},
			{send: event(watch.Deleted, "a", "node-2")},
		},
		"an object coming to the node passes as it comes": {
			{watch: true},
			{send: event(watch.Modified, "b", "node-1"), want: event(watch.Modified, "b", "node-1")},
			{send: event(watch.Modified, "b", "node-2"), want: event(watch.Deleted, "b", "node-2")},
		},
		"a list remembers what it kept": {
			{list: []string{"a-and-b"}},
			{watch: true},
			{send: event(watch.Modified, "a", "node-2"), want: event(watch.Deleted, "a", "node-2")},
		},
		"a list starts afresh": {
			{list: []string{"a-and-b"}},
			{list: []string{"b"}},
			{watch: true},
			{send: event(watch.Modified, "a", "node-2")},
		},
		"the pages of a list add up": {
			{list: []string{"a-and-b", "c"}},
			{watch: true},
			{send: event(watch.Modified, "c", "node-2"), want: event(watch.Deleted, "c", "node-2")},
			{send: event(watch.Modified, "a", "node-2"), want: event(watch.Deleted, "a", "node-2")},
		},
		"a watch of initial events starts afresh": {
			{list: []string{"a-and-b"}},
			{watch: true, initial: true},
			{send: event(watch.Added, "c", "node-1"), want: event(watch.Added, "c", "node-1")},
			{send: event(watch.Modified, "a", "node-2")},
		},
		"a watch that resumes keeps the memory": {
			{list: []string{"a-and-b"}},
			{watch: true},
			{watch: true},
			{send: event(watch.Modified, "a", "node-2"), want: event(watch.Deleted, "a", "node-2")},
		},
		"bookmarks pass": {
			{watch: true},
			{send: event(watch.Bookmark, "", ""), want: event(watch.Bookmark, "", "")},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			src := &source{pages: pages}
			o := Only(src.listWatch(), keepNode1).(*only)
			var w watch.Interface
			for i, s := range steps {
				switch {
				case s.list != nil:
					for j, page := range s.list {
						src.serve = page
						options := metav1.ListOptions{}
						if j > 0 {
							options.Continue = page
						}
						got, err := o.ListWithContext(t.Context(), options)
						if err != nil {
							t.Fatalf("step %d: %v", i, err)
						}
						var names []string
						for _, item := range got.(*corev1.ConfigMapList).Items {
							names = append(names, item.Name)
						}
						if diff := cmp.Diff(keptOfPage[page], names); diff != "" {
							t.Errorf("step %d: page %s kept (-want +got):\n%s", i, page, diff)
						}
					}
				case s.watch:
					if w != nil {
						w.Stop()
					}
					var err error
					w, err = o.WatchWithContext(t.Context(), metav1.ListOptions{SendInitialEvents: &s.initial})
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				default:
					if diff := cmp.Diff(s.want, passes(t, src.watches[len(src.watches)-1], w, *s.send)); diff != "" {
						t.Errorf("step %d: event out (-want +got):\n%s", i, diff)
					}
				}
			}
		})
	}
}

// passes sends e into Only's watch w through its source fake, and returns
// what came out of w, or nil: a bookmark sent after e comes out first
// when e was dropped.
func passes(t *testing.T, fake *watch.FakeWatcher, w watch.Interface, e watch.Event) *watch.Event {
	t.Helper()
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "marker"}}
	go func() {
		fake.Action(e.Type, e.Object)
		fake.Action(watch.Bookmark, marker)
	}()
	var got *watch.Event
	for out := range w.ResultChan() {
		if out.Type == watch.Bookmark && out.Object == marker {
			return got
		}
		if got != nil {
			t.Fatalf("more than one event came out: %v and %v", got.Type, out.Type)
		}
		got = &out
	}
	t.Fatal("the watch ended")
	return nil
}

func TestOnlyStaleWatch(t *testing.T) {
	src := &source{pages: map[string][]corev1.ConfigMap{}}
	o := Only(src.listWatch(), keepNode1).(*only)
	stale, err := o.WatchWithContext(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.ListWithContext(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := passes(t, src.watches[0], stale, *event(watch.Added, "a", "node-1")); got != nil {
		t.Errorf("a watch begun before the list handed on %v", got.Type)
	}
	current, err := o.WatchWithContext(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := passes(t, src.watches[1], current, *event(watch.Modified, "a", "node-2")); got != nil {
		t.Errorf("an object the stale watch saw is remembered: %v came out", got.Type)
	}
}

func TestOnlyStopWithAnEventUnread(t *testing.T) {
	o := Only((&source{}).listWatch(), keepNode1).(*only)
	events := make(chan watch.Event, 1)
	events <- *event(watch.Added, "a", "node-1")
	// The source's watch goes on; its reader stopped and reads no more.
	w := &onlyWatch{inner: watch.NewProxyWatcher(events), result: make(chan watch.Event), done: make(chan struct{})}
	w.Stop()
	ended := make(chan struct{})
	go func() {
		w.run(o, o.epoch, nil)
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("the filter still waits to hand on an event after the watch was stopped")
	}
	if _, open := <-w.ResultChan(); open {
		t.Error("the watch handed on an event after it was stopped")
	}
}

// TestOnlyResumedAfterAnEventUndelivered stops a watch while its event waits
// to be handed on, as the informer does when it restarts a watch, and
// resumes with another watch without a relist: the new watch sends that
// event again, as it starts after the last one delivered, and Only judges it
// as though the first never happened.
func TestOnlyResumedAfterAnEventUndelivered(t *testing.T) {
	tests := map[string]struct {
		// before is handed on before the watch that stops; undelivered is
		// the event that watch does not hand on.
		before      *watch.Event
		undelivered watch.Event
		want        *watch.Event
	}{
		"stopped while switching to another node": {
			before:      event(watch.Added, "a", "node-1"),
			undelivered: *event(watch.Modified, "a", "node-2"),
			want:        event(watch.Deleted, "a", "node-2"),
		},
		"stopped while deleting": {
			before:      event(watch.Added, "a", "node-1"),
			undelivered: *event(watch.Deleted, "a", "node-1"),
			want:        event(watch.Deleted, "a", "node-1"),
		},
		"stopped while adding": {
			undelivered: *event(watch.Added, "a", "node-1"),
			want:        event(watch.Added, "a", "node-1"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := &source{pages: map[string][]corev1.ConfigMap{}}
			o := Only(src.listWatch(), keepNode1).(*only)
			if _, err := o.ListWithContext(t.Context(), metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.before != nil {
				first, err := o.WatchWithContext(t.Context(), metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := passes(t, src.watches[0], first, *tc.before); got == nil {
					t.Fatalf("%v was not handed on", tc.before.Type)
				}
				first.Stop()
			}
			// The informer stopped this watch with the event unread.
			events := make(chan watch.Event, 1)
			events <- tc.undelivered
			stopped := &onlyWatch{inner: watch.NewProxyWatcher(events), result: make(chan watch.Event), done: make(chan struct{})}
			stopped.Stop()
			stopped.run(o, o.epoch, nil)

			resumed, err := o.WatchWithContext(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer resumed.Stop()
			got := passes(t, src.watches[len(src.watches)-1], resumed, tc.undelivered)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("handed on by the resumed watch (-want +got):\n%s", diff)
			}
		})
	}
}
