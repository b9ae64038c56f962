package provisioning

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// elector decides when a controller may work. It is the seam behind which the
// Lease-polling elector can be replaced by another scheme.
type elector interface {
	// Run campaigns until ctx ends. Each time it wins, it calls lead with a
	// context that ends when leadership is lost or ctx ends, and it keeps the
	// leadership until lead returned, so work never outlives the term.
	Run(ctx context.Context, lead func(ctx context.Context))
	// IsLeader reports whether lead is running.
	IsLeader() bool
	// Healthy returns an error when this instance leads but its renewal is
	// overdue.
	Healthy() error
}

// alwaysLeader is the elector when leader election is off: one term, as long
// as Run.
type alwaysLeader struct{}

func (alwaysLeader) Run(ctx context.Context, lead func(context.Context)) { lead(ctx) }
func (alwaysLeader) IsLeader() bool                                      { return true }
func (alwaysLeader) Healthy() error                                      { return nil }

// leaseElector campaigns for a coordination.k8s.io Lease with client-go's
// elector, again after every lost term, until its context ends.
type leaseElector struct {
	client   kubernetes.Interface
	name     string
	cfg      LeaderElectionConfig
	onChange func(holderIdentity string)

	// health is the one health check of this elector; every term's client-go
	// elector reports to it.
	health  *leaderelection.HealthzAdaptor
	leading atomic.Bool

	reportMu sync.Mutex
	reported string
}

func newLeaseElector(client kubernetes.Interface, provisionerName string, cfg LeaderElectionConfig, onChange func(string)) *leaseElector {
	return &leaseElector{
		client:   client,
		name:     provisionerName,
		cfg:      cfg,
		onChange: onChange,
		health:   leaderelection.NewLeaderHealthzAdaptor(cfg.RenewDeadline),
	}
}

func (e *leaseElector) IsLeader() bool { return e.leading.Load() }

func (e *leaseElector) Healthy() error {
	if err := e.health.Check(nil); err != nil {
		return fmt.Errorf("cannot renew the lease of %q: %w", e.name, err)
	}
	return nil
}

func (e *leaseElector) Run(ctx context.Context, lead func(context.Context)) {
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		if err := e.term(ctx, lead); err != nil {
			logger.Error(err, "Leader election failed")
			// Only a configuration error ends up here: wait, do not spin.
			select {
			case <-ctx.Done():
			case <-time.After(e.cfg.RetryPeriod):
			}
		}
	}
}

// term runs one campaign of client-go's single-use elector: acquire, lead,
// release.
func (e *leaseElector) term(ctx context.Context, lead func(context.Context)) error {
	// The elector's context outlives ctx until lead returned, so that
	// ReleaseOnCancel gives the lease up only after the work stopped.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	started := make(chan context.Context, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: LeaseName(e.name)},
			Client:     e.client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: e.cfg.Identity},
		},
		LeaseDuration:   e.cfg.LeaseDuration,
		RenewDeadline:   e.cfg.RenewDeadline,
		RetryPeriod:     e.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.name,
		WatchDog:        e.health,
		Callbacks: leaderelection.LeaderCallbacks{
			// Called once per elector; the buffer keeps the callback from blocking.
			OnStartedLeading: func(leaderCtx context.Context) { started <- leaderCtx },
			OnStoppedLeading: func() {},
			OnNewLeader:      e.report,
		},
	})
	if err != nil {
		return fmt.Errorf("cannot create the leader elector: %w", err)
	}
	e.health.SetLeaderElection(le)
	done := make(chan struct{})
	go func() {
		defer close(done)
		le.Run(electCtx)
	}()
	select {
	case <-ctx.Done():
	case <-done:
	case leaderCtx := <-started:
		e.leadTerm(ctx, leaderCtx, lead)
	}
	stopElecting()
	<-done
	return nil
}

func (e *leaseElector) leadTerm(ctx, leaderCtx context.Context, lead func(context.Context)) {
	termCtx, cancel := context.WithCancel(leaderCtx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	e.leading.Store(true)
	e.report(e.cfg.Identity)
	lead(termCtx)
	e.leading.Store(false)
	e.dropSelf()
}

// report tells the owner about a new lease holder, once per change.
func (e *leaseElector) report(holderIdentity string) {
	e.reportMu.Lock()
	defer e.reportMu.Unlock()
	e.reportLocked(holderIdentity)
}

// dropSelf reports that this instance no longer holds the lease, unless a
// newer holder was reported already.
func (e *leaseElector) dropSelf() {
	e.reportMu.Lock()
	defer e.reportMu.Unlock()
	if e.reported == e.cfg.Identity {
		e.reportLocked("")
	}
}

func (e *leaseElector) reportLocked(holderIdentity string) {
	if holderIdentity == e.reported {
		return
	}
	e.reported = holderIdentity
	if e.onChange != nil {
		e.onChange(holderIdentity)
	}
}
