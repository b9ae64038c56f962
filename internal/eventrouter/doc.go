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

// Package eventrouter hands the events of one shared informer to the
// subscribers of the keys the objects name, for a fleet of controllers that
// each care about a few objects of a large cache.
//
// It plays the part of an informer's AddEventHandler and RemoveEventHandler:
// Subscribe registers a cache.ResourceEventHandler under keys and returns a
// Subscription whose Stop removes it. Unlike a handler added to the informer
// itself, a subscriber costs no goroutine and no buffer of its own: a Router
// has one handler on its informer, only while someone subscribes, and finds
// the subscribers of an event by map lookup, so an event is seen only by the
// subscribers it names.
//
// What comes in: the informer's events and, from New, a function that lists
// the keys an object names. What goes out: calls of the subscribers'
// handlers, on the informer's handler goroutine, once per subscriber and
// event. It runs no goroutine of its own. As with client-go's handlers, an
// update goes to the subscribers of the old and of the new object, and a
// handler must not block; unlike them, a new subscriber is not handed the
// informer's store (it lists the store itself) and a Stop returns only once
// no delivery to it is under way.
package eventrouter
