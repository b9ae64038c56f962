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

package provisioning

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"k8s.io/client-go/tools/cache"

	"github.com/provfleet/provfleet/internal/polltest"
)

// countingInformer counts the event handlers registered on an informer.
type countingInformer struct {
	cache.SharedIndexInformer
	handlers atomic.Int32
}

func (i *countingInformer) AddEventHandlerWithOptions(handler cache.ResourceEventHandler, options cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := i.SharedIndexInformer.AddEventHandlerWithOptions(handler, options)
	if err == nil {
		i.handlers.Add(1)
	}
	return reg, err
}

func (i *countingInformer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	i.handlers.Add(-1)
	return i.SharedIndexInformer.RemoveEventHandler(reg)
}

func TestManyControllersOnSharedInformers(t *testing.T) {
	f := newFixture(t)
	claims := &countingInformer{SharedIndexInformer: f.informers.Claims}
	volumes := &countingInformer{SharedIndexInformer: f.informers.Volumes}
	f.informers.Claims, f.informers.Volumes = claims, volumes
	f.informers.Router = NewRouter(claims, volumes, f.informers.Leases)
	f.start()

	const n = 20
	names := make([]string, n)
	backends := make([]*fakeBackend, n)
	controllers := make([]*Controller, n)
	for i := range n {
		names[i] = fmt.Sprintf("provfleet.io/p%02d", i)
		f.createClass(fmt.Sprintf("class-%02d", i), names[i])
		backends[i] = newFakeBackend()
		controllers[i] = f.newController(testConfig(names[i]), backends[i], &testRecorder{})
	}
	claimFor := func(i int, suffix string) string {
		name := fmt.Sprintf("claim-%02d-%s", i, suffix)
		f.createClaim(newClaim(name, fmt.Sprintf("class-%02d", i), names[i]))
		return "pvc-uid-" + name
	}

	// The controllers that keep running start first, so that what is left
	// after the others stopped can be compared with this moment.
	keep, stop := controllers[:n/2], controllers[n/2:]
	keepStops := make([]func(), len(keep))
	for i, c := range keep {
		keepStops[i] = startController(t, c)
	}
	for i := range n / 2 {
		pv := claimFor(i, "warm")
		polltest.Eventually(t, "a first volume", func() bool { return f.volumeExists(pv) })
	}
	handlers := func() []int32 { return []int32{claims.handlers.Load(), volumes.handlers.Load()} }
	if diff := cmp.Diff([]int32{1, 1}, handlers()); diff != "" {
		t.Errorf("claim and volume handlers of %d leading controllers (-want +got):\n%s", n/2, diff)
	}
	before := goleak.IgnoreCurrent()

	stops := make([]func(), len(stop))
	for i, c := range stop {
		stops[i] = startController(t, c)
	}
	pvs := make([]string, n)
	for i := range n {
		pvs[i] = claimFor(i, "a")
	}
	for i, pv := range pvs {
		polltest.Eventually(t, "volume "+pv, func() bool { return f.volumeExists(pv) })
		if got := backends[i].provisionCount(pv); got != 1 {
			t.Errorf("%s provisioned %d times by its own provisioner", pv, got)
		}
	}
	for i, b := range backends {
		_, own, _ := b.snapshot()
		for _, pv := range own {
			if !slices.Contains([]string{pvs[i], fmt.Sprintf("pvc-uid-claim-%02d-warm", i)}, pv) {
				t.Errorf("provisioner %s provisioned %s of another provisioner", names[i], pv)
			}
		}
	}
	if !hasSeries(t, f, names[n-1]) {
		t.Fatalf("no metric series of %s while it runs", names[n-1])
	}

	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range stops {
		wg.Go(s)
	}
	wg.Wait()
	t.Logf("stopped %d controllers in %v", len(stops), time.Since(start))

	if diff := cmp.Diff([]int32{1, 1}, handlers()); diff != "" {
		t.Errorf("claim and volume handlers after %d of %d controllers stopped (-want +got):\n%s", len(stops), n, diff)
	}
	for _, name := range names[n/2:] {
		if hasSeries(t, f, name) {
			t.Errorf("metric series of stopped %s remain", name)
		}
	}
	goleak.VerifyNone(t, before)

	for i := range n / 2 {
		pv := claimFor(i, "b")
		polltest.Eventually(t, "a volume after the others stopped", func() bool { return f.volumeExists(pv) })
	}

	for _, s := range keepStops {
		s()
	}
	if diff := cmp.Diff([]int32{0, 0}, handlers()); diff != "" {
		t.Errorf("claim and volume handlers after every controller stopped (-want +got):\n%s", diff)
	}
}

// hasSeries reports whether the registry holds any series of a provisioner.
func hasSeries(t *testing.T, f *fixture, provisionerName string) bool {
	t.Helper()
	families, err := f.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range families {
		for _, m := range family.GetMetric() {
			for _, label := range m.GetLabel() {
				if label.GetName() == labelProvisioner && label.GetValue() == provisionerName {
					return true
				}
			}
		}
	}
	return false
}
