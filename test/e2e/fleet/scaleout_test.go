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
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
	pcfginformers "github.com/provfleet/provfleet/pkg/generated/informers/externalversions"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

const (
	// scaleOutProvisioners are the ProvisionerConfigs the replicas share.
	scaleOutProvisioners = 60
	// reasonHandOver is the Leading condition's reason while a
	// ProvisionerConfig moves between replicas: the only time its
	// status.leader may be empty.
	reasonHandOver = "HandOver"
	// replicaLabel marks the replicas' membership Leases.
	replicaLabel = "provfleet.io/lease=replica"
	// killMargin is added to the membership lease duration plus a retry
	// period that a killed replica's share may take to move. It covers
	// what follows the expiry: the other replicas start the instances of
	// the share and take about twenty Leases, writes that queue on two cores
	// shared by the control plane and four managers, and the watch that
	// shows them to the test. A SIGTERMed replica's share, the same work
	// without the wait, moves in under a second in this test.
	killMargin = 2 * time.Second
	// termHandOver bounds the move of a SIGTERMed replica's share: it
	// releases its membership and its provisioners' Leases on the way out,
	// so nothing waits for a Lease to expire.
	termHandOver = 3 * time.Second
)

// TestScaleOut runs 60 ProvisionerConfigs on manager replicas that share
// them out: three, then a fourth that joins while claims keep arriving, then
// one SIGKILLed and one SIGTERMed. At each step every provisioner's Lease is
// held by a live replica, none holds more than its share (the
// ProvisionerConfigs divided by the live replicas, rounded up, plus one) and
// every status.leader names its Lease's holder; a killed replica's share
// moves once its membership Lease expired, though no provisioner's Lease
// before it expired, a terminated one's at once. All along, a status.leader
// is empty only while its Leading condition says HandOver, and in the end
// every claim has exactly one volume and one directory, made once. The
// volumes are on a shared file system, which every replica reaches, so
// whichever replica leads a provisioner provisions.
func TestScaleOut(t *testing.T) {
	f := newFixture(t)
	replicaFlags := []string{
		"--replica-lease-duration=" + leaseDuration.String(),
		"--replica-renew-deadline=" + renewDeadline.String(),
		"--replica-retry-period=" + retryPeriod.String(),
	}
	replicas := map[string]*managerproc.Process{}
	startReplica := func(id string) {
		replicas[id] = f.startManagerRole(id, replicaFlags...)
	}
	for _, id := range []string{"scale-1", "scale-2", "scale-3"} {
		startReplica(id)
	}
	var names []string
	for i := range scaleOutProvisioners {
		name := fmt.Sprintf("%s-%d", f.prefix, i)
		f.provisioner(name, func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Backend.HostPath.SharedFileSystem = true })
		names = append(names, name)
	}
	watch := f.watchFleet(names)
	f.waitSpread(watch, "three replicas", slices.Sorted(maps.Keys(replicas)))
	watch.checkLeaders()

	load := f.startClaims(names, 100*time.Millisecond)
	startReplica("scale-4")
	f.waitSpread(watch, "a fourth replica joined", slices.Sorted(maps.Keys(replicas)))

	killed := "scale-1"
	moved := f.handOver(watch, killed, func() { replicas[killed].Kill() })
	delete(replicas, killed)
	if limit := leaseDuration + retryPeriod + killMargin; moved > limit {
		t.Errorf("the share of the SIGKILLed %s moved in %v, more than %v (its membership Lease's duration, a retry period and %v)", killed, moved, limit, killMargin)
	}
	for _, early := range watch.takenEarly(killed, leaseDuration) {
		t.Error(early)
	}
	f.waitSpread(watch, "after "+killed+" was killed", slices.Sorted(maps.Keys(replicas)))

	terminated := "scale-2"
	exited := make(chan error, 1)
	moved = f.handOver(watch, terminated, func() {
		go func() { exited <- replicas[terminated].Terminate(10 * time.Second) }()
	})
	if err := <-exited; err != nil {
		t.Errorf("%s on SIGTERM: %v", terminated, err)
	}
	delete(replicas, terminated)
	if moved > termHandOver {
		t.Errorf("the share of the SIGTERMed %s moved in %v, more than %v", terminated, moved, termHandOver)
	}
	f.checkMembershipReleased(terminated)
	f.waitSpread(watch, "after "+terminated+" was terminated", slices.Sorted(maps.Keys(replicas)))

	claims := load.stop()
	f.waitBound(claims...)
	for _, violation := range watch.stopChecking() {
		t.Error(violation)
	}
	f.checkProvisionedOnce(names, claims)
}

// fleetWatch follows, through informers, who holds each provisioner's Lease,
// since when, and what the ProvisionerConfigs' status says.
type fleetWatch struct {
	configs cache.Store

	mu sync.Mutex
	// byLease maps a Lease's name to its ProvisionerConfig's.
	byLease map[string]string
	holders map[string]holding
	// checking: status.leader is held to the HandOver rule.
	checking bool
	// violations are the first maxViolations breaches of it, of broken
	// in all.
	violations []string
	broken     int
}

// holding is a Lease's holder ("" when released), when the watch first saw
// it, the record's acquire and latest renew times, and the holder before
// with its last renew time.
type holding struct {
	holder            string
	since             time.Time
	acquired, renewed time.Time
	before            string
	beforeRenewed     time.Time
}

// maxViolations bounds what the watch keeps: the first few tell the story.
const maxViolations = 20

// watchFleet starts the informers of the test's ProvisionerConfigs and their
// Leases until the test ends.
func (f *fixture) watchFleet(names []string) *fleetWatch {
	f.t.Helper()
	w := &fleetWatch{byLease: map[string]string{}, holders: map[string]holding{}}
	for _, name := range names {
		w.byLease[provisioning.LeaseName("e2e.provfleet.io/"+name)] = name
	}
	leases := informers.NewSharedInformerFactoryWithOptions(f.kube, 0, informers.WithNamespace(testenv.ManagerNamespace))
	leaseInformer := leases.Coordination().V1().Leases().Informer()
	configs := pcfginformers.NewSharedInformerFactory(f.pcfg, 0)
	configInformer := configs.Provfleet().V1alpha1().ProvisionerConfigs().Informer()
	w.configs = configInformer.GetStore()
	for informer, handle := range map[cache.SharedIndexInformer]func(any){leaseInformer: w.observeLease, configInformer: w.observeConfig} {
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    handle,
			UpdateFunc: func(_, obj any) { handle(obj) },
		}); err != nil {
			f.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(f.ctx)
	leases.Start(ctx.Done())
	configs.Start(ctx.Done())
	f.t.Cleanup(func() {
		cancel()
		leases.Shutdown()
		configs.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), leaseInformer.HasSynced, configInformer.HasSynced) {
		f.t.Fatal("the Lease and ProvisionerConfig informers never synced")
	}
	return w
}

func (w *fleetWatch) observeLease(obj any) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	name, ok := w.byLease[lease.Name]
	if !ok {
		return
	}
	current, renewed := w.holders[name], ptr.Deref(lease.Spec.RenewTime, metav1.MicroTime{}).Time
	if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); current.holder != holder || current.since.IsZero() {
		current = holding{
			holder: holder, since: now, acquired: ptr.Deref(lease.Spec.AcquireTime, metav1.MicroTime{}).Time,
			before: current.holder, beforeRenewed: current.renewed,
		}
	}
	current.renewed = renewed
	w.holders[name] = current
}

func (w *fleetWatch) observeConfig(obj any) {
	pc, ok := obj.(*v1alpha1.ProvisionerConfig)
	if !ok || pc.Status.Leader != "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	leading := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionLeading)
	if !w.checking || leading != nil && leading.Status == metav1.ConditionFalse && leading.Reason == reasonHandOver {
		return
	}
	if w.broken++; len(w.violations) < maxViolations {
		w.violations = append(w.violations, fmt.Sprintf("at %s %s had no status.leader with Leading %s",
			time.Now().Format(time.StampMilli), pc.Name, describeCondition(leading)))
	}
}

func describeCondition(c *metav1.Condition) string {
	if c == nil {
		return "missing"
	}
	return fmt.Sprintf("%s, reason %s: %s", c.Status, c.Reason, c.Message)
}

// checkLeaders holds every status from now on to the HandOver rule.
func (w *fleetWatch) checkLeaders() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checking = true
}

// stopChecking ends checkLeaders and returns what broke the rule.
func (w *fleetWatch) stopChecking() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checking = false
	if more := w.broken - len(w.violations); more > 0 {
		return append(w.violations, fmt.Sprintf("and %d more statuses without a leader outside a hand-over", more))
	}
	return w.violations
}

// holder returns who holds name's Lease, "" when nobody does.
func (w *fleetWatch) holder(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.holders[name].holder
}

// ledBy returns the ProvisionerConfigs whose Lease id holds.
func (w *fleetWatch) ledBy(id string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var led []string
	for name, h := range w.holders {
		if h.holder == id {
			led = append(led, name)
		}
	}
	slices.Sort(led)
	return led
}

// movedFrom reports whether every one of names is held by a replica other
// than from, and when the last of them was first seen so.
func (w *fleetWatch) movedFrom(names []string, from string) (time.Time, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	for _, name := range names {
		h := w.holders[name]
		if h.holder == "" || h.holder == from {
			return time.Time{}, fmt.Sprintf("%s held by %q", name, h.holder)
		}
		if h.since.After(last) {
			last = h.since
		}
	}
	return last, ""
}

// takenEarly describes each Lease taken from the replica from before the
// record it last renewed expired: two replicas may then have worked for one
// provisioner at once. The replicas share one clock, the machine's.
func (w *fleetWatch) takenEarly(from string, duration time.Duration) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var early []string
	for name, h := range w.holders {
		if h.before == from && h.holder != "" && h.acquired.Before(h.beforeRenewed.Add(duration)) {
			early = append(early, fmt.Sprintf("%s taken by %s at %s, %v after %s last renewed it, before its %v expired",
				name, h.holder, h.acquired.Format(time.StampMicro), h.acquired.Sub(h.beforeRenewed), from, duration))
		}
	}
	slices.Sort(early)
	return early
}

// status returns the ProvisionerConfig name as the informer has it.
func (w *fleetWatch) status(name string) v1alpha1.ProvisionerConfigStatus {
	obj, exists, err := w.configs.GetByKey(name)
	if err != nil || !exists {
		return v1alpha1.ProvisionerConfigStatus{}
	}
	return obj.(*v1alpha1.ProvisionerConfig).Status
}

// waitSpread waits until every provisioner's Lease is held by one of live,
// none holds more than its share plus one, and each status.leader names the
// holder of its Lease.
func (f *fixture) waitSpread(w *fleetWatch, when string, live []string) {
	f.t.Helper()
	n := len(w.byLease)
	most := (n+len(live)-1)/len(live) + 1
	what := fmt.Sprintf("%s, %d provisioners led by %v, at most %d each, as their status says", when, n, live, most)
	f.eventually(what, func(context.Context) (bool, error) {
		counts := map[string]int{}
		for _, name := range w.byLease {
			holder := w.holder(name)
			if !slices.Contains(live, holder) {
				return false, fmt.Errorf("%s held by %q", name, holder)
			}
			if leader := w.status(name).Leader; leader != holder {
				return false, fmt.Errorf("%s held by %s, its status.leader is %q", name, holder, leader)
			}
			counts[holder]++
		}
		for id, count := range counts {
			if count > most {
				return false, fmt.Errorf("%s leads %d: %v", id, count, counts)
			}
		}
		return true, nil
	})
}

// handOver stops replica id with stop and returns how long after it every
// provisioner id led was held by another replica.
func (f *fixture) handOver(w *fleetWatch, id string, stop func()) time.Duration {
	f.t.Helper()
	led := w.ledBy(id)
	if len(led) == 0 {
		f.t.Fatalf("%s leads no provisioner", id)
	}
	start := time.Now()
	stop()
	var moved time.Time
	f.eventually(fmt.Sprintf("the %d provisioners %s led held by other replicas", len(led), id), func(context.Context) (bool, error) {
		var waiting string
		moved, waiting = w.movedFrom(led, id)
		if waiting != "" {
			return false, fmt.Errorf("%s", waiting)
		}
		return true, nil
	})
	took := moved.Sub(start)
	f.t.Logf("the %d provisioners %s led moved in %v", len(led), id, took)
	return took
}

// checkMembershipReleased fails the test if a membership Lease still names
// id, which exited on SIGTERM.
func (f *fixture) checkMembershipReleased(id string) {
	f.t.Helper()
	leases, err := f.kube.CoordinationV1().Leases(testenv.ManagerNamespace).List(f.ctx, metav1.ListOptions{LabelSelector: replicaLabel})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, lease := range leases.Items {
		if ptr.Deref(lease.Spec.HolderIdentity, "") == id {
			f.t.Errorf("membership Lease %s still held by %s after it exited on SIGTERM", lease.Name, id)
		}
	}
}

// claimLoad creates claims over the provisioners until stopped.
type claimLoad struct {
	done   chan struct{}
	cancel context.CancelFunc
	f      *fixture

	// Written by the loop, read once it ended.
	claims []string
	errs   []error
}

// startClaims creates a claim every interval, each of the next class of
// classes in turn, until stop.
func (f *fixture) startClaims(classes []string, interval time.Duration) *claimLoad {
	ctx, cancel := context.WithCancel(f.ctx)
	l := &claimLoad{done: make(chan struct{}), cancel: cancel, f: f}
	go func() {
		defer close(l.done)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for i := 0; ; i++ {
			name := fmt.Sprintf("load-%d", i)
			claim := f.newClaim(name, classes[i%len(classes)])
			if _, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
				if ctx.Err() == nil {
					l.errs = append(l.errs, fmt.Errorf("cannot create claim %s: %w", name, err))
				}
			} else {
				l.claims = append(l.claims, name)
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return l
}

// stop ends the load and returns the claims it created.
func (l *claimLoad) stop() []string {
	l.f.t.Helper()
	l.cancel()
	<-l.done
	for _, err := range l.errs {
		l.f.t.Error(err)
	}
	l.f.t.Logf("%d claims created while the replicas changed", len(l.claims))
	return l.claims
}

// checkProvisionedOnce checks that each claim has exactly one volume, of its
// class's provisioner, that each provisioner's folder holds one directory
// for each of its volumes and no other, and that no provisioning failed on
// a volume that existed already.
func (f *fixture) checkProvisionedOnce(names, claims []string) {
	f.t.Helper()
	want := map[string][]string{}
	for i, claim := range claims {
		want[claim] = []string{"e2e.provfleet.io/" + names[i%len(names)]}
	}
	if diff := cmp.Diff(want, f.volumesOf()); diff != "" {
		f.t.Errorf("PVs per claim (-want +got):\n%s", diff)
	}
	pvs, err := f.kube.CoreV1().PersistentVolumes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	wantDirs, gotDirs := map[string][]string{}, map[string][]string{}
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == f.namespace {
			wantDirs[pv.Spec.StorageClassName] = append(wantDirs[pv.Spec.StorageClassName], pv.Name)
		}
	}
	for _, name := range names {
		slices.Sort(wantDirs[name])
		if dirs := volumeDirectories(f.t, filepath.Join(f.root, name)); len(dirs) > 0 {
			gotDirs[name] = dirs
		}
	}
	if diff := cmp.Diff(wantDirs, gotDirs); diff != "" {
		f.t.Errorf("volume directories per provisioner (-PVs +directories):\n%s", diff)
	}
	events, err := f.kube.CoreV1().Events(f.namespace).List(f.ctx, metav1.ListOptions{FieldSelector: "reason=ProvisioningFailed"})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, "exist") {
			f.t.Errorf("claim %s: %s", e.InvolvedObject.Name, e.Message)
		}
	}
	if len(events.Items) > 0 {
		f.t.Logf("%d ProvisioningFailed Events", len(events.Items))
	}
}
