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
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/utils/ptr"
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

// OnlyChanging is Only for a keep whose answers change: Changing.Refresh
// is to be called once they may have, and Changing.Complete tells when the
// informer holds what they accept.
//
// A refresh ends the watch under way and starts the next one with the
// initial events, from the resource version the reflector watches from:
// the objects keep accepts now and dropped before come in as added,
// those it no longer accepts go as deleted, and so does every object
// handed on before that the initial events no longer bring, which was
// deleted in between. The reflector takes that watch as any other and
// keeps its cache: no list, no wait, nothing else re-delivered. A server
// that cannot watch with the initial events fails that watch, and the
// reflector lists again, after its backoff, which covers the refresh too;
// so does a client that cannot stream lists at all (a fake), whose watch a
// refresh ends with a resource-expired error.
// Refreshes called before the next watch starts cost one.
//
// keep is asked afresh for every event, so an object that keep starts to
// accept comes in with its next event even before the refresh.
func OnlyChanging(lw cache.ListerWatcher, keep func(runtime.Object) bool) *Changing {
	return &Changing{newOnly(lw, keep)}
}

// Changing is the ListerWatcher of OnlyChanging.
type Changing struct{ *only }

// Refresh makes the informer take keep's answers of now, as OnlyChanging
// says.
func (c *Changing) Refresh() { c.refresh() }

// Feeds gives c the store of the informer it feeds, before the informer
// starts: a refresh deletes what it holds of objects gone, and Complete
// looks into it.
func (c *Changing) Feeds(store cache.Store) { c.store = store }

// Complete reports whether the informer's store holds what keep accepted
// when Refresh was last called: the refresh's watch brought its initial
// events, and every object handed on since, and not deleted, is in the
// store. Once it reported true for a refresh it does so at once until the
// next.
func (c *Changing) Complete() bool { return c.complete() }

func newOnly(lw cache.ListerWatcher, keep func(runtime.Object) bool) *only {
	return &only{
		lw:                   cache.ToListerWatcherWithContext(lw),
		keep:                 keep,
		watchListUnsupported: watchlist.DoesClientNotSupportWatchListSemantics(lw),
		kept:                 map[string]struct{}{},
		changed:              make(chan struct{}),
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
	// wanted counts the refreshes asked for, done those that a watch's
	// initial events or a list covered, and inStore the count whose
	// objects were last found in the store; changed is closed at each
	// refresh, which ends the watch under way.
	wanted, done, inStore uint64
	changed               chan struct{}
	// store is the informer's, once Feeds set it.
	store cache.Store
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
	initial := options.SendInitialEvents != nil && *options.SendInitialEvents
	o.mu.Lock()
	refresh := !initial && !o.watchListUnsupported && o.done != o.wanted
	wanted := o.wanted
	o.mu.Unlock()
	if refresh {
		// The initial events of now, from the version the reflector has.
		options.SendInitialEvents = ptr.To(true)
		options.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
		options.AllowWatchBookmarks = true
	}
	w, err := o.lw.WatchWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if initial {
		o.restart()
	}
	fw := &onlyWatch{inner: w, result: make(chan watch.Event), done: make(chan struct{}), started: time.Now()}
	if refresh {
		fw.refresh = &refreshing{wanted: wanted, brought: map[string]struct{}{}}
	}
	go fw.run(o, o.epoch, o.changed)
	return fw, nil
}

// onlyWatch hands on the events of inner that Only keeps. Unlike
// watch.Filter it stops sending once stopped, as its reader may be gone.
type onlyWatch struct {
	inner    watch.Interface
	result   chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
	started  time.Time
	// refresh is the refresh this watch's initial events bring, until
	// they ended; nil for any other watch.
	refresh *refreshing
}

// refreshing is a refresh under way: the count of refreshes it covers and
// the keys its initial events brought so far.
type refreshing struct {
	wanted  uint64
	brought map[string]struct{}
}

func (w *onlyWatch) ResultChan() <-chan watch.Event { return w.result }

func (w *onlyWatch) Stop() {
	w.stopOnce.Do(func() { close(w.done) })
	w.inner.Stop()
}

// minWatch is how long a watch lasts at least before a refresh ends it: the
// reflector takes a shorter one without events for a failure and waits
// before it watches again.
const minWatch = time.Second

// run filters the events of inner until it ends, w is stopped or changed is
// closed by a refresh: then it ends w, and the reflector watches again at
// once, with the refresh's initial events.
func (w *onlyWatch) run(o *only, epoch uint64, changed <-chan struct{}) {
	defer close(w.result)
	for {
		select {
		case e, open := <-w.inner.ResultChan():
			if !open || !o.handOn(w, epoch, e) {
				return
			}
		case <-changed:
			if wait := minWatch - time.Since(w.started); wait > 0 {
				select {
				case <-time.After(wait):
				case <-w.done:
				}
			}
			w.inner.Stop()
			if o.watchListUnsupported {
				// No initial events to refresh with: the reflector lists
				// again after this error, once its backoff passed.
				status := apierrors.NewResourceExpired("the scope of the cache changed: list again").Status()
				select {
				case w.result <- watch.Event{Type: watch.Error, Object: &status}:
				case <-w.done:
				}
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
// The bookmark that ends a refresh's initial events is preceded by the
// deletes of the objects kept that they did not bring.
//
// mu is held while the reader takes the event, so that no other watch
// judges the same object in between. The informer's reflector makes every
// other call that takes mu (a list, a new watch) only after it stopped w,
// which ends the wait.
func (o *only) handOn(w *onlyWatch, epoch uint64, e watch.Event) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w.refresh != nil && e.Type == watch.Bookmark && isInitialEventsEnd(e.Object) {
		if epoch != o.epoch || !o.endRefresh(w) {
			return false
		}
	}
	out, kept, pass := o.filter(epoch, e)
	if !pass {
		return true
	}
	if w.refresh != nil && kept {
		w.refresh.brought[keyOf(out.Object)] = struct{}{}
	}
	return o.send(w, out, kept)
}

// send hands out on to w's reader and records what it kept; mu is held.
func (o *only) send(w *onlyWatch, out watch.Event, kept bool) bool {
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

// endRefresh hands on, once w's initial events ended, the deletes of the
// objects kept that they did not bring, gone in between, each with the
// informer's last copy, and records the refresh done; mu is held.
func (o *only) endRefresh(w *onlyWatch) bool {
	for key := range o.kept {
		if _, brought := w.refresh.brought[key]; brought {
			continue
		}
		obj, exists, err := o.store.GetByKey(key)
		last, isObject := obj.(runtime.Object)
		if err != nil || !exists || !isObject {
			// Nothing held under the key to delete.
			delete(o.kept, key)
			continue
		}
		if !o.send(w, watch.Event{Type: watch.Deleted, Object: last}, false) {
			return false
		}
	}
	o.done = max(o.done, w.refresh.wanted)
	w.refresh = nil
	return true
}

// restart forgets every key, at the start of what replaces the whole cache,
// which keep as it is now judges: every refresh asked for so far is done.
func (o *only) restart() {
	o.epoch++
	clear(o.kept)
	o.done = o.wanted
}

// refresh ends the watch under way, so that the reflector watches again
// with the initial events of now.
func (o *only) refresh() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.wanted++
	close(o.changed)
	o.changed = make(chan struct{})
}

// complete reports whether every refresh asked for is done and every
// object kept is in store, as Changing.Complete says.
func (o *only) complete() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done != o.wanted {
		return false
	}
	if o.inStore == o.done {
		return true
	}
	for key := range o.kept {
		if _, exists, err := o.store.GetByKey(key); err != nil || !exists {
			return false
		}
	}
	o.inStore = o.done
	return true
}

// isInitialEventsEnd reports whether obj, a bookmark's, ends the initial
// events of a watch.
func isInitialEventsEnd(obj runtime.Object) bool {
	accessor, err := meta.Accessor(obj)
	return err == nil && accessor.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
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
