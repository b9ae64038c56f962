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
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/internal/polltest"
)

// probedBackend is a fakeBackend whose storage can go away: Probe, Provision
// and Delete then fail with its error.
type probedBackend struct {
	*fakeBackend
	mu     sync.Mutex
	down   error
	space  Space
	probes int
}

func newProbedBackend(down error) *probedBackend {
	b := &probedBackend{fakeBackend: newFakeBackend(), space: Space{AvailableBytes: 60, TotalBytes: 100}}
	b.provision = func(context.Context, int, ProvisionOptions) (ProvisioningState, error) {
		return ProvisioningFinished, b.err()
	}
	b.setDown(down)
	return b
}

func (b *probedBackend) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.down
}

func (b *probedBackend) setDown(err error) {
	b.mu.Lock()
	b.down = err
	b.mu.Unlock()
	b.fakeBackend.mu.Lock()
	b.deleteErr = err
	b.fakeBackend.mu.Unlock()
}

func (b *probedBackend) Probe(context.Context) (Space, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probes++
	return b.space, b.down
}

// healthLog keeps what Health reported at each OnHealthChange.
type healthLog struct {
	mu      sync.Mutex
	c       *Controller
	changes []string
}

func (l *healthLog) record() {
	h := l.c.Health()
	entry := "up"
	if h.Err != nil {
		entry = "down: " + h.Err.Error()
	}
	if h.Space != nil {
		entry += fmt.Sprintf(", %d of %d", h.Space.AvailableBytes, h.Space.TotalBytes)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes = append(l.changes, entry)
}

func (l *healthLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.changes...)
}

// TestBackendOutage: while its storage fails the probes, a claim or a
// volume is retried past its failure threshold with an Event each time, and
// the controller reports the outage; once the storage answers again, it is
// provisioned or deleted, without a restart, and the outage is over.
func TestBackendOutage(t *testing.T) {
	outage := errors.New("server not responding")
	tests := map[string]struct {
		// start starts the work that fails during the outage.
		start func(f *fixture)
		// done tells that work is done.
		done      func(f *fixture) bool
		wantEvent string
	}{
		"provision": {
			start:     func(f *fixture) { f.createClaim(newClaim("c", "fast", testProvisioner)) },
			done:      func(f *fixture) bool { return f.volumeExists("pvc-uid-c") },
			wantEvent: EventProvisioningFailed,
		},
		"delete": {
			start: func(f *fixture) {
				pv := newVolume("pv", testProvisioner, corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete)
				if _, err := f.client.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{}); err != nil {
					f.t.Fatal(err)
				}
			},
			done:      func(f *fixture) bool { return !f.volumeExists("pv") },
			wantEvent: EventVolumeFailedDelete,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.start()
			f.createClass("fast", testProvisioner)
			backend := newProbedBackend(outage)
			cfg := testConfig(testProvisioner)
			cfg.Retry.ProvisionFailureThreshold = 1
			cfg.Retry.DeleteFailureThreshold = 1
			cfg.ProbeInterval = 10 * time.Millisecond
			recorder := &testRecorder{}
			log := &healthLog{}
			c, err := New(cfg, Dependencies{
				Client: f.client, Informers: f.informers, EventRecorder: recorder, Metrics: f.metrics,
				Provisioner: backend, OnHealthChange: log.record,
			})
			if err != nil {
				t.Fatal(err)
			}
			log.c = c
			stop := startController(t, c)
			tc.start(f)

			// Well past the threshold of one retry.
			polltest.Eventually(t, "retries past the threshold", func() bool { return countEvents(recorder, tc.wantEvent) > 4 })
			if got := testutil.ToFloat64(f.metrics.backendUp.WithLabelValues(testProvisioner)); got != 0 {
				t.Errorf("%s = %v during the outage, want 0", "provisioner_backend_up", got)
			}
			backend.setDown(nil)
			polltest.Eventually(t, "the work done", func() bool { return tc.done(f) })
			polltest.Eventually(t, "the outage over", func() bool { return c.Health().Err == nil && c.Health().Space != nil })
			if got := testutil.ToFloat64(f.metrics.availableBytes.WithLabelValues(testProvisioner)); got != 60 {
				t.Errorf("%s = %v, want 60", "provisioner_backend_available_bytes", got)
			}
			stop()
			want := []string{"down: " + outage.Error(), "up, 60 of 100"}
			if diff := cmp.Diff(want, log.get()); diff != "" {
				t.Errorf("health changes told (-want +got):\n%s", diff)
			}
			if n := testutil.CollectAndCount(f.metrics.backendUp); n != 0 {
				t.Errorf("%d provisioner_backend_up series left after the stop", n)
			}
			if (c.Health() != Health{}) {
				t.Errorf("Health() after the stop = %+v, want nothing known", c.Health())
			}
		})
	}
}

func countEvents(r *testRecorder, reason string) int {
	n := 0
	for _, got := range r.events() {
		if got == reason {
			n++
		}
	}
	return n
}

// TestProbeAfterFailure: a failed Provision asks for a probe at once, long
// before the probe interval is over.
func TestProbeAfterFailure(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)
	backend := newProbedBackend(nil)
	cfg := testConfig(testProvisioner)
	cfg.ProbeInterval = time.Hour
	c := f.newController(cfg, backend, &testRecorder{})
	startController(t, c)
	polltest.Eventually(t, "the first probe", func() bool { return c.Health().Space != nil })
	backend.setDown(errors.New("gone"))
	f.createClaim(newClaim("c", "fast", testProvisioner))
	polltest.Eventually(t, "the outage seen", func() bool { return c.Health().Err != nil })
}

func TestHealthChanged(t *testing.T) {
	space := func(available, total int64) *Space { return &Space{AvailableBytes: available, TotalBytes: total} }
	down, other := errors.New("down"), errors.New("other")
	tests := map[string]struct {
		old, now Health
		want     bool
	}{
		"nothing known":                   {want: false},
		"first space":                     {now: Health{Space: space(50, 1000)}, want: true},
		"turned down":                     {old: Health{Space: space(50, 1000)}, now: Health{Err: down, Space: space(50, 1000)}, want: true},
		"still down":                      {old: Health{Err: down}, now: Health{Err: errors.New("down")}, want: false},
		"another error":                   {old: Health{Err: down}, now: Health{Err: other}, want: true},
		"back up":                         {old: Health{Err: down, Space: space(50, 1000)}, now: Health{Space: space(50, 1000)}, want: true},
		"a few bytes used":                {old: Health{Space: space(500, 1000)}, now: Health{Space: space(491, 1000)}, want: false},
		"a hundredth used":                {old: Health{Space: space(500, 1000)}, now: Health{Space: space(490, 1000)}, want: true},
		"a hundredth freed":               {old: Health{Space: space(500, 1000)}, now: Health{Space: space(510, 1000)}, want: true},
		"grown":                           {old: Health{Space: space(500, 1000)}, now: Health{Space: space(500, 2000)}, want: true},
		"tiny storage, one byte moved":    {old: Health{Space: space(5, 10)}, now: Health{Space: space(4, 10)}, want: true},
		"no size reported, nothing moved": {old: Health{Space: space(0, 0)}, now: Health{Space: space(0, 0)}, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.now.changedFrom(tc.old); got != tc.want {
				t.Errorf("changedFrom() = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestProbeSoonOnlyWhileAvailable: a failure asks for a probe while the
// backend is thought available; during a known outage the interval's probes
// suffice.
func TestProbeSoonOnlyWhileAvailable(t *testing.T) {
	tests := map[string]struct {
		health Health
		want   int
	}{
		"available":   {health: Health{Space: &Space{}}, want: 1},
		"not probed":  {want: 1},
		"unavailable": {health: Health{Err: errors.New("down")}, want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := &Controller{term: &term{probes: &probes{now: make(chan struct{}, 1)}}, health: tc.health}
			c.probeSoon()
			c.probeSoon()
			if got := len(c.term.probes.now); got != tc.want {
				t.Errorf("%d probes asked for, want %d", got, tc.want)
			}
		})
	}
}
