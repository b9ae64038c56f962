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

package leaderelection

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/provfleet/provfleet/internal/eventrouter"
)

// Client is the part of the Kubernetes API an elector calls: Leases, and
// Endpoints for the legacy lock; a kubernetes.Interface is one.
type Client interface {
	CoreV1() corev1client.CoreV1Interface
	CoordinationV1() coordinationv1client.CoordinationV1Interface
}

// Config configures a LeaderElector, as client-go's LeaderElectionConfig
// does; the durations have the same meaning.
type Config struct {
	Client Client
	// Lease is the namespace and name of the Lease that is the lock.
	Lease types.NamespacedName
	// Identity names this replica in the Lease.
	Identity string
	// LeaseDuration is how long a record counts after a follower saw it
	// change; a leader that did not renew within RenewDeadline steps down;
	// RetryPeriod spaces the attempts to take or renew the Lease.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// LegacyLockNamespace, if set, is where an older provisioner locks an
	// Endpoints object named like the Lease, which is read and respected;
	// empty: no such lock.
	LegacyLockNamespace string
	// Leases, optional, routes the events of an informer of the Leases of
	// Lease's namespace (NewLeaseRouter), shared by many electors. Without
	// it the elector runs an informer of its own Lease alone.
	Leases *eventrouter.Router[types.NamespacedName]
	// Sightings, optional, tell when this process first saw the record the
	// elector finds when it starts, so that it judges its expiry from then
	// (see Sightings); without them it waits a whole lease duration from
	// its own start before it takes over a Lease held by another.
	Sightings *Sightings
	// Callbacks are called as the terms start and end and the holder
	// changes; OnStartedLeading is required.
	Callbacks LeaderCallbacks
	// Clock, for tests; nil: the real clock.
	Clock clock.Clock
	// Annotate, optional, edits the annotations of the Lease (a copy, never
	// nil) before each write that takes or renews it, so that the holder
	// publishes something with its renewals at no extra request. It must
	// not block.
	Annotate func(annotations map[string]string)
	// Labels, optional, label the Lease when this elector creates it, so
	// that Leases of one kind can be told from the others by a selector.
	Labels map[string]string
}

// LeaderCallbacks are client-go's LeaderCallbacks, adapted so that the work
// of a term never outlives it: there is no OnStoppedLeading, the end of a
// term is the function OnStartedLeading returns.
type LeaderCallbacks struct {
	// OnStartedLeading starts the work of a term under ctx, which ends when
	// the term ends (leadership lost or Run's context ended), and returns a
	// function that waits for that work to end. The elector calls it once
	// ctx ended and keeps renewing the Lease until it returned, so the work
	// drains under a valid Lease and the next leader starts only after it:
	// a client-go elector calls OnStoppedLeading without waiting for the
	// work, and stops renewing at once. OnStartedLeading must not block: the
	// elector renews the Lease only once it returned.
	OnStartedLeading func(ctx context.Context) (waitStopped func())
	// OnNewLeader, optional, is called with the identity of the Lease's
	// holder each time it changes: this replica's once its term started, ""
	// once it ended and no other holder was seen. Unlike client-go's, it is
	// called synchronously, from Run's goroutine or the informer's handler
	// goroutine, and must not block.
	OnNewLeader func(identity string)
}

// NewLeaseRouter returns the router of an informer of Leases, to share as
// Config.Leases by the electors of many Leases: each hears only of its own.
func NewLeaseRouter(informer cache.SharedIndexInformer) *eventrouter.Router[types.NamespacedName] {
	return eventrouter.New(informer, leaseKeys)
}

// leaseKeys names the Lease itself.
func leaseKeys(obj any, yield func(types.NamespacedName)) {
	if lease, ok := obj.(*coordinationv1.Lease); ok {
		yield(types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name})
	}
}

// AlwaysLeader is the elector when leader election is off: one term, as
// long as Run.
type AlwaysLeader struct {
	callbacks LeaderCallbacks
}

// NewAlwaysLeader returns an elector that leads at once; it calls
// OnStartedLeading alone.
func NewAlwaysLeader(callbacks LeaderCallbacks) *AlwaysLeader {
	return &AlwaysLeader{callbacks: callbacks}
}

// Run starts the one term, waits for ctx to end, and then for the term's
// work to end.
func (a *AlwaysLeader) Run(ctx context.Context) {
	waitStopped := a.callbacks.OnStartedLeading(ctx)
	<-ctx.Done()
	waitStopped()
}

// IsLeader is always true.
func (*AlwaysLeader) IsLeader() bool { return true }

// CheckRenewal is always nil: there is no Lease to renew.
func (*AlwaysLeader) CheckRenewal() error { return nil }

// KeepLease does nothing: there is no Lease to keep.
func (*AlwaysLeader) KeepLease() {}
