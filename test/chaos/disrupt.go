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

package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv"
)

// partition is one process cut off from the apiserver: until Start plus
// Lease it may still act on what it led; after that, never.
type partition struct {
	Identity   string
	Start, End time.Time
	Lease      time.Duration
}

// disruptor carries out the schedule's disruptions.
type disruptor struct {
	c            *cluster
	provisioners []*provisioner
	progress     func(format string, args ...any)

	wg          sync.WaitGroup
	partitionMu sync.Mutex // one partition at a time
	configMu    map[string]*sync.Mutex

	mu         sync.Mutex
	counts     map[string]int
	partitions []partition
	failures   []string // disruptions the system made fail: a SIGTERM not obeyed, a config never deleted
	agentGen   map[string]int
}

func newDisruptor(c *cluster, provisioners []*provisioner, progress func(string, ...any)) *disruptor {
	d := &disruptor{c: c, provisioners: provisioners, progress: progress, configMu: map[string]*sync.Mutex{}, counts: map[string]int{}, agentGen: map[string]int{}}
	for _, p := range provisioners {
		d.configMu[p.name] = &sync.Mutex{}
	}
	return d
}

// run starts each event of the schedule at its time, measured from start,
// until ctx ends; wait waits for the disruptions under way to end.
func (d *disruptor) run(ctx context.Context, start time.Time, events []event) {
	for _, e := range events {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(e.At))):
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.carryOut(ctx, e)
		}()
	}
}

func (d *disruptor) wait() { d.wg.Wait() }

func (d *disruptor) count(what string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.counts[what]++
}

func (d *disruptor) fail(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failures = append(d.failures, fmt.Sprintf(format, args...))
}

func (d *disruptor) carryOut(ctx context.Context, e event) {
	switch e.Kind {
	case kindKill:
		d.kill(ctx, e)
	case kindRoll:
		d.roll(ctx, e)
	case kindPartition:
		d.partition(ctx, e)
	case kindNFSRestart:
		s := d.c.nfs[int(e.Pick*float64(len(d.c.nfs)))]
		down := between(e.Shape, 500*time.Millisecond, 4*time.Second)
		d.progress("restarting an NFS server, down for %v", down.Round(time.Millisecond))
		if err := s.restart(ctx, down); err != nil {
			d.fail("cannot restart an NFS server: %v", err)
			return
		}
		d.count("NFS server restarted")
	case kindConfig:
		d.changeConfig(ctx, e)
	case kindNode:
		d.removeNode(ctx, e)
	}
}

// kill SIGKILLs a manager or agent drawn at random and starts it again
// after a moment; an agent whose node got another meanwhile (a rolling
// update) is not started again, as a DaemonSet would not.
func (d *disruptor) kill(ctx context.Context, e event) {
	all := d.c.all()
	if len(all) == 0 {
		return
	}
	identity := all[int(e.Pick*float64(len(all)))]
	p := d.c.kill(identity)
	if p == nil {
		return
	}
	what := "manager"
	if p.node != "" {
		what = "node agent"
	}
	down := between(e.Shape, 500*time.Millisecond, 3*time.Second)
	d.progress("SIGKILL %s %s, restarted after %v", what, identity, down.Round(time.Millisecond))
	d.count("SIGKILL " + what)
	select {
	case <-ctx.Done():
		return
	case <-time.After(down):
	}
	var err error
	switch {
	case p.node == "":
		err = d.c.startManager(identity)
	case len(d.c.agentsOf(p.node)) == 0:
		err = d.c.startAgent(identity, p.node)
	}
	if err != nil {
		d.fail("cannot restart %s: %v", identity, err)
	}
}

// roll replaces the agents of a node by a new one that starts first: for
// a few seconds two agents of the node run at once, then the old ones are
// SIGKILLed or SIGTERMed.
func (d *disruptor) roll(ctx context.Context, e event) {
	node := nodeNames[int(e.Pick*float64(len(nodeNames)))]
	old := d.c.agentsOf(node)
	d.mu.Lock()
	d.agentGen[node]++
	identity := fmt.Sprintf("%s-agent-%d", node, d.agentGen[node])
	d.mu.Unlock()
	d.progress("rolling update of node %s: %s starts beside %v", node, identity, old)
	if err := d.c.startAgent(identity, node); err != nil {
		d.fail("cannot start agent %s: %v", identity, err)
		return
	}
	if p := d.c.process(identity); p != nil {
		// The new agent may come up slowly through faults; the old one
		// goes anyway, as a rolling update's deadline would have it.
		_ = p.proc.WaitReady(ctx, time.Minute)
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(between(e.Shape, 2*time.Second, 6*time.Second)):
	}
	for _, id := range old {
		if e.Shape < 0.5 {
			d.c.kill(id)
			d.count("rolling update, old agent SIGKILLed")
			continue
		}
		if err := d.c.terminate(id); err != nil {
			d.fail("rolling update of %s: %v", node, err)
		}
		d.count("rolling update, old agent SIGTERMed")
	}
}

// partition cuts a process off from the apiserver for two to three times
// its Lease: most often the manager that leads the most provisioners,
// else a node agent.
func (d *disruptor) partition(ctx context.Context, e event) {
	if !d.partitionMu.TryLock() {
		return
	}
	defer d.partitionMu.Unlock()
	identity, lease := d.leader(ctx), leaseDuration
	if identity == "" || e.Pick >= 0.7 {
		agents := d.c.agents()
		if len(agents) == 0 {
			return
		}
		identity, lease = agents[int(e.Shape*float64(len(agents)))], nodeLeaseDuration
	}
	length := 2*lease + between(e.Shape, 0, lease)
	d.progress("partition of %s for %v", identity, length.Round(time.Millisecond))
	if err := d.c.proxy.Partition(identity, true); err != nil {
		d.fail("cannot cut %s off: %v", identity, err)
		return
	}
	start := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(length):
	}
	if err := d.c.proxy.Partition(identity, false); err != nil {
		d.fail("cannot end the partition of %s: %v", identity, err)
	}
	d.mu.Lock()
	d.partitions = append(d.partitions, partition{Identity: identity, Start: start, End: time.Now(), Lease: lease})
	d.mu.Unlock()
	if strings.Contains(identity, "-agent") {
		d.count("partition of a node agent")
	} else {
		d.count("partition of a leading manager")
	}
}

// leader is the running manager that holds the most provisioners'
// Leases; empty when none holds one.
func (d *disruptor) leader(ctx context.Context) string {
	leases, err := d.c.kube.CoordinationV1().Leases(testenv.ManagerNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	running := map[string]bool{}
	for _, id := range d.c.managers() {
		running[id] = true
	}
	held := map[string]int{}
	best := ""
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity == nil || !running[*l.Spec.HolderIdentity] {
			continue
		}
		id := *l.Spec.HolderIdentity
		held[id]++
		if best == "" || held[id] > held[best] || (held[id] == held[best] && id < best) {
			best = id
		}
	}
	return best
}

// changeConfig edits a ProvisionerConfig (its workers and retry delay),
// pauses it for a while, or deletes it and creates it again. Restoring goes
// on after the run's context ends: a config is never left paused or
// deleted.
func (d *disruptor) changeConfig(ctx context.Context, e event) {
	p := d.provisioners[int(e.Pick*float64(len(d.provisioners)))]
	mu := d.configMu[p.name]
	mu.Lock()
	defer mu.Unlock()
	switch {
	case e.Shape < 0.4:
		d.editConfig(ctx, p)
	case e.Shape < 0.7:
		d.pauseConfig(ctx, p, between((e.Shape-0.4)/0.3, 5*time.Second, 15*time.Second))
	default:
		d.recreateConfig(ctx, p, between((e.Shape-0.7)/0.3, 3*time.Second, 10*time.Second))
	}
}

// updateConfig changes p's spec, retrying on conflicts.
func (d *disruptor) updateConfig(ctx context.Context, p *provisioner, change func(spec *v1alpha1.ProvisionerConfigSpec)) error {
	configs := d.c.pcfg.ProvfleetV1alpha1().ProvisionerConfigs()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pc, err := configs.Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&pc.Spec)
		_, err = configs.Update(ctx, pc, metav1.UpdateOptions{})
		return err
	})
}

// editConfig toggles p's workers between 2 and 3 and its longest retry
// delay between 5s and 8s.
func (d *disruptor) editConfig(ctx context.Context, p *provisioner) {
	d.progress("editing ProvisionerConfig %s", p.name)
	err := d.updateConfig(ctx, p, func(spec *v1alpha1.ProvisionerConfigSpec) {
		spec.Workers = 5 - spec.Workers
		if spec.Retry.MaxDelay != nil {
			spec.Retry.MaxDelay.Duration = 13*time.Second - spec.Retry.MaxDelay.Duration
		}
	})
	if err != nil {
		d.fail("cannot edit ProvisionerConfig %s: %v", p.name, err)
		return
	}
	d.count("ProvisionerConfig edited")
}

// pauseConfig pauses p for pause, then resumes it.
func (d *disruptor) pauseConfig(ctx context.Context, p *provisioner, pause time.Duration) {
	d.progress("pausing ProvisionerConfig %s for %v", p.name, pause.Round(time.Millisecond))
	if err := d.updateConfig(ctx, p, func(spec *v1alpha1.ProvisionerConfigSpec) { spec.Paused = true }); err != nil {
		d.fail("cannot pause ProvisionerConfig %s: %v", p.name, err)
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(pause):
	}
	if err := d.updateConfig(context.WithoutCancel(ctx), p, func(spec *v1alpha1.ProvisionerConfigSpec) { spec.Paused = false }); err != nil {
		d.fail("cannot resume ProvisionerConfig %s: %v", p.name, err)
		return
	}
	d.count("ProvisionerConfig paused and resumed")
}

// recreateConfig deletes p's ProvisionerConfig, waits until it is gone,
// and creates it again after away.
func (d *disruptor) recreateConfig(ctx context.Context, p *provisioner, away time.Duration) {
	configs := d.c.pcfg.ProvfleetV1alpha1().ProvisionerConfigs()
	restore := context.WithoutCancel(ctx)
	d.progress("deleting ProvisionerConfig %s, back after %v", p.name, away.Round(time.Millisecond))
	if err := configs.Delete(ctx, p.name, metav1.DeleteOptions{}); err != nil {
		d.fail("cannot delete ProvisionerConfig %s: %v", p.name, err)
		return
	}
	gone := func(ctx context.Context) (bool, error) {
		_, err := configs.Get(ctx, p.name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}
	if err := wait.PollUntilContextTimeout(restore, 500*time.Millisecond, 2*time.Minute, true, gone); err != nil {
		d.fail("ProvisionerConfig %s was never gone after its deletion: %v", p.name, err)
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(away):
	}
	if _, err := configs.Create(restore, d.c.spec(p), metav1.CreateOptions{}); err != nil {
		d.fail("cannot create ProvisionerConfig %s again: %v", p.name, err)
		return
	}
	d.count("ProvisionerConfig deleted and created again")
}

// removeNode deletes a Node, as a cluster autoscaler does, and creates it
// again a while later, as a node that rejoins under its name.
func (d *disruptor) removeNode(ctx context.Context, e event) {
	node := nodeNames[int(e.Pick*float64(len(nodeNames)))]
	if !d.c.remove(node) {
		return
	}
	away := between(e.Shape, 10*time.Second, 30*time.Second)
	d.progress("removing Node %s, back after %v", node, away.Round(time.Millisecond))
	defer d.c.restore(node)
	if err := d.c.kube.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		d.fail("cannot delete Node %s: %v", node, err)
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(away):
	}
	if err := d.c.createNode(context.WithoutCancel(ctx), node); err != nil {
		d.fail("%v", err)
		return
	}
	d.count("Node removed and returned")
}

// createNode creates Node node with its host name label.
func (c *cluster) createNode(ctx context.Context, node string) error {
	object := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{corev1.LabelHostname: node}}}
	if _, err := c.kube.CoreV1().Nodes().Create(ctx, object, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create Node %s again: %w", node, err)
	}
	return nil
}
