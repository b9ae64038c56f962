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
	"k8s.io/client-go/informers"

	"github.com/provfleet/provfleet/internal/cachetrim"
	"github.com/provfleet/provfleet/pkg/provisioning"
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
	scope := NodeCacheScope(node)
	cachetrim.Limit(factory, cachetrim.Keep{Claim: scope.Claim, Volume: scope.Volume})
}

// NodeCacheScope is what the cache of node's agent keeps of the claims and
// PersistentVolumes of the cluster (LimitCacheToNode).
func NodeCacheScope(node string) provisioning.Scope {
	return nodeScope(node)
}
