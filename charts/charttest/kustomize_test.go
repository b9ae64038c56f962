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
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/provfleet/provfleet/charts/charttest"
	"github.com/provfleet/provfleet/internal/testenv"
)

// grant is what an RBAC object grants, without its labels: the rules of a
// role, the role and the subjects of a binding.
type grant struct {
	Rules    []rbacv1.PolicyRule
	RoleRef  rbacv1.RoleRef
	Subjects []rbacv1.Subject
}

// grants are the RBAC objects among objects, by kind and name.
func grants(t *testing.T, objects []runtime.Object) map[string]grant {
	t.Helper()
	out := map[string]grant{}
	for _, obj := range objects {
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			out[describe(t, o)] = grant{Rules: o.Rules}
		case *rbacv1.Role:
			out[describe(t, o)] = grant{Rules: o.Rules}
		case *rbacv1.ClusterRoleBinding:
			out[describe(t, o)] = grant{RoleRef: o.RoleRef, Subjects: o.Subjects}
		case *rbacv1.RoleBinding:
			out[describe(t, o)] = grant{RoleRef: o.RoleRef, Subjects: o.Subjects}
		}
	}
	return out
}

// kustomizeBuild builds the kustomize base of examples/ with kubectl's
// kustomize and decodes what it holds.
func kustomizeBuild(t *testing.T) []runtime.Object {
	t.Helper()
	env := testenv.Env(t)
	out, err := exec.CommandContext(t.Context(), filepath.Join(env.BinDir(), "kubectl"), "kustomize", filepath.Join(repoRoot(t), "examples")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	built, err := charttest.Decode(string(out))
	if err != nil {
		t.Fatal(err)
	}
	return built
}

// The kustomize base, built by kubectl's kustomize, grants exactly what
// examples/deploy grants, so it is in step with the chart too.
func TestKustomizeRBACInStep(t *testing.T) {
	built := kustomizeBuild(t)
	manifests, err := filepath.Glob(deployManifest(t, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := grants(t, decodeFiles(t, manifests...))
	if diff := cmp.Diff(want, grants(t, built)); diff != "" {
		t.Errorf("RBAC of the kustomize base (-examples/deploy +base):\n%s", diff)
	}
}

// The kustomize base installs the CRD of crds/, so that `kubectl apply -k
// examples/` alone makes a working install.
func TestKustomizeInstallsCRD(t *testing.T) {
	want := decodeFiles(t, filepath.Join(repoRoot(t), "crds", "provfleet.io_provisionerconfigs.yaml"))
	var got []runtime.Object
	for _, obj := range kustomizeBuild(t) {
		if obj.GetObjectKind().GroupVersionKind().Kind == "CustomResourceDefinition" {
			got = append(got, obj)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRDs of the kustomize base (-crds/ +base):\n%s", diff)
	}
}

// The kustomize base lists the CRD and every manifest of examples/deploy, so
// that `kubectl apply -k examples/` applies what `kubectl apply -f crds/`
// and `kubectl apply -f examples/deploy/` do.
func TestKustomizationListsEveryManifest(t *testing.T) {
	examples := filepath.Join(repoRoot(t), "examples")
	data, err := os.ReadFile(filepath.Join(examples, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &kustomization); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, dir := range []string{"crds", "deploy"} {
		manifests, err := filepath.Glob(filepath.Join(examples, dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range manifests {
			want = append(want, filepath.Join(dir, filepath.Base(path)))
		}
	}
	got := slices.Sorted(slices.Values(kustomization.Resources))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resources of examples/kustomization.yaml (-examples/crds and deploy +listed):\n%s", diff)
	}
}
