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

package hostpathnodes

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

	"github.com/provfleet/provfleet/internal/cachetrim"
)

// LimitCacheToNode makes the shared informers of factory of claims and
// PersistentVolumes of a process that is a node agent alone hold only its
// node's: the claims selected to it and the volumes on it, the objects its
// instances act on (nodeScope). On a cluster of many nodes the others are
// most of the cache, and an agent runs on every node. An instance that looks
// for an object the cache does not hold asks the API, as it does for one the
// cache has not seen yet. It must run before the informers are first asked
// for: the factory hands out the informer registered first for a type.
func LimitCacheToNode(factory informers.SharedInformerFactory, node string) {
	scope := nodeScope(node)
	factory.InformerFor(&corev1.PersistentVolumeClaim{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		claims := client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll)
		return onlyInformer(client, claims.List, claims.Watch, &corev1.PersistentVolumeClaim{}, resync, func(obj runtime.Object) bool {
			claim, ok := obj.(*corev1.PersistentVolumeClaim)
			return ok && scope.Claim(claim)
		})
	})
	factory.InformerFor(&corev1.PersistentVolume{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		volumes := client.CoreV1().PersistentVolumes()
		return onlyInformer(client, volumes.List, volumes.Watch, &corev1.PersistentVolume{}, resync, func(obj runtime.Object) bool {
			volume, ok := obj.(*corev1.PersistentVolume)
			return ok && scope.Volume(volume)
		})
	})
}

// onlyInformer returns an informer, indexed by namespace as the factory's
// are, of the objects of list and watch that keep accepts.
func onlyInformer[L runtime.Object](client kubernetes.Interface,
	list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	example runtime.Object, resync time.Duration, keep func(runtime.Object) bool) cache.SharedIndexInformer {
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			return list(ctx, options)
		},
		WatchFuncWithContext: watchFn,
	}, client)
	return cache.NewSharedIndexInformerWithOptions(cachetrim.Only(lw, keep), example, cache.SharedIndexInformerOptions{
		ResyncPeriod: resync,
		Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	})
}
