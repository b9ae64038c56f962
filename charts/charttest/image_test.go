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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/provfleet/provfleet/charts/charttest"
)

// The image the chart installs by default is the one `make image` builds
// by default and the one the Dockerfile labels: a release that raises the
// chart's appVersion raises all of them (and examples/deploy, which `make
// generate` renders from the chart).
func TestImageInStep(t *testing.T) {
	chart, err := loader.Load(charttest.ChartDir(repoRoot(t)))
	if err != nil {
		t.Fatal(err)
	}
	repository, _ := chart.Values["image"].(map[string]any)["repository"].(string)
	want := repository + ":" + chart.Metadata.AppVersion
	got := map[string]string{"make image": makeImageTag(t)}
	for _, obj := range render(t, nil) {
		switch obj.(type) {
		case *appsv1.Deployment, *appsv1.DaemonSet:
			for _, container := range podOf(t, obj).Spec.Containers {
				got["chart "+describe(t, obj)+" "+container.Name] = container.Image
			}
		}
	}
	if len(got) != 3 {
		t.Fatalf("want the images of make image and of the chart's two workloads, got %v", got)
	}
	for source, image := range got {
		if diff := cmp.Diff(want, image); diff != "" {
			t.Errorf("image of %s (-chart's appVersion +got):\n%s", source, diff)
		}
	}
	if diff := cmp.Diff(chart.Metadata.AppVersion, dockerfileVersion(t)); diff != "" {
		t.Errorf("the Dockerfile's default VERSION (-chart's appVersion +got):\n%s", diff)
	}
}

// dockerfileVersion returns the default of the Dockerfile's VERSION
// argument, the version its image is labelled with.
func dockerfileVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if version, ok := strings.CutPrefix(strings.TrimSpace(line), "ARG VERSION="); ok {
			return version
		}
	}
	t.Fatal("the Dockerfile has no ARG VERSION with a default")
	return ""
}

// makeImageTag is the tag `make image` gives without IMAGE_REPOSITORY and
// VERSION set, from the command it would run.
func makeImageTag(t *testing.T) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "-n", "-C", repoRoot(t), "image")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VERSION=") && !strings.HasPrefix(kv, "IMAGE_REPOSITORY=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n image: %v", err)
	}
	flags := map[string]string{}
	fields := strings.Fields(string(out))
	for i, field := range fields[:len(fields)-1] {
		flags[field] = fields[i+1]
	}
	if flags["-repository"] == "" || flags["-version"] == "" {
		t.Fatalf("make -n image names no -repository and -version:\n%s", out)
	}
	return flags["-repository"] + ":" + flags["-version"]
}
