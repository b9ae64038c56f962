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
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Keep says which claims and PersistentVolumes a cache holds; a nil
// function leaves the cache of its type whole.
type Keep struct {
	Claim  func(*corev1.PersistentVolumeClaim) bool
	Volume func(*corev1.PersistentVolume) bool
}

// Limit makes the shared informers of factory of claims and
// PersistentVolumes hold only what keep accepts (OnlyChanging). It returns
// the function to call once keep may answer otherwise (each of those
// informers then refreshes), and the one that reports whether they all
// hold what keep accepted at the last refresh. It must run before the
// informers are first asked for: the factory hands out the informer
// registered first for a type.
func Limit(factory informers.SharedInformerFactory, keep Keep) (refresh func(), complete func() bool) {
	var limited []*Changing
	limit := func(example runtime.Object, newInformer func(kubernetes.Interface, time.Duration) (cache.SharedIndexInformer, *Changing)) {
		factory.InformerFor(example, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			inf, changing := newInformer(client, resync)
			limited = append(limited, changing)
			return inf
		})
	}
	if keep.Claim != nil {
		limit(&corev1.PersistentVolumeClaim{}, func(client kubernetes.Interface, resync time.Duration) (cache.SharedIndexInformer, *Changing) {
			claims := client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll)
			return onlyInformer(client, claims.List, claims.Watch, &corev1.PersistentVolumeClaim{}, resync, typed(keep.Claim))
		})
	}
	if keep.Volume != nil {
		limit(&corev1.PersistentVolume{}, func(client kubernetes.Interface, resync time.Duration) (cache.SharedIndexInformer, *Changing) {
			volumes := client.CoreV1().PersistentVolumes()
			return onlyInformer(client, volumes.List, volumes.Watch, &corev1.PersistentVolume{}, resync, typed(keep.Volume))
		})
	}
	refresh = func() {
		for _, c := range limited {
			c.Refresh()
		}
	}
	complete = func() bool {
		for _, c := range limited {
			if !c.Complete() {
				return false
			}
		}
		return true
	}
	return refresh, complete
}

// typed is keep for the objects of its type; it refuses any other.
func typed[T runtime.Object](keep func(T) bool) func(runtime.Object) bool {
	return func(obj runtime.Object) bool {
		o, ok := obj.(T)
		return ok && keep(o)
	}
}

// onlyInformer returns an informer, indexed by namespace as the factory's
// are, of the objects of list and watch that keep accepts, and what
// refreshes it.
func onlyInformer[L runtime.Object](client kubernetes.Interface,
	list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	example runtime.Object, resync time.Duration, keep func(runtime.Object) bool) (cache.SharedIndexInformer, *Changing) {
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			return list(ctx, options)
		},
		WatchFuncWithContext: watchFn,
	}, client)
	limited := OnlyChanging(lw, keep)
	inf := cache.NewSharedIndexInformerWithOptions(limited, example, cache.SharedIndexInformerOptions{
		ResyncPeriod: resync,
		Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	})
	limited.Feeds(inf.GetStore())
	return inf, limited
}
