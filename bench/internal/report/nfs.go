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

package report

import (
	"fmt"
	"strings"
)

// NFSSection compares the NFS scenario (s7) with the limit's and with
// provfleet's hostPath figures of scenario 1, phase by phase: the time
// until the phase is done, that time over the limit's, the latencies and the
// CPU per claim. Phases the run lacks are left out.
func NFSSection(ms []Measurement) Section {
	r := &ratios{ms: ms}
	var body strings.Builder
	body.WriteString("Scenario 7 provisions and then deletes one tenant's claims on an NFS export that the manager reaches through its own " +
		"NFSv3 client, with no mount (go-nfs serving a folder on loopback, in the harness's process, so the server's CPU is in no figure); " +
		"scenario 1 does the same on a hostPath directory. `/ limit` is the phase's time over the limit's in the same scenario.\n\n")
	body.WriteString("| phase | backend | claims | seconds | / limit | p50 ms | p99 ms | CPU ms per claim |\n|---|---|--:|--:|--:|--:|--:|--:|\n")
	for _, row := range []struct{ phase, backend, scenario string }{
		{"provision", "nfs", S7NFSProvision},
		{"provision", "hostPath", S1Provision},
		{"delete", "nfs", S7NFSDelete},
		{"delete", "hostPath", S1Delete},
	} {
		pf := r.find(row.scenario, SystemProvfleet, -1, -1)
		if pf == nil || pf.Claims == 0 {
			continue
		}
		vsLimit := "-"
		if lim := r.find(row.scenario, SystemLimit, -1, -1); lim != nil && lim.Seconds > 0 {
			vsLimit = fmt.Sprintf("%.2f", pf.Seconds/lim.Seconds)
		}
		fmt.Fprintf(&body, "| %s | %s | %d | %.2f | %s | %.0f | %.0f | %.2f |\n", row.phase, row.backend, pf.Claims, pf.Seconds, vsLimit,
			pf.P50MS, pf.P99MS, pf.CPUS*1000/float64(pf.Claims))
	}
	return Section{Title: "NFS against hostPath and the limit", Body: body.String()}
}
