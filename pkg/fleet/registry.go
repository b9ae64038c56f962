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

// controller is what the fleet needs of what an instance runs: a
// *provisioning.Controller or a *hostpathnodes.Coordinator.
type controller interface {
	Run(ctx context.Context) error
	Reconfigure(cfg provisioning.Config) error
	IsLeader() bool
	LeaseHealthy() error
	KeepLease()
	Stuck() error
	Health() provisioning.Health
}

// instance is one controller the fleet started for one ProvisionerConfig in
// one role, with what it was started with. Its token is unique for the life
// of the registry, so a late Stop of an old instance can never hit its
// replacement.
type instance struct {
	token      uint64
	controller controller
	cancel     context.CancelFunc
	done       chan struct{}
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
func (inst *instance) exited() (bool, error) {
	select {
	case <-inst.done:
		return true, inst.err
	default:
		return false, nil
	}
}

func (inst *instance) setLeader(identity string) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	inst.leader = identity
}

func (inst *instance) currentLeader() string {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.leader
}

// registry holds the instances by key (the ProvisionerConfig name, with
// nodeKeyPrefix for a node agent's).
// Start and Stop are idempotent so every reconcile may call them.
type registry struct {
	// onExit is told when an instance's Run returned without being stopped.
	onExit func(key string)

	mu        sync.Mutex
	instances map[string]*instance
	// stuck holds the stopped instances whose hung work has not ended or
	// whose Lease has not expired yet, by key.
	stuck     map[string]*instance
	lastToken uint64
	wg        sync.WaitGroup
}

func newRegistry(onExit func(key string)) *registry {
	return &registry{onExit: onExit, instances: map[string]*instance{}, stuck: map[string]*instance{}}
}

// Get returns the instance under key, or nil.
func (g *registry) Get(key string) *instance {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.instances[key]
}

// Start runs inst under key unless an instance already runs there, and returns
// the instance that runs under key afterwards.
func (g *registry) Start(ctx context.Context, key string, inst *instance) *instance {
	g.mu.Lock()
	defer g.mu.Unlock()
	if existing := g.instances[key]; existing != nil {
		return existing
	}
	g.lastToken++
	inst.token = g.lastToken
	inst.done = make(chan struct{})
	ctx, inst.cancel = context.WithCancel(ctx)
	g.instances[key] = inst
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		inst.err = inst.controller.Run(ctx)
		if inst.release != nil {
			inst.release()
		}
		close(inst.done)
		if ctx.Err() == nil {
			g.onExit(key)
		}
	}()
	return inst
}

// Stop stops the instance under key if its token is token, waits for its Run
// to return and forgets it. It reports whether it stopped anything.
func (g *registry) Stop(key string, token uint64) bool {
	g.mu.Lock()
	inst := g.instances[key]
	if inst == nil || inst.token != token {
		g.mu.Unlock()
		return false
	}
	delete(g.instances, key)
	g.mu.Unlock()
	inst.cancel()
	<-inst.done
	if inst.controller.Stuck() != nil {
		// It gave up on hung work and left its Lease held: a replacement with
		// the same identity would take the Lease over at once.
		inst.leaseFreeAt = time.Now()
		if le := inst.applied().LeaderElection; le.Enabled {
			inst.leaseFreeAt = inst.leaseFreeAt.Add(le.LeaseDuration)
		}
		g.mu.Lock()
		g.stuck[key] = inst
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
	if inst := g.stuck[key]; inst != nil {
		return inst.leaseFreeAt
	}
	return time.Time{}
}

// EachStuck calls fn for every stopped instance whose hung work has not ended
// or whose Lease has not expired.
func (g *registry) EachStuck(fn func(key string, inst *instance)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forgetUnstuck()
	for key, inst := range g.stuck {
		fn(key, inst)
	}
}

// forgetUnstuck drops the stopped instances whose work ended and whose Lease
// expired; callers hold g.mu.
func (g *registry) forgetUnstuck() {
	for key, inst := range g.stuck {
		if time.Now().After(inst.leaseFreeAt) && inst.controller.Stuck() == nil {
			delete(g.stuck, key)
		}
	}
}

// StopAll stops every instance at once and waits for all of them.
func (g *registry) StopAll() {
	g.mu.Lock()
	all := g.instances
	g.instances = map[string]*instance{}
	g.mu.Unlock()
	for _, inst := range all {
		inst.cancel()
	}
	g.wg.Wait()
}

// Each calls fn for every instance.
func (g *registry) Each(fn func(key string, inst *instance)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for key, inst := range g.instances {
		fn(key, inst)
	}
}
