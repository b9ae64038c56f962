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

package charttest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/lint/support"

	"github.com/provfleet/provfleet/charts/charttest"
)

// The chart lints without a warning, with its defaults and with every value
// set.
func TestLint(t *testing.T) {
	for name, file := range map[string]string{"default values": "", "full values": fullValues, "common values": commonValues} {
		t.Run(name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Namespace = charttest.ReleaseNamespace
			lint.Strict = true
			result := lint.Run([]string{charttest.ChartDir(repoRoot(t))}, readValues(t, file))
			var messages []string
			for _, m := range result.Messages {
				if m.Severity >= support.WarningSev {
					messages = append(messages, m.Error())
				}
			}
			for _, err := range result.Errors {
				messages = append(messages, err.Error())
			}
			if diff := cmp.Diff([]string(nil), messages); diff != "" {
				t.Errorf("lint (-want +got):\n%s", diff)
			}
		})
	}
}

// The CRD the chart and the kustomize base ship is the generated one of
// crds/.
func TestCRDInStep(t *testing.T) {
	root := repoRoot(t)
	name := "provfleet.io_provisionerconfigs.yaml"
	generated, err := os.ReadFile(filepath.Join(root, "crds", name))
	if err != nil {
		t.Fatal(err)
	}
	for _, copyDir := range []string{"charts/provfleet/crds", "examples/crds"} {
		shipped, err := os.ReadFile(filepath.Join(root, copyDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(generated, shipped) {
			t.Errorf("%s/%s differs from crds/%s: run make generate", copyDir, name, name)
		}
	}
}

// The notes name what was installed (how they upgrade the CRD,
// TestCRDUpgradeDocumentedAlike checks).
func TestNotes(t *testing.T) {
	rel, err := charttest.Render(t.Context(), charttest.ChartDir(repoRoot(t)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Deployment provfleet in namespace provfleet-system", "DaemonSet provfleet-node in namespace provfleet-node"} {
		if !strings.Contains(rel.Info.Notes, want) {
			t.Errorf("notes lack %q:\n%s", want, rel.Info.Notes)
		}
	}
}
