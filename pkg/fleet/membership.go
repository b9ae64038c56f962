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
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/internal/eventrouter"
	"github.com/provfleet/provfleet/internal/leaderelection"
)

const (
	// replicaLeaseLabel, set to replicaLeaseKind, marks the membership Lease
	// of a manager replica among the Leases of the namespace.
	replicaLeaseLabel = "provfleet.io/lease"
	replicaLeaseKind  = "replica"
	// replicaLeasePrefix starts the name of a membership Lease; the rest is
	// a hash of the replica's identity, which may not be a valid name.
	replicaLeasePrefix = "provfleet-replica-"
	// spreadKey is the reconcile queue's key of the spread; no object name
	// holds a slash. A burst of changes queues it once.
	spreadKey = "/spread"
	// replicaLeaseGone is how long after its expiry the membership Lease of
	// a replica that is gone is deleted: each restart of a pod is a new
	// identity, whose Lease would otherwise stay forever.
	replicaLeaseGone = 10 * time.Minute
)

// LeaseTimings are the durations of a Lease, with the meaning of client-go's.
type LeaseTimings struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// replicaLeaseName is the name of the membership Lease of identity.
func replicaLeaseName(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return replicaLeasePrefix + hex.EncodeToString(sum[:8])
}

// allReplicas is the router key under which every membership Lease is
// delivered, beside its own name.
var allReplicas = types.NamespacedName{Name: replicaLeasePrefix}

// replicaLeaseKeys routes a membership Lease under its name and
// allReplicas; other Leases are not the membership's.
func replicaLeaseKeys(obj any, yield func(types.NamespacedName)) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || lease.Labels[replicaLeaseLabel] != replicaLeaseKind {
		return
	}
	yield(types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name})
	yield(allReplicas)
}

// replicaRecord is what the membership knows of one membership Lease.
type replicaRecord struct {
	spec coordinationv1.LeaseSpec
	// seenAt is when spec last changed, by the local clock: a replica is
	// live until its lease duration after that, as an elector judges a
	// Lease, whatever the clocks of the other replicas say.
	seenAt          time.Time
	uid             types.UID
	resourceVersion string
}

// holder is the replica that holds the record; "" once released.
func (r replicaRecord) holder() string { return ptr.Deref(r.spec.HolderIdentity, "") }

// expiresAt is when the record stops counting.
func (r replicaRecord) expiresAt() time.Time {
	return r.seenAt.Add(time.Duration(ptr.Deref(r.spec.LeaseDurationSeconds, 0)) * time.Second)
}

// membership is the manager replicas of the fleet and the spread of the
// ProvisionerConfigs over them. Each replica holds a membership Lease of
// its own while it runs, from once its caches synced until it stops; every
// replica follows all of them through the fleet's Lease informer, so
// finding each other costs one renewal per replica and renew interval and
// no read. The provisioners' own Leases still decide who works: the spread
// only says which replica campaigns, so replicas that see the members
// differently for a moment run a provisioner twice, one standing by, or
// not at all until they agree, never both leading.
type membership struct {
	identity  string
	namespace string
	clock     clock.Clock
	router    *eventrouter.Router[types.NamespacedName]
	elector   *leaderelection.LeaderElector
	client    leaderelection.Client

	mu       sync.Mutex
	replicas map[string]replicaRecord // by Lease name
	// live and owners are those of the last spread.
	live   []string
	owners map[string]string
}

// newMembership returns the membership of the replica identity, whose
// membership Lease in namespace client writes with timings; leases is the
// fleet's Lease informer.
func newMembership(identity, namespace string, timings LeaseTimings, client leaderelection.Client, leases cache.SharedIndexInformer) *membership {
	router := eventrouter.New(leases, replicaLeaseKeys)
	return &membership{
		identity:  identity,
		namespace: namespace,
		clock:     clock.RealClock{},
		router:    router,
		client:    client,
		replicas:  map[string]replicaRecord{},
		elector: leaderelection.NewLeaderElector(leaderelection.Config{
			Client:        client,
			Lease:         types.NamespacedName{Namespace: namespace, Name: replicaLeaseName(identity)},
			Identity:      identity,
			LeaseDuration: timings.LeaseDuration,
			RenewDeadline: timings.RenewDeadline,
			RetryPeriod:   timings.RetryPeriod,
			Leases:        router,
			Labels:        map[string]string{replicaLeaseLabel: replicaLeaseKind},
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(ctx context.Context) func() {
				klog.FromContext(ctx).Info("Joined the fleet's replicas")
				return func() {}
			}},
		}),
	}
}

// follow delivers the changes of the membership Leases to the membership,
// calling changed after each, until the returned stop; the informer must
// have synced.
func (ms *membership) follow(changed func()) (stop func() error, err error) {
	observe := func(obj any) {
		if lease, ok := obj.(*coordinationv1.Lease); ok && ms.observe(lease) {
			changed()
		}
	}
	sub, err := ms.router.Subscribe(func() []types.NamespacedName { return []types.NamespacedName{allReplicas} }, cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if lease, ok := obj.(*coordinationv1.Lease); ok {
				ms.forget(lease.Name)
				changed()
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("cannot follow the replicas' Leases: %w", err)
	}
	// Subscribed first, so that no change falls between the listing and
	// the events.
	for _, obj := range ms.router.Informer().GetStore().List() {
		replicaLeaseKeys(obj, func(key types.NamespacedName) {
			if key == allReplicas {
				ms.observe(obj.(*coordinationv1.Lease))
			}
		})
	}
	return sub.Stop, nil
}

// observe takes in a membership Lease as the informer has it, and reports
// whether the replicas may have changed: a renewal of a live replica's
// Lease changes nothing, and expiries are looked for on a timer.
func (ms *membership) observe(lease *coordinationv1.Lease) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	now := ms.clock.Now()
	record, known := ms.replicas[lease.Name]
	live := known && record.holder() != "" && now.Before(record.expiresAt())
	changed := !known || ptr.Deref(lease.Spec.HolderIdentity, "") != record.holder() || !live
	if !known || !equality.Semantic.DeepEqual(record.spec, lease.Spec) {
		record.spec, record.seenAt = *lease.Spec.DeepCopy(), now
		if !known {
			record.seenAt = firstSeenAt(lease.Spec, now)
		}
	}
	record.uid, record.resourceVersion = lease.UID, lease.ResourceVersion
	ms.replicas[lease.Name] = record
	return changed
}

// firstSeenAt is when a record first seen at now is taken to have last
// changed. Its renew time, by its holder's clock, is only trusted to tell a
// record dead for twice its duration, as a replica killed long ago leaves
// it: waiting out its duration again would leave its share unled that long
// after this replica starts. A wrong clock only makes replicas run a
// provisioner twice, the one without its Lease standing by.
func firstSeenAt(spec coordinationv1.LeaseSpec, now time.Time) time.Time {
	duration := time.Duration(ptr.Deref(spec.LeaseDurationSeconds, 0)) * time.Second
	if spec.RenewTime != nil && spec.RenewTime.Add(2*duration).Before(now) {
		return spec.RenewTime.Time
	}
	return now
}

// forget drops a deleted membership Lease.
func (ms *membership) forget(name string) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	delete(ms.replicas, name)
}

// liveReplicas returns the replicas whose membership Lease counts now,
// sorted, this one always among them (it runs, whatever the others see of
// it), and how soon the first of them expires (zero when none will).
func (ms *membership) liveReplicas() ([]string, time.Duration) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	now := ms.clock.Now()
	live := map[string]bool{ms.identity: true}
	var next time.Duration
	for _, record := range ms.replicas {
		holder, left := record.holder(), record.expiresAt().Sub(now)
		if holder == "" || left <= 0 || holder == ms.identity {
			continue
		}
		live[holder] = true
		if next == 0 || left < next {
			next = left
		}
	}
	return slices.Sorted(maps.Keys(live)), next
}

// setSpread records the spread of live replicas and returns the names whose
// owner changed to or from this replica, and whether the live replicas
// changed.
func (ms *membership) setSpread(live []string, owners map[string]string) (moved []string, replicasChanged bool) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for name, owner := range owners {
		old := ms.owners[name]
		if old != owner && (old == ms.identity || owner == ms.identity) {
			moved = append(moved, name)
		}
	}
	for name, old := range ms.owners {
		if _, ok := owners[name]; !ok && old == ms.identity {
			moved = append(moved, name)
		}
	}
	replicasChanged = !slices.Equal(ms.live, live)
	ms.live, ms.owners = live, owners
	return moved, replicasChanged
}

// owns reports whether the last spread gave the ProvisionerConfig name to
// this replica.
func (ms *membership) owns(name string) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.owners[name] == ms.identity
}

// counts returns how many replicas the last spread counted live and how
// many ProvisionerConfigs it gave this replica.
func (ms *membership) counts() (replicas, assigned int) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for _, owner := range ms.owners {
		if owner == ms.identity {
			assigned++
		}
	}
	return len(ms.live), assigned
}

// collect deletes the membership Leases of replicas gone for longer than
// replicaLeaseGone, and returns how soon the next one is due (zero for
// none). One replica does it, the first live one by identity, with a
// precondition so that a Lease renewed meanwhile stays.
func (ms *membership) collect(ctx context.Context, live []string) (next time.Duration) {
	if len(live) == 0 || live[0] != ms.identity {
		return 0
	}
	ms.mu.Lock()
	now := ms.clock.Now()
	gone := map[string]replicaRecord{}
	for name, record := range ms.replicas {
		if name == replicaLeaseName(ms.identity) {
			continue
		}
		if due := record.expiresAt().Add(replicaLeaseGone).Sub(now); due < 0 {
			gone[name] = record
		} else if next == 0 || due < next {
			next = due
		}
	}
	ms.mu.Unlock()
	for name, record := range gone {
		err := ms.client.CoordinationV1().Leases(ms.namespace).Delete(ctx, name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &record.uid, ResourceVersion: &record.resourceVersion},
		})
		switch {
		case err == nil:
			klog.FromContext(ctx).Info("Deleted the membership Lease of a replica gone", "lease", klog.KRef(ms.namespace, name), "replica", record.holder())
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			utilruntime.HandleErrorWithContext(ctx, err, "Cannot delete the membership Lease of a replica gone", "lease", klog.KRef(ms.namespace, name))
		}
	}
	return next
}

// respread spreads the ProvisionerConfigs over the live replicas again and
// queues those that came to or left this replica: the reconcile of one that
// left stops its instance, which drains and releases its Lease, as on
// SIGTERM, and the new owner's instance takes the Lease once released.
func (m *Manager) respread(ctx context.Context) {
	logger := klog.FromContext(ctx)
	live, expiry := m.membership.liveReplicas()
	all, err := m.all()
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot list ProvisionerConfigs to spread them")
		m.queue.AddRateLimited(spreadKey)
		return
	}
	names := make([]string, 0, len(all))
	for _, pc := range all {
		names = append(names, pc.Name)
	}
	moved, replicasChanged := m.membership.setSpread(live, spread(names, live))
	for _, name := range moved {
		m.queue.Add(name)
	}
	if replicasChanged {
		replicas, assigned := m.membership.counts()
		logger.Info("Fleet membership changed", "replicas", live, "count", replicas, "assigned", assigned, "moved", len(moved))
	} else if len(moved) > 0 {
		logger.V(2).Info("ProvisionerConfigs moved", "moved", moved)
	}
	// Look again when the first live replica would expire, or the Lease of
	// one gone is due for deletion.
	for _, after := range []time.Duration{expiry, m.membership.collect(ctx, live)} {
		if after > 0 {
			m.queue.AddAfter(spreadKey, after)
		}
	}
}

// owns reports whether this replica runs the ProvisionerConfig name: always
// without a membership.
func (m *Manager) owns(name string) bool {
	return m.membership == nil || m.membership.owns(name)
}
