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
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Result is what a run did and found.
type Result struct {
	Options Options
	Started time.Time
	Took    time.Duration
	// Converged says whether the end state passed its checks within
	// ConvergeTimeout once the faults were off, and ConvergedIn how long
	// it took.
	Converged   bool
	ConvergedIn time.Duration

	Claims, ClaimsDeleted, ClaimsLive int
	PVsCreated, DirsMade, Archived    int

	// Faults injected by kind: the apiserver proxy's, the stores' and the
	// NFS servers'.
	APIFaults, StoreFaults, NFSFaults map[string]int
	// Disruptions carried out, by what.
	Disruptions map[string]int
	Partitions  []partition

	Checks []Check
}

// Passed says whether the run converged and every check passed.
func (r *Result) Passed() bool {
	if !r.Converged {
		return false
	}
	for _, c := range r.Checks {
		if !c.Passed() {
			return false
		}
	}
	return true
}

// Markdown is the results file of the run.
func (r *Result) Markdown() string {
	var b strings.Builder
	o := r.Options
	verdict := "passed"
	if !r.Passed() {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "# Chaos run, seed %d: %s\n\n", o.Seed, verdict)
	fmt.Fprintf(&b, "Started %s; %v under faults, then %v to converge (limit %v); %v in all.\n\n",
		r.Started.UTC().Format(time.RFC3339), o.Duration, r.ConvergedIn.Round(time.Second), o.ConvergeTimeout, r.Took.Round(time.Second))
	fmt.Fprintf(&b, "Replay: `make chaos CHAOS_FLAGS='-seed=%d -duration=%v -managers=%d -claims-per-second=%g -api-faults=%g -store-faults=%g -nfs-faults=%g'`"+
		" (the seed replays the schedule of faults, not the ordering between processes).\n\n",
		o.Seed, o.Duration, o.Managers, o.ClaimsPerSecond, o.APIFaults, o.StoreFaults, o.NFSFaults)
	fmt.Fprintf(&b, "%d manager replicas, node agents for %d simulated nodes, 4 provisioners (hostPath WaitForFirstConsumer and Immediate on the nodes' disks, NFS Immediate and WaitForFirstConsumer with Archive, each NFS export behind a fault-injecting front).\n\n", o.Managers, len(nodeNames))

	r.writeCounts(&b)
	b.WriteString("## Checks\n\n")
	if !r.Converged {
		fmt.Fprintf(&b, "- **did not converge** within %v once the faults were off\n", o.ConvergeTimeout)
	}
	for _, c := range r.Checks {
		mark := "passed"
		if !c.Passed() {
			mark = fmt.Sprintf("**FAILED** (%d)", len(c.Problems))
		}
		fmt.Fprintf(&b, "- %s: %s\n", c.Name, mark)
		for i, p := range c.Problems {
			if i == maxProblems {
				fmt.Fprintf(&b, "  - and %d more\n", len(c.Problems)-maxProblems)
				break
			}
			fmt.Fprintf(&b, "  - %s\n", strings.ReplaceAll(p, "\n", "\n    "))
		}
	}
	return b.String()
}

// writeCounts writes the workload, the faults and the disruptions.
func (r *Result) writeCounts(b *strings.Builder) {
	o := r.Options
	b.WriteString("## Workload\n\n| claims made | deleted during the run | live at the end | PersistentVolumes created | volume directories made | archived |\n|---|---|---|---|---|---|\n")
	fmt.Fprintf(b, "| %d | %d | %d | %d | %d | %d |\n\n", r.Claims, r.ClaimsDeleted, r.ClaimsLive, r.PVsCreated, r.DirsMade, r.Archived)

	b.WriteString("## Faults injected\n\n| where | rate | by kind |\n|---|---|---|\n")
	fmt.Fprintf(b, "| apiserver requests (proxy) | %g | %s |\n", o.APIFaults, counts(r.APIFaults))
	fmt.Fprintf(b, "| volume directory operations (store) | %g | %s |\n", o.StoreFaults, counts(r.StoreFaults))
	fmt.Fprintf(b, "| mutating NFS calls (server front) | %g | %s |\n\n", o.NFSFaults, counts(r.NFSFaults))

	b.WriteString("## Disruptions\n\n| what | times |\n|---|---|\n")
	for _, what := range slices.Sorted(maps.Keys(r.Disruptions)) {
		fmt.Fprintf(b, "| %s | %d |\n", what, r.Disruptions[what])
	}
	b.WriteString("\n")
	if len(r.Partitions) > 0 {
		b.WriteString("Partitions (process cut off from the apiserver, for how long, its Lease):\n\n")
		for _, p := range r.Partitions {
			fmt.Fprintf(b, "- %s for %v (Lease %v)\n", p.Identity, p.End.Sub(p.Start).Round(100*time.Millisecond), p.Lease)
		}
		b.WriteString("\n")
	}

}

// counts writes a count by kind as "kind n, kind n", or "none".
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	total := 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		total += m[k]
	}
	return fmt.Sprintf("%d: %s", total, strings.Join(parts, ", "))
}
