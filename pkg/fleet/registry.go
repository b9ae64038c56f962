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
	"sync"
	"time"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// instance is what the fleet needs of one running provision controller;
// *provisioning.Controller implements it.
type instance interface {
	Run(ctx context.Context) error
	Reconfigure(cfg provisioning.Config) error
	IsLeader() bool
	LeaseHealthy() error
	KeepLease()
	Stuck() error
	Health() provisioning.Health
}

// running is one started instance. Its token is unique for the life of the
// registry, so a late Stop of an old instance can never hit its replacement.
type running struct {
	token    uint64
	instance instance
	cancel   context.CancelFunc
	done     chan struct{}
	// err is Run's result, readable once done is closed.
	err error

	// What the manager applied, to tell a live re-tune from a restart. A
	// re-tune writes cfg and generation under mu: other objects' reconciles
	// read cfg.
	cfg        provisioning.Config
	backend    string
	generation int64
	// provisioner is the instance's backend.
	provisioner provisioning.Provisioner
	// release frees what the backend holds once Run returned; nil when
	// nothing.
	release func()

	mu     sync.Mutex
	leader string
	// leaseFreeAt is when the Lease of a stopped instance that gave up on
	// hung work has expired.
	leaseFreeAt time.Time
}

// exited reports whether Run returned, and its error.
func (r *running) exited() (bool, error) {
	select {
	case <-r.done:
		return true, r.err
	default:
		return false, nil
	}
}

func (r *running) setLeader(identity string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leader = identity
}

func (r *running) currentLeader() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader
}

// registry holds the running instances by key (the ProvisionerConfig name).
// Start and Stop are idempotent so every reconcile may call them.
type registry struct {
	// onExit is told when an instance's Run returned without being stopped.
	onExit func(key string)

	mu        sync.Mutex
	instances map[string]*running
	// stuck holds the stopped instances whose hung work has not ended or
	// whose Lease has not expired yet, by key.
	stuck     map[string]*running
	lastToken uint64
	wg        sync.WaitGroup
}

func newRegistry(onExit func(key string)) *registry {
	return &registry{onExit: onExit, instances: map[string]*running{}, stuck: map[string]*running{}}
}

// Get returns the instance running under key, or nil.
func (g *registry) Get(key string) *running {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.instances[key]
}

// Start runs r under key unless an instance already runs there, and returns
// the instance that runs under key afterwards.
func (g *registry) Start(ctx context.Context, key string, r *running) *running {
	g.mu.Lock()
	defer g.mu.Unlock()
	if existing := g.instances[key]; existing != nil {
		return existing
	}
	g.lastToken++
	r.token = g.lastToken
	r.done = make(chan struct{})
	ctx, r.cancel = context.WithCancel(ctx)
	g.instances[key] = r
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		r.err = r.instance.Run(ctx)
		if r.release != nil {
			r.release()
		}
		close(r.done)
		if ctx.Err() == nil {
			g.onExit(key)
		}
	}()
	return r
}

// Stop stops the instance under key if its token is token, waits for its Run
// to return and forgets it. It reports whether it stopped anything.
func (g *registry) Stop(key string, token uint64) bool {
	g.mu.Lock()
	r := g.instances[key]
	if r == nil || r.token != token {
		g.mu.Unlock()
		return false
	}
	delete(g.instances, key)
	g.mu.Unlock()
	r.cancel()
	<-r.done
	if r.instance.Stuck() != nil {
		// It gave up on hung work and left its Lease held: a replacement with
		// the same identity would take the Lease over at once.
		r.leaseFreeAt = time.Now()
		if le := r.applied().LeaderElection; le.Enabled {
			r.leaseFreeAt = r.leaseFreeAt.Add(le.LeaseDuration)
		}
		g.mu.Lock()
		g.stuck[key] = r
		g.mu.Unlock()
	}
	return true
}

// LeaseHeldUntil returns when the Lease of the stopped instance of key that
// gave up on hung work expires; zero when there is none.
func (g *registry) LeaseHeldUntil(key string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forgetUnstuck()
	if r := g.stuck[key]; r != nil {
		return r.leaseFreeAt
	}
	return time.Time{}
}

// EachStuck calls fn for every stopped instance whose hung work has not ended
// or whose Lease has not expired.
func (g *registry) EachStuck(fn func(key string, r *running)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forgetUnstuck()
	for key, r := range g.stuck {
		fn(key, r)
	}
}

// forgetUnstuck drops the stopped instances whose work ended and whose Lease
// expired; callers hold g.mu.
func (g *registry) forgetUnstuck() {
	for key, r := range g.stuck {
		if time.Now().After(r.leaseFreeAt) && r.instance.Stuck() == nil {
			delete(g.stuck, key)
		}
	}
}

// StopAll stops every instance at once and waits for all of them.
func (g *registry) StopAll() {
	g.mu.Lock()
	all := g.instances
	g.instances = map[string]*running{}
	g.mu.Unlock()
	for _, r := range all {
		r.cancel()
	}
	g.wg.Wait()
}

// Each calls fn for every running instance.
func (g *registry) Each(fn func(key string, r *running)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for key, r := range g.instances {
		fn(key, r)
	}
}
