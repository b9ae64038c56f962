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

package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/klog/v2"
)

// ErrBusy is returned by Background.Poll when as many operations as it
// runs at once are under way: the caller asks again later.
var ErrBusy = errors.New("as many operations as run at once are under way")

// Background runs a backend's long operations (a clone's copy) in
// goroutines of their own, each under the name of its PersistentVolume, at
// most a fixed number at once, so that they hold no worker of the
// controller and their goroutines and memory stay bounded. A Provision
// polls its operation until it finished; Cancel stops one, Close all.
type Background[T any] struct {
	limit  int
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	jobs    map[string]*job[T]
	running int
	// waiting are the ended functions of the callers refused for want of
	// a free slot, by name: each is called once a slot frees, so that it
	// asks again at once rather than after its retry's delay.
	waiting map[string]func()
}

type job[T any] struct {
	cancel context.CancelFunc
	done   chan struct{}
	result T
	err    error
}

// NewBackground returns a Background that runs at most limit operations
// at once.
func NewBackground[T any](limit int) *Background[T] {
	ctx, cancel := context.WithCancel(context.Background()) //nolint:gosec // Close calls it
	return &Background[T]{limit: limit, ctx: ctx, cancel: cancel, jobs: map[string]*job[T]{}, waiting: map[string]func(){}}
}

// Poll reports on the operation of name: when it finished, its result and
// error, once (done is true); while it runs, nothing; when there is none,
// it starts op, with the logger of ctx and a context that Cancel and Close
// end, unless as many run already (ErrBusy). A panic in op is its error.
// ended, when not nil, is called once the operation finished and Poll
// reports it, or, for a call refused with ErrBusy, once a slot frees: a
// caller polling on its retries asks again at once.
func (b *Background[T]) Poll(ctx context.Context, name string, op func(context.Context) (T, error), ended func()) (result T, done bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if j, ok := b.jobs[name]; ok {
		select {
		case <-j.done:
			delete(b.jobs, name)
			return j.result, true, j.err
		default:
			return result, false, nil
		}
	}
	if b.running >= b.limit {
		if ended != nil {
			b.waiting[name] = ended
		}
		return result, false, ErrBusy
	}
	delete(b.waiting, name)
	if err := b.ctx.Err(); err != nil {
		return result, false, fmt.Errorf("the backend is stopped: %w", err)
	}
	jobCtx, cancel := context.WithCancel(klog.NewContext(b.ctx, klog.FromContext(ctx)))
	j := &job[T]{cancel: cancel, done: make(chan struct{})}
	b.jobs[name] = j
	b.running++
	b.wg.Go(func() {
		defer cancel()
		defer func() {
			if r := recover(); r != nil {
				j.err = fmt.Errorf("panic in the background: %v", r)
			}
			b.mu.Lock()
			b.running--
			waiting := b.waiting
			b.waiting = map[string]func(){}
			b.mu.Unlock()
			close(j.done)
			if ended != nil {
				ended()
			}
			for _, wake := range waiting {
				wake()
			}
		}()
		j.result, j.err = op(jobCtx)
	})
	return result, false, nil
}

// Cancel stops the operation of name, if any, waits for it to return and
// forgets it.
func (b *Background[T]) Cancel(name string) {
	b.mu.Lock()
	j, ok := b.jobs[name]
	delete(b.jobs, name)
	b.mu.Unlock()
	if ok {
		j.cancel()
		<-j.done
	}
}

// Close stops every operation and waits for them to return; Poll starts
// none after.
func (b *Background[T]) Close() {
	b.cancel()
	b.wg.Wait()
}
