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
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/provfleet/provfleet/charts/charttest"
	"github.com/provfleet/provfleet/internal/testenv"
)

// The manager's Pod meets the restricted level, and the node agent's needs
// the privileged level for its hostPath volume and for nothing else (the
// baseline level refuses that volume alone), with the defaults and with every
// value set; checked by the Pod Security admission's own checks.
func TestPodSecurityLevels(t *testing.T) {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string]string{"default values": "", "full values": fullValues, "common values": commonValues} {
		objects := render(t, readValues(t, file))
		manager := podOf(t, one[*appsv1.Deployment](t, objects))
		agent := podOf(t, one[*appsv1.DaemonSet](t, objects))
		cases := map[string]struct {
			pod   *corev1.Pod
			level psapi.Level
			// refused are the reasons the level refuses the Pod; nil: allowed.
			refused []string
		}{
			"manager at restricted": {pod: manager, level: psapi.LevelRestricted},
			"agent at privileged":   {pod: agent, level: psapi.LevelPrivileged},
			"agent at baseline":     {pod: agent, level: psapi.LevelBaseline, refused: []string{"hostPath volumes"}},
		}
		for caseName, tc := range cases {
			t.Run(name+"/"+caseName, func(t *testing.T) {
				level := psapi.LevelVersion{Level: tc.level, Version: psapi.LatestVersion()}
				result := policy.AggregateCheckResults(evaluator.EvaluatePod(level, &tc.pod.ObjectMeta, &tc.pod.Spec))
				if diff := cmp.Diff(tc.refused, result.ForbiddenReasons); diff != "" {
					t.Errorf("forbidden reasons (-want +got):\n%s\n%s", diff, result.ForbiddenDetail())
				}
			})
		}
	}
}

// The API server's Pod Security admission admits the rendered Pods in the
// namespaces the chart runs them in, without a warning, and refuses the
// agent's in the manager's restricted namespace.
func TestPodSecurityAdmission(t *testing.T) {
	env := testenv.Env(t)
	objects := install(t, env, nil)
	manager := podOf(t, one[*appsv1.Deployment](t, objects))
	agent := podOf(t, one[*appsv1.DaemonSet](t, objects))
	agentAsManager := agent.DeepCopy()
	agentAsManager.Namespace, agentAsManager.Spec.ServiceAccountName = manager.Namespace, manager.Spec.ServiceAccountName
	cases := map[string]struct {
		pod *corev1.Pod
		// refused is what the refusal says; empty: admitted.
		refused string
	}{
		"manager in the release's namespace": {pod: manager},
		"agent in the agents' namespace":     {pod: agent},
		"agent in the release's namespace":   {pod: agentAsManager, refused: `violates PodSecurity "restricted:latest"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			warnings, err := dryRunPod(t, env.Config(), tc.pod)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("want admitted, got %v", err)
			case tc.refused != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("want Forbidden with %q, got %v", tc.refused, err)
			}
			if diff := cmp.Diff([]string(nil), warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// install renders the chart with values and applies it as helm install
// --namespace provfleet-system would, into that namespace labelled for the
// restricted level as the chart's README asks; it returns the objects.
func install(t *testing.T, env *testenv.Environment, values map[string]any) []runtime.Object {
	t.Helper()
	rel, err := charttest.Render(t.Context(), charttest.ChartDir(repoRoot(t)), values)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := charttest.Decode(rel.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(env.Config())
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   charttest.ReleaseNamespace,
		Labels: map[string]string{psapi.EnforceLevelLabel: string(psapi.LevelRestricted), psapi.WarnLevelLabel: string(psapi.LevelRestricted)},
	}}
	if _, err := client.CoreV1().Namespaces().Create(t.Context(), namespace, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(manifest, []byte(rel.Manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := env.Apply(t.Context(), manifest); err != nil {
		t.Fatal(err)
	}
	return objects
}

// dryRunPod creates pod in dry-run mode as admin and returns the warnings
// the API server sent.
func dryRunPod(t *testing.T, admin *rest.Config, pod *corev1.Pod) ([]string, error) {
	t.Helper()
	client, recorder, err := testenv.WarningClient(admin)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return recorder.List(), err
}
