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
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/internal/workqueue"
)

// roomWaits are the claims a backend refused for want of room (ErrNoRoom),
// which wait for room to free up.
type roomWaits struct {
	// backoff paces the retries of each refused claim as failures are
	// paced, with a count of its own: the failure threshold's count stays
	// as it was.
	backoff *workqueue.RetryLimiter[claimKey]

	mu     sync.Mutex
	claims map[claimKey]struct{}
	// frees counts the calls of freed, so that a refusal can tell whether
	// room may have freed up while the backend refused.
	frees uint64
}

func newRoomWaits(l workqueue.RateLimits) *roomWaits {
	return &roomWaits{backoff: workqueue.NewRetryLimiter[claimKey](l), claims: map[claimKey]struct{}{}}
}

// refused records that key was refused for want of room and returns when to
// try it again, unless room frees up before.
func (w *roomWaits) refused(key claimKey) time.Duration {
	w.mu.Lock()
	w.claims[key] = struct{}{}
	w.mu.Unlock()
	return w.backoff.When(key)
}

// forget drops key, which no longer waits: its sync succeeded or its claim
// is gone.
func (w *roomWaits) forget(key claimKey) {
	w.mu.Lock()
	delete(w.claims, key)
	w.mu.Unlock()
	w.backoff.Forget(key)
}

// freed returns the claims waiting for room and stops counting them as
// waiting: each is to be tried at once, and waits again if it is refused
// again, its backoff grown.
func (w *roomWaits) freed() []claimKey {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]claimKey, 0, len(w.claims))
	for key := range w.claims {
		keys = append(keys, key)
	}
	clear(w.claims)
	w.frees++
	return keys
}

// generation changes whenever room may have freed up.
func (w *roomWaits) generation() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.frees
}

// claimWaits reports whether the failure err of the claim key is waited out
// rather than counted towards the failure threshold and, if so, when to try
// the claim again and why: the backend is unavailable, as its probes or its
// error say, has no room for it, or still works on it in the background (a
// long copy is no failure, however many times it is asked after).
func (c *Controller) claimWaits(key claimKey, err error) (retryIn time.Duration, why string, waits bool) {
	if retryIn, why, waits := c.backendWaits(); waits {
		return retryIn, why, waits
	}
	if _, working := c.inProgress.Load(key.UID); working {
		return c.room.backoff.When(key), "working in the background", true
	}
	switch {
	case errors.Is(err, ErrNoRoom):
		return c.room.refused(key), "no room", true
	case errors.Is(err, ErrBackendUnavailable):
		// Before a probe saw it, or between probes: paced as refusals
		// are, the backoff dropped once the claim syncs.
		return c.room.backoff.When(key), "backend unavailable", true
	}
	return 0, "", false
}

// deleteBackend asks the backend to delete the backend volume of volume,
// under the delete deadline. Once it did, the claims waiting for room are
// tried at once: the backend may count that volume against its room.
func (c *Controller) deleteBackend(ctx context.Context, volume *corev1.PersistentVolume) error {
	err := c.volumeCall(ctx, "delete", func(ctx context.Context) error { return c.provisioner.Delete(ctx, volume) })
	if err == nil {
		c.roomFreed()
	}
	return err
}

// roomFreed queues the claims waiting for room in the term under way at once,
// rather than after their backoff: a backend volume was deleted or a
// PersistentVolume of this provisioner is gone, either of which a backend
// may count against its room. Without a term the next one queues every claim.
func (c *Controller) roomFreed() {
	c.mu.Lock()
	t := c.term
	c.mu.Unlock()
	if t == nil {
		return
	}
	for _, key := range c.room.freed() {
		t.claims.queue.Add(key)
	}
}
