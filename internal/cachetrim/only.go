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
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// Only returns lw limited to the objects keep accepts, so that an informer
// fed by it never holds the others: the cache of a node agent then grows
// with its node's claims and volumes, not with the cluster's. The API cannot
// filter on an annotation, so the objects still come over the wire; each is
// dropped as soon as it is decoded.
//
// An object that keep accepted and no longer accepts (a claim selected to
// another node) is handed on as deleted, so the cache never keeps a version
// that is no longer true. For that Only remembers the keys of the objects it
// handed on and not yet deleted, each once the informer took its event (a
// watch stopped before may be resumed without a relist, and then sends the
// event again); a list, or a watch that starts with the
// initial events, begins that memory afresh, as the informer replaces its
// whole cache with what they bring.
//
// The informer calls the context-aware methods; List and Watch exist for
// the type that informer constructors take.
func Only(lw cache.ListerWatcher, keep func(runtime.Object) bool) cache.ListerWatcher {
	return newOnly(lw, keep)
}

// OnlyChanging is Only for a keep whose answers change, and returns with lw
// the function to call once they may have: the informer fed by lw then
// lists again, so that the objects keep accepts now and dropped before come
// in, and those it no longer accepts go. For that the watch under way, or
// the next one if none is, ends with a resource-expired error, after which
// the informer's reflector lists (with WatchList, watches from the initial
// events) again, after its backoff. Calls before that list add none: a
// burst of changes costs one list, and the reflector's backoff spaces the
// lists of bursts that follow each other.
//
// keep is asked afresh for every event, so an object that keep starts to
// accept comes in with its next event even before the list.
func OnlyChanging(lw cache.ListerWatcher, keep func(runtime.Object) bool) (cache.ListerWatcher, func()) {
	o := newOnly(lw, keep)
	return o, o.relist
}

func newOnly(lw cache.ListerWatcher, keep func(runtime.Object) bool) *only {
	return &only{
		lw:                   cache.ToListerWatcherWithContext(lw),
		keep:                 keep,
		watchListUnsupported: watchlist.DoesClientNotSupportWatchListSemantics(lw),
		kept:                 map[string]struct{}{},
		expired:              make(chan struct{}),
	}
}

type only struct {
	lw                   cache.ListerWatcherWithContext
	keep                 func(runtime.Object) bool
	watchListUnsupported bool

	mu sync.Mutex
	// kept are the keys of the objects handed on and not deleted since.
	kept map[string]struct{}
	// epoch counts the fresh starts: a watch of an earlier one, stopped but
	// still draining, no longer changes kept.
	epoch uint64
	// stale is set once keep changed since the last fresh start; expired
	// is closed then, which ends the watches.
	stale   bool
	expired chan struct{}
}

// IsWatchListSemanticsUnSupported tells the reflector what lw tells it.
func (o *only) IsWatchListSemanticsUnSupported() bool {
	return o.watchListUnsupported
}

func (o *only) List(options metav1.ListOptions) (runtime.Object, error) {
	return o.ListWithContext(context.Background(), options)
}

func (o *only) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return o.WatchWithContext(context.Background(), options)
}

func (o *only) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	list, err := o.lw.ListWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractListWithAlloc(list)
	if err != nil {
		return nil, fmt.Errorf("cannot read the items of a list: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// Further pages of a paged list add to its first one.
	if options.Continue == "" {
		o.restart()
	}
	kept := items[:0]
	for _, item := range items {
		if o.keep(item) {
			kept = append(kept, item)
			o.kept[keyOf(item)] = struct{}{}
		}
	}
	if err := meta.SetList(list, kept); err != nil {
		return nil, fmt.Errorf("cannot filter the items of a list: %w", err)
	}
	return list, nil
}

func (o *only) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	w, err := o.lw.WatchWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if options.SendInitialEvents != nil && *options.SendInitialEvents {
		o.restart()
	}
	fw := &onlyWatch{inner: w, result: make(chan watch.Event), done: make(chan struct{})}
	go fw.run(o, o.epoch, o.expired)
	return fw, nil
}

// onlyWatch hands on the events of inner that Only keeps. Unlike
// watch.Filter it stops sending once stopped, as its reader may be gone.
type onlyWatch struct {
	inner    watch.Interface
	result   chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
}

func (w *onlyWatch) ResultChan() <-chan watch.Event { return w.result }

func (w *onlyWatch) Stop() {
	w.stopOnce.Do(func() { close(w.done) })
	w.inner.Stop()
}

// run filters the events of inner until it ends, w is stopped or expired
// is closed: then it ends w with a resource-expired error, which has the
// reflector list again.
func (w *onlyWatch) run(o *only, epoch uint64, expired <-chan struct{}) {
	defer close(w.result)
	for {
		select {
		case e, open := <-w.inner.ResultChan():
			if !open || !o.handOn(w, epoch, e) {
				return
			}
		case <-expired:
			w.inner.Stop()
			status := apierrors.NewResourceExpired("the scope of the cache changed: list again").Status()
			select {
			case w.result <- watch.Event{Type: watch.Error, Object: &status}:
			case <-w.done:
			}
			return
		}
	}
}

// handOn hands on to w's reader what becomes of e, an event of the watch
// started in epoch, and only once the reader took it records what was
// handed on: an event dropped as its watch stops is sent again by the
// watch that resumes from the last one delivered, and must then be judged
// as the first time. It reports false once w is stopped.
//
// mu is held while the reader takes the event, so that no other watch
// judges the same object in between. The informer's reflector makes every
// other call that takes mu (a list, a new watch) only after it stopped w,
// which ends the wait.
func (o *only) handOn(w *onlyWatch, epoch uint64, e watch.Event) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	out, kept, pass := o.filter(epoch, e)
	if !pass {
		return true
	}
	select {
	case w.result <- out:
	case <-w.done:
		return false
	}
	switch {
	case out.Type != watch.Added && out.Type != watch.Modified && out.Type != watch.Deleted:
	case kept:
		o.kept[keyOf(out.Object)] = struct{}{}
	default:
		delete(o.kept, keyOf(out.Object))
	}
	return true
}

// restart forgets every key, at the start of what replaces the whole cache,
// which keep as it is now judges.
func (o *only) restart() {
	o.epoch++
	clear(o.kept)
	if o.stale {
		o.stale = false
		o.expired = make(chan struct{})
	}
}

// relist ends the watches, the current one and those that start before
// the next fresh start, so that the reflector lists again.
func (o *only) relist() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.stale {
		o.stale = true
		close(o.expired)
	}
}

// filter decides, holding mu, what becomes of one event of the watch
// started in epoch: the event handed on, whether its object is then kept,
// and whether anything is handed on at all.
func (o *only) filter(epoch uint64, e watch.Event) (watch.Event, bool, bool) {
	if e.Type != watch.Added && e.Type != watch.Modified && e.Type != watch.Deleted {
		// Bookmarks carry the resource version on; errors end the watch.
		return e, false, true
	}
	if epoch != o.epoch {
		return e, false, false
	}
	_, known := o.kept[keyOf(e.Object)]
	switch {
	case e.Type != watch.Deleted && o.keep(e.Object):
		return e, true, true
	case known:
		return watch.Event{Type: watch.Deleted, Object: e.Object}, false, true
	default:
		return e, false, false
	}
}

// keyOf is the informer's key of obj; an object without metadata, which
// no informer could store either, gets none.
func keyOf(obj runtime.Object) string {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return ""
	}
	return key
}
