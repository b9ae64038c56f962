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

// Package cachetrim keeps the informer caches of a provfleet process small on
// big clusters: every process watches the claims, PersistentVolumes,
// StorageClasses and Nodes of the whole cluster, and most of what the API
// serves of them is never read.
//
// What comes in: each object an informer decodes, before it is stored or
// handed to an event handler (Transform, a cache.TransformFunc, set with
// informers.WithTransform on the factory of those four types).
//
// What goes out: the same object, trimmed in place to what the provision
// controller and its backends read (see Transform for what is kept and why).
// A cached object is therefore not the whole object: a write built from one
// must send only what it changes, never the whole object (pkg/provisioning
// patches claims and PersistentVolumes for that reason).
//
// A process serves only some of the cluster's claims, volumes and classes:
// Only limits what an informer lists and watches to those, so the others are
// dropped as they are decoded and never cached (see Only for how an object
// that leaves the scope leaves the cache). A node agent's scope is its node,
// and never changes; the manager's is its provisioners, which come and go:
// OnlyChanging then refreshes the informer within its watch, so that the
// objects of a provisioner that comes are fetched, and those of one that
// goes are dropped, with no list, and tells when the informer holds them.
// Limit puts either on the claim and volume informers of a factory.
//
// Goroutines: Transform runs on the informer's own; each watch of Only runs
// one goroutine that filters its events until the watch ends, is stopped or
// is ended by a change of scope, holding Only's lock while its reader takes
// an event.
package cachetrim
