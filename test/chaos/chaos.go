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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/chaoshistory"
	"github.com/provfleet/provfleet/internal/testenv/faultproxy"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// runner is one run.
type runner struct {
	opts         Options
	c            *cluster
	w            *workload
	d            *disruptor
	provisioners []*provisioner
	result       *Result

	// progressMu serialises progress lines: disruptions run at once.
	progressMu sync.Mutex
}

// Run runs the system under faults for opts.Duration, turns the faults
// off, waits for it to converge and checks it. The error is for a run
// that could not be carried out; a run whose checks fail returns a Result
// that did not pass.
func Run(ctx context.Context, opts Options) (*Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &runner{opts: opts, result: &Result{Options: opts, Started: time.Now()}}
	if r.c, err = startCluster(ctx, opts); err != nil {
		return nil, err
	}
	defer r.c.stop()
	if err := r.setUp(ctx); err != nil {
		return nil, err
	}
	if err := r.chaos(ctx); err != nil {
		return nil, err
	}
	if err := r.converge(ctx); err != nil {
		return nil, err
	}
	if err := r.check(ctx); err != nil {
		return nil, err
	}
	r.result.Took = time.Since(r.result.Started)
	return r.result, nil
}

func (r *runner) progress(format string, args ...any) {
	if r.opts.Progress != nil {
		elapsed := time.Since(r.result.Started).Round(time.Second)
		r.progressMu.Lock()
		defer r.progressMu.Unlock()
		fmt.Fprintf(r.opts.Progress, "%8v  %s\n", elapsed, fmt.Sprintf(format, args...))
	}
}

// setUp creates the provisioners, starts the managers and one agent per
// node, and waits until every provisioner is Ready.
func (r *runner) setUp(ctx context.Context) error {
	var err error
	if r.provisioners, err = r.c.provisioners(ctx); err != nil {
		return err
	}
	for _, p := range r.provisioners {
		if err := r.c.create(ctx, p); err != nil {
			return err
		}
	}
	if err := r.startFleet(ctx); err != nil {
		return err
	}
	var notReady []string
	ready := func(ctx context.Context) (bool, error) {
		notReady = nil
		for _, p := range r.provisioners {
			pc, err := r.c.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(ctx, p.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if c := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
				notReady = append(notReady, fmt.Sprintf("%s: %+v", p.name, c))
			}
		}
		return len(notReady) == 0, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, ready); err != nil {
		return fmt.Errorf("the provisioners never got Ready: %w: %s", err, strings.Join(notReady, "; "))
	}
	if r.w, err = newWorkload(r.c, r.provisioners); err != nil {
		return err
	}
	r.d = newDisruptor(r.c, r.provisioners, r.progress)
	r.progress("%d managers, %d node agents and %d provisioners are up", r.opts.Managers, len(nodeNames), len(r.provisioners))
	return nil
}

// startFleet starts the managers and, for each node with none, an agent,
// and waits until each is ready.
func (r *runner) startFleet(ctx context.Context) error {
	for i := range r.opts.Managers {
		identity := fmt.Sprintf("manager-%d", i+1)
		if r.c.process(identity) == nil {
			if err := r.c.startManager(identity); err != nil {
				return err
			}
		}
	}
	for _, node := range nodeNames {
		if len(r.c.agentsOf(node)) == 0 {
			if err := r.c.startAgent(node+"-agent-0", node); err != nil {
				return err
			}
		}
	}
	for _, id := range r.c.all() {
		if p := r.c.process(id); p != nil {
			if err := p.proc.WaitReady(ctx, 3*time.Minute); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
		}
	}
	return nil
}

// chaos runs the workload and the disruptions for the run's duration, then
// waits for the disruptions under way to end.
func (r *runner) chaos(ctx context.Context) error {
	events := schedule(r.opts.Seed, r.opts.Duration, r.opts.Every)
	r.progress("faults on for %v: %d disruptions scheduled", r.opts.Duration, len(events))
	if err := r.c.proxy.SetRates(faultproxy.Uniform(r.opts.APIFaults)); err != nil {
		return err
	}
	chaosCtx, cancel := context.WithTimeout(ctx, r.opts.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { r.w.run(chaosCtx) })
	r.d.run(chaosCtx, start, events)
	<-chaosCtx.Done()
	wg.Wait()
	r.d.wait()
	return nil
}

// converge turns the faults off, replaces every process by one without
// store faults (each SIGTERMed process must exit 0), and waits until the
// end state passes its checks or ConvergeTimeout passes.
func (r *runner) converge(ctx context.Context) error {
	r.progress("faults off; replacing every process by one without store faults")
	if err := r.c.proxy.SetRates(faultproxy.Rates{}); err != nil {
		return err
	}
	for _, s := range r.c.nfs {
		s.on.Store(false)
	}
	r.c.mu.Lock()
	r.c.storeOff = true
	r.c.mu.Unlock()
	for _, id := range r.c.all() {
		if err := r.c.terminate(id); err != nil {
			r.d.fail("at the end of the faults: %v", err)
		}
	}
	if err := r.startFleet(ctx); err != nil {
		return err
	}
	r.progress("waiting up to %v for the system to converge", r.opts.ConvergeTimeout)
	start := time.Now()
	var checks []Check
	converged := func(ctx context.Context) (bool, error) {
		r.schedule(ctx)
		s, err := r.observe(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // a folder being renamed while listed: look again
		}
		live, _, _ := r.w.live()
		checks = r.checkState(s, live)
		for _, c := range checks {
			if !c.Passed() {
				return false, nil
			}
		}
		return true, nil
	}
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, r.opts.ConvergeTimeout, true, converged)
	if err != nil && !wait.Interrupted(err) {
		return err
	}
	r.result.Converged = err == nil
	r.result.ConvergedIn = time.Since(start)
	r.result.Checks = append(r.result.Checks, checks...)
	return nil
}

// schedule gives each pending claim of a class that waits for a consumer
// and has no node, which the provisioner takes off a claim it cannot
// place, a present node, as the scheduler would for its Pod.
func (r *runner) schedule(ctx context.Context) {
	live, _, _ := r.w.live()
	nodes := r.c.presentNodes()
	for i, cl := range live {
		if cl.provisioner.mode != storagev1.VolumeBindingWaitForFirstConsumer {
			continue
		}
		pvc, err := r.c.kube.CoreV1().PersistentVolumeClaims(cl.namespace).Get(ctx, cl.name, metav1.GetOptions{})
		if err != nil || pvc.Spec.VolumeName != "" || pvc.Annotations[provisioning.AnnSelectedNode] != "" {
			continue
		}
		if pvc.Annotations == nil {
			pvc.Annotations = map[string]string{}
		}
		pvc.Annotations[provisioning.AnnSelectedNode] = nodes[i%len(nodes)]
		_, _ = r.c.kube.CoreV1().PersistentVolumeClaims(cl.namespace).Update(ctx, pvc, metav1.UpdateOptions{})
	}
}

// check reads the histories and checks them, then stops every process,
// each of which must exit 0 on SIGTERM, and checks the processes.
func (r *runner) check(ctx context.Context) error {
	s, err := r.observe(ctx)
	if err != nil {
		return err
	}
	creates, err := readPVCreates(r.c.env.AuditLogPath())
	if err != nil {
		return err
	}
	history, err := readStoreHistory(filepath.Join(r.opts.WorkDir, "history"))
	if err != nil {
		return err
	}
	made := r.checkHistories(s, creates, history)
	for _, id := range r.c.all() {
		if err := r.c.terminate(id); err != nil {
			r.d.fail("at the end of the run: %v", err)
		}
	}
	procs, err := r.checkProcesses()
	if err != nil {
		return err
	}
	r.result.Checks = append(r.result.Checks, procs)
	r.tally(creates, history, made, s)
	return nil
}

// checkHistories judges double provisioning and the processes cut off
// from the histories, and returns the directories made.
func (r *runner) checkHistories(s *state, creates []pvCreate, history []chaoshistory.Entry) []madeDir {
	agents := map[string]bool{}
	for _, e := range history {
		if strings.Contains(e.Identity, "-agent-") {
			agents[e.Identity] = true
		}
	}
	made := madeDirs(history, agents)
	ours := map[string]bool{}
	r.w.mu.Lock()
	for _, cl := range r.w.claims {
		ours["pvc-"+string(cl.uid)] = true
	}
	r.w.mu.Unlock()
	cut := Check{Name: "a process cut off from the apiserver stops acting on volumes before its Lease can expire"}
	r.d.mu.Lock()
	partitions := r.d.partitions
	r.d.mu.Unlock()
	for _, problem := range actedWhileCut(history, partitions) {
		cut.add("%s", problem)
	}
	r.result.Checks = append(r.result.Checks, r.checkHistory(s, creates, made, ours), cut)
	return made
}

// checkProcesses checks that no process exited on its own or panicked and
// that every SIGTERM was obeyed.
func (r *runner) checkProcesses() (Check, error) {
	procs := Check{Name: "every process alive or restarted cleanly: no unexpected exit, no panic, every SIGTERM obeyed with exit 0"}
	r.c.mu.Lock()
	for _, e := range r.c.exits {
		procs.add("%s exited on its own: %s\n%s", e.Identity, e.Err, e.LogTail)
	}
	r.c.mu.Unlock()
	r.d.mu.Lock()
	for _, f := range r.d.failures {
		procs.add("%s", f)
	}
	r.d.mu.Unlock()
	panics, err := panicked(filepath.Join(r.opts.WorkDir, "logs"))
	if err != nil {
		return procs, err
	}
	for _, p := range panics {
		procs.add("%s", p)
	}
	return procs, nil
}

// tally fills the result's counts.
func (r *runner) tally(creates []pvCreate, history []chaoshistory.Entry, made []madeDir, s *state) {
	res := r.result
	live, madeClaims, deleted := r.w.live()
	res.Claims, res.ClaimsDeleted, res.ClaimsLive = madeClaims, deleted, len(live)
	res.PVsCreated, res.DirsMade, res.Archived = len(creates), len(made), s.archived
	res.APIFaults = map[string]int{}
	for f, n := range r.c.proxy.Injected() {
		res.APIFaults[string(f)] = n
	}
	res.StoreFaults = map[string]int{}
	for _, e := range history {
		if e.Fault != "" {
			res.StoreFaults[e.Fault]++
		}
	}
	res.NFSFaults = map[string]int{}
	for _, s := range r.c.nfs {
		for f, n := range s.faults.Injected() {
			res.NFSFaults[f] += n
		}
	}
	r.d.mu.Lock()
	res.Disruptions, res.Partitions = r.d.counts, r.d.partitions
	r.d.mu.Unlock()
}

// panicked lists the logs that hold a Go panic.
func panicked(dir string) ([]string, error) {
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, fmt.Errorf("cannot list the logs: %w", err)
	}
	var out []string
	for _, l := range logs {
		data, err := os.ReadFile(l) //nolint:gosec // the run's own logs
		if err != nil {
			return nil, fmt.Errorf("cannot read log %s: %w", l, err)
		}
		if i := strings.Index(string(data), "\npanic: "); i >= 0 {
			out = append(out, fmt.Sprintf("%s: %s", filepath.Base(l), firstLines(string(data[i+1:]), 20)))
		}
	}
	return out, nil
}

// logTail is the last n lines of the file at path.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path) //nolint:gosec // the run's own logs
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
