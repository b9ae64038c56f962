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

package harness

import (
	"io"
	"strings"
	"testing"

	"github.com/provfleet/provfleet/bench/internal/report"
)

// TestTreeScenario: scenario 10 deletes each tree on each backend, with no
// control plane, and reports every run.
func TestTreeScenario(t *testing.T) {
	b := newBench(Config{Work: t.TempDir(), Out: t.TempDir(), Log: io.Discard, S10Depths: []int{50}, S10Widths: []int{50}})
	if err := b.treeScenario(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, r := range b.run.Results() {
		if err := r.Validate(); err != nil {
			t.Error(err)
		}
	}
	var scenarios []string
	for _, m := range b.run.Measurements {
		scenarios = append(scenarios, m.Scenario+" "+strings.SplitN(m.Note, ":", 2)[0])
	}
	want := []string{
		report.S10TreeDelete + "-hostpath a chain 50 deep", report.S10TreeDelete + "-hostpath 50 files",
		report.S10TreeDelete + "-nfs a chain 50 deep", report.S10TreeDelete + "-nfs 50 files",
	}
	if strings.Join(scenarios, "\n") != strings.Join(want, "\n") {
		t.Fatalf("measured %q, want %q", scenarios, want)
	}
	if len(b.run.Sections) != 1 {
		t.Fatalf("%d sections, want the table of scenario 10", len(b.run.Sections))
	}
}
