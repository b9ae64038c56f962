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
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// fakeController runs until stopped or until fail is closed, and records the
// configs it was re-tuned with.
type fakeController struct {
	mu           sync.Mutex
	cfg          provisioning.Config
	reconfigured []provisioning.Config
	restartOn    func(before, after provisioning.Config) bool
	leader       bool
	handedOver   bool
	stuck        error
	onStuck      func()
	health       provisioning.Health
	onHealth     func()
	started      chan struct{}
	stopped      chan struct{}
	fail         chan error
}

func newFakeController(cfg provisioning.Config) *fakeController {
	return &fakeController{cfg: cfg, started: make(chan struct{}), stopped: make(chan struct{}), fail: make(chan error, 1)}
}

func (f *fakeController) Run(ctx context.Context) error {
	close(f.started)
	defer close(f.stopped)
	select {
	case <-ctx.Done():
		return nil
	case err := <-f.fail:
		return err
	}
}

func (f *fakeController) Reconfigure(cfg provisioning.Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.restartOn != nil && f.restartOn(f.cfg, cfg) {
		return provisioning.ErrRestartRequired
	}
	f.cfg = cfg
	f.reconfigured = append(f.reconfigured, cfg)
	return nil
}

func (f *fakeController) IsLeader() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}

func (f *fakeController) LeaseHealthy() error { return nil }

func (f *fakeController) KeepLease() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handedOver = true
}

func (f *fakeController) Stuck() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stuck
}

func (f *fakeController) Health() provisioning.Health {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.health
}

// setHealth changes what Health reports and tells the manager, as a
// controller does.
func (f *fakeController) setHealth(h provisioning.Health) {
	f.mu.Lock()
	f.health = h
	onHealth := f.onHealth
	f.mu.Unlock()
	onHealth()
}

// setStuck changes what Stuck reports and tells the manager, as a controller
// does.
func (f *fakeController) setStuck(err error) {
	f.mu.Lock()
	f.stuck = err
	onStuck := f.onStuck
	f.mu.Unlock()
	onStuck()
}

func isStopped(f *fakeController) bool {
	select {
	case <-f.stopped:
		return true
	default:
		return false
	}
}

func TestRegistryStartIsIdempotent(t *testing.T) {
	defer goleak.VerifyNone(t)
	g := newRegistry(func(string) {})
	defer g.StopAll()
	first := newFakeController(provisioning.Config{})
	second := newFakeController(provisioning.Config{})

	got := g.Start(context.Background(), "a", &instance{controller: first})
	<-first.started
	if again := g.Start(context.Background(), "a", &instance{controller: second}); again != got {
		t.Fatalf("second Start under the same key returned a new instance")
	}
	if g.Get("a").controller != first {
		t.Errorf("the first instance no longer runs under its key")
	}
	select {
	case <-second.started:
		t.Errorf("second Start ran an instance although one was running")
	default:
	}
}

func TestRegistryStaleTokenNeverStopsTheReplacement(t *testing.T) {
	defer goleak.VerifyNone(t)
	g := newRegistry(func(string) {})
	defer g.StopAll()
	old := newFakeController(provisioning.Config{})
	oldToken := g.Start(context.Background(), "a", &instance{controller: old}).token
	if !g.Stop("a", oldToken) {
		t.Fatalf("Stop with the current token stopped nothing")
	}
	if !isStopped(old) {
		t.Fatalf("Stop returned before the instance's Run returned")
	}

	replacement := newFakeController(provisioning.Config{})
	newToken := g.Start(context.Background(), "a", &instance{controller: replacement}).token
	<-replacement.started
	if newToken == oldToken {
		t.Fatalf("the replacement got the old token %d", oldToken)
	}
	if g.Stop("a", oldToken) {
		t.Errorf("Stop with the old token reported stopping something")
	}
	if isStopped(replacement) {
		t.Errorf("Stop with the old token stopped the replacement")
	}
	if g.Stop("a", oldToken) || g.Stop("missing", newToken) {
		t.Errorf("Stop of nothing reported stopping something")
	}
}

func TestRegistryReportsInstancesThatExitByThemselves(t *testing.T) {
	defer goleak.VerifyNone(t)
	exits := make(chan string, 2)
	g := newRegistry(func(key string) { exits <- key })
	defer g.StopAll()

	failing := newFakeController(provisioning.Config{})
	inst := g.Start(context.Background(), "failing", &instance{controller: failing})
	stopped := newFakeController(provisioning.Config{})
	g.Start(context.Background(), "stopped", &instance{controller: stopped})

	boom := errors.New("boom")
	failing.fail <- boom
	if key := <-exits; key != "failing" {
		t.Fatalf("exit reported for %q, want failing", key)
	}
	if exited, err := inst.exited(); !exited || !errors.Is(err, boom) {
		t.Errorf("exited() = %v, %v; want true, %v", exited, err, boom)
	}
	g.StopAll()
	select {
	case key := <-exits:
		t.Errorf("a stopped instance was reported as exiting by itself: %q", key)
	default:
	}
}

func TestRegistryEachSeesRunningInstances(t *testing.T) {
	defer goleak.VerifyNone(t)
	g := newRegistry(func(string) {})
	defer g.StopAll()
	tokens := map[string]uint64{}
	for _, key := range []string{"a", "b", "c"} {
		tokens[key] = g.Start(context.Background(), key, &instance{controller: newFakeController(provisioning.Config{})}).token
	}
	g.Stop("b", tokens["b"])
	got := map[string]uint64{}
	g.Each(func(key string, inst *instance) { got[key] = inst.token })
	want := map[string]uint64{"a": tokens["a"], "c": tokens["c"]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("running instances (-want +got):\n%s", diff)
	}
}
