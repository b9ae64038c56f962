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
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/kube"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/charts/charttest"
	"github.com/provfleet/provfleet/internal/testenv"
)

// crdFile is the CRD's file in the chart's crds/.
const crdFile = "crds/provfleet.io_provisionerconfigs.yaml"

// The CRD upgrade the chart's README documents, run with kubectl on a
// release that the helm binary installed from an older chart, brings the
// CRD to the chart's, and the ProvisionerConfigs made meanwhile stay. Helm
// created the CRD, so it owns every field of it, and each field the new
// chart changes is a conflict for kubectl's server-side apply: the test
// first proves that those conflicts are met.
func TestCRDUpgradeCommand(t *testing.T) {
	// Helm installs a CRD only where none exists: the shared control plane
	// has the chart's, so this release gets a control plane of its own.
	env, err := testenv.Start(t.Context(), testenv.Options{BinDir: testenv.Env(t).BinDir(), CRDDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	chartDir := charttest.ChartDir(repoRoot(t))
	current := readCRD(t, filepath.Join(chartDir, crdFile))
	helmInstall(t, env, olderCRD(t, current))
	pcfg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "ProvisionerConfig",
		"metadata": map[string]any{"name": "before-upgrade"},
		"spec": map[string]any{
			"provisionerName": "provfleet.io/before-upgrade",
			"backend":         map[string]any{"nfs": map[string]any{"server": "nfs.example.com", "path": "/exports"}},
		},
	}}
	resource := dynamic.NewForConfigOrDie(env.Config()).Resource(v1alpha1.SchemeGroupVersion.WithResource("provisionerconfigs"))
	if _, err := resource.Create(t.Context(), pcfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := applyAsKubectl(t, env, current); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflicts with "helm"`) {
		t.Fatalf("want the new CRD's server-side apply to conflict with helm's fields, got %v", err)
	}

	command := documentedCRDUpgrade(t)
	args := strings.Fields(command)
	cmd := exec.CommandContext(t.Context(), filepath.Join(env.BinDir(), args[0]), append(args[1:], "--kubeconfig", env.AdminKubeconfigPath())...)
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}

	crds := apiextensionsclient.NewForConfigOrDie(env.Config()).ApiextensionsV1().CustomResourceDefinitions()
	upgraded, err := crds.Get(t.Context(), current.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(current.Annotations, upgraded.Annotations); diff != "" {
		t.Errorf("annotations of the upgraded CRD (-chart's +server's):\n%s", diff)
	}
	if diff := cmp.Diff(current.Spec.Versions, upgraded.Spec.Versions); diff != "" {
		t.Errorf("versions of the upgraded CRD (-chart's +server's):\n%s", diff)
	}
	if _, err := resource.Get(t.Context(), pcfg.GetName(), metav1.GetOptions{}); err != nil {
		t.Errorf("ProvisionerConfig %s after the upgrade: %v", pcfg.GetName(), err)
	}
}

// The READMEs and the chart's notes give the same CRD upgrade, the one
// TestCRDUpgradeCommand runs (the notes from the chart's own folder).
func TestCRDUpgradeDocumentedAlike(t *testing.T) {
	command := documentedCRDUpgrade(t)
	rel, err := charttest.Render(t.Context(), charttest.ChartDir(repoRoot(t)), nil)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		text, want string
	}{
		"README.md": {text: string(readme), want: command},
		"NOTES.txt": {text: rel.Info.Notes, want: strings.ReplaceAll(command, "charts/provfleet/crds/", "crds/")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(tc.text, tc.want) {
				t.Errorf("%s lacks %q", name, tc.want)
			}
		})
	}
}

// documentedCRDUpgrade is the kubectl command of the chart README's
// "Upgrading the CRD".
func documentedCRDUpgrade(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(charttest.ChartDir(repoRoot(t)), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var section string
	for line := range strings.Lines(string(readme)) {
		line = strings.TrimSuffix(line, "\n")
		if heading, ok := strings.CutPrefix(line, "## "); ok {
			section = heading
		} else if section == "Upgrading the CRD" && strings.HasPrefix(line, "kubectl ") {
			return line
		}
	}
	t.Fatal("the chart's README gives no kubectl command under Upgrading the CRD")
	return ""
}

// readCRD decodes a CRD file.
func readCRD(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("cannot decode %s: %v", path, err)
	}
	return crd
}

// olderCRD is the CRD as an older chart shipped it: made by another
// controller-gen, with another description of the spec and without a field
// added since, the changes a release brings.
func olderCRD(t *testing.T, current *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	older := current.DeepCopy()
	older.Annotations["controller-gen.kubebuilder.io/version"] = "v0.20.0"
	spec := older.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if _, ok := spec.Properties["paused"]; !ok {
		t.Fatal("the CRD has no spec.paused to leave out of the older one")
	}
	delete(spec.Properties, "paused")
	spec.Description = "the spec of an older release"
	older.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	return older
}

// helmInstall installs the chart as the helm binary does, with crd in its
// crds/, as release charttest.ReleaseName in a namespace it creates.
func helmInstall(t *testing.T, env *testenv.Environment, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	ch, err := loader.Load(charttest.ChartDir(repoRoot(t)))
	if err != nil {
		t.Fatal(err)
	}
	data, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	replaced := false
	for _, file := range ch.Files {
		if file.Name == crdFile {
			file.Data, replaced = data, true
		}
	}
	if !replaced {
		t.Fatalf("the chart has no %s", crdFile)
	}
	install := action.NewInstall(helmConfig(t, env))
	install.ReleaseName = charttest.ReleaseName
	install.Namespace = charttest.ReleaseNamespace
	install.CreateNamespace = true
	if _, err := install.RunWithContext(t.Context(), ch, nil); err != nil {
		t.Fatalf("helm install: %v", err)
	}
}

// helmConfig is the action configuration of the helm binary, with its field
// manager, against env, keeping releases in Secrets as it does by default.
func helmConfig(t *testing.T, env *testenv.Environment) *action.Configuration {
	t.Helper()
	kube.ManagedFieldsManager = "helm"
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, namespace := env.AdminKubeconfigPath(), charttest.ReleaseNamespace
	flags.KubeConfig, flags.Namespace = &kubeconfig, &namespace
	config := &action.Configuration{}
	if err := config.Init(flags, namespace, "secret", t.Logf); err != nil {
		t.Fatal(err)
	}
	return config
}

// applyAsKubectl server-side applies crd, dry run, as kubectl does without
// --force-conflicts.
func applyAsKubectl(t *testing.T, env *testenv.Environment, crd *apiextensionsv1.CustomResourceDefinition) error {
	t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		t.Fatal(err)
	}
	resource := dynamic.NewForConfigOrDie(env.Config()).Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
	_, err = resource.Apply(t.Context(), crd.Name, &unstructured.Unstructured{Object: content}, metav1.ApplyOptions{FieldManager: "kubectl", DryRun: []string{metav1.DryRunAll}})
	return err
}
