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
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// claimCall runs a backend call about a claim (Provision and the questions
// asked before it) under the provision deadline, Timeouts.Provision.
func (c *Controller) claimCall(ctx context.Context, operation string, call func(ctx context.Context) error) error {
	return c.guard(ctx, operation, c.config().Timeouts.Provision, call)
}

// volumeCall runs a backend call about a volume (Delete, ShouldDelete and a
// Reclaimer's calls) under the delete deadline, Timeouts.Delete.
func (c *Controller) volumeCall(ctx context.Context, operation string, call func(ctx context.Context) error) error {
	return c.guard(ctx, operation, c.config().Timeouts.Delete, call)
}

// guard runs one backend call under its deadline, turning a panic into an
// error of that call alone. A call that ignores its deadline is reported by
// Stuck until it returns.
func (c *Controller) guard(ctx context.Context, operation string, timeout time.Duration, call func(ctx context.Context) error) (err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer c.watchDeadline(ctx, operation, timeout)()
	defer func() {
		if r := recover(); r != nil {
			c.metrics.countPanic(c.name, operation)
			err = fmt.Errorf("backend panicked during %s: %v", operation, r)
			utilruntime.HandleErrorWithContext(ctx, err, "Recovered from a backend panic", "operation", operation)
		}
	}()
	err = call(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("backend did not finish %s within %v: %w", operation, timeout, err)
	}
	return err
}

// backendCall is a backend call that outlived its deadline.
type backendCall struct {
	operation string
	deadline  time.Time
}

// overdueGrace is how long after its deadline a call counts as overdue: one
// that honours its deadline has returned by then.
const overdueGrace = time.Second

// watchDeadline counts a backend call as overdue once timeout passed, until
// the returned function tells that it returned.
func (c *Controller) watchDeadline(ctx context.Context, operation string, timeout time.Duration) (returned func()) {
	logger := klog.FromContext(ctx)
	call := &backendCall{operation: operation, deadline: time.Now().Add(timeout)}
	// mu orders the timer's report before the return's, whichever runs first.
	var mu sync.Mutex
	done, late := false, false
	timer := time.AfterFunc(timeout+overdueGrace, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		late = true
		logger.Info("Backend call outlived its deadline and has not returned", "operation", operation, "timeout", timeout)
		c.markOverdue(call)
	})
	return func() {
		timer.Stop()
		mu.Lock()
		defer mu.Unlock()
		done = true
		if late {
			logger.Info("Overdue backend call returned", "operation", operation, "overdue", time.Since(call.deadline).Round(time.Millisecond))
			c.clearOverdue(call)
		}
	}
}

// markOverdue counts call among the calls that outlived their deadline.
func (c *Controller) markOverdue(call *backendCall) {
	c.overdueMu.Lock()
	c.overdue[call] = struct{}{}
	c.overdueMu.Unlock()
	c.metrics.addOverdue(c.name, call.operation)
	c.notifyStuck()
}

// clearOverdue stops counting call, which returned, as overdue.
func (c *Controller) clearOverdue(call *backendCall) {
	c.overdueMu.Lock()
	delete(c.overdue, call)
	c.overdueMu.Unlock()
	c.metrics.removeOverdue(c.name, call.operation)
	c.notifyStuck()
}

func (c *Controller) notifyStuck() {
	if c.onStuck != nil {
		c.onStuck()
	}
}
