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

package eventroutertest

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Recorder records what subscribers were handed, as "subscriber event
// object". Its zero value is ready to use.
type Recorder struct {
	mu  sync.Mutex
	got []string
}

// Handler records the events handed to subscriber.
func (r *Recorder) Handler(subscriber string) cache.ResourceEventHandler {
	record := func(event string, obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		name := "?"
		if m, ok := obj.(metav1.Object); ok {
			name = m.GetName()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, subscriber+" "+event+" "+name)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record("add", obj) },
		UpdateFunc: func(_, obj any) { record("update", obj) },
		DeleteFunc: func(obj any) { record("delete", obj) },
	}
}

// Sorted returns what was recorded, sorted.
func (r *Recorder) Sorted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.got))
}
