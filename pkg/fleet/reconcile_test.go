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

package fleet

import (
	"fmt"
	"sync"
	"testing"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// TestManagerParallelRetunes re-tunes several objects at once: a reconcile
// worker that records an instance's new config must not race with the other
// workers' name-conflict checks, which read every running instance's config.
func TestManagerParallelRetunes(t *testing.T) {
	f := newFixture(t)
	names := []string{"a", "b", "c", "d"}
	for _, name := range names {
		f.create(f.hostPath(name, "x.io/"+name, 1))
	}
	f.eventually("every object runs", func() bool {
		for _, name := range names {
			if f.readyReason(name, 1) != v1alpha1.ReasonRunning {
				return false
			}
		}
		return true
	})
	const edits = 20
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			for i := range edits {
				f.edit(name, func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Workers = int32(i + 2) })
			}
		})
	}
	wg.Wait()
	for _, name := range names {
		// The fake clientset writes a status over the whole object, so an edit
		// may be undone: the status must match whatever generation is current.
		f.eventually(fmt.Sprintf("%s observes its current generation", name), func() bool {
			return f.readyReason(name, f.get(name).Generation) == v1alpha1.ReasonRunning
		})
		if instances := f.started("x.io/" + name); len(instances) != 1 {
			t.Errorf("%s: %d instances started, want one re-tuned instance", name, len(instances))
		}
	}
}
