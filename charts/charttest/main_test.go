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
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/provfleet/provfleet/charts/charttest"
	"github.com/provfleet/provfleet/internal/testenv"
)

// The control plane starts with the CRD the chart ships, from the binaries
// `make controlplane` builds at the repository's root unless
// PROVFLEET_CONTROLPLANE_BIN names others.
func TestMain(m *testing.M) {
	opts := testenv.Options{CRDDir: filepath.Join(charttest.ChartDir(rootDir), "crds")}
	if os.Getenv(testenv.BinDirEnv) == "" {
		opts.BinDir = filepath.Join(rootDir, "_output", "controlplane")
	}
	os.Exit(testenv.RunMain(m, opts))
}

// rootDir is the repository's root: this module lies two folders below it.
const rootDir = "../.."

// fullValues is the file that sets every value of the chart.
const fullValues = "testdata/full-values.yaml"

// commonValues is the file that sets the values spelled as the charts of
// nfs-subdir-external-provisioner and local-path-provisioner spell them.
const commonValues = "testdata/common-values.yaml"

// repoRoot is the absolute path of the repository's root.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// readValues reads a values file; "" is the chart's defaults.
func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	if path == "" {
		return map[string]any{}
	}
	values, err := chartutil.ReadValuesFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return values
}

// render renders the chart with values and decodes its manifest.
func render(t *testing.T, values map[string]any) []runtime.Object {
	t.Helper()
	rel, err := charttest.Render(t.Context(), charttest.ChartDir(repoRoot(t)), values)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := charttest.Decode(rel.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	return objects
}

// only returns the objects of type T.
func only[T runtime.Object](objects []runtime.Object) []T {
	var out []T
	for _, obj := range objects {
		if typed, ok := obj.(T); ok {
			out = append(out, typed)
		}
	}
	return out
}

// one returns the only object of type T, failing the test if there is not
// exactly one.
func one[T runtime.Object](t *testing.T, objects []runtime.Object) T {
	t.Helper()
	found := only[T](objects)
	if len(found) != 1 {
		var zero T
		t.Fatalf("want one %T, got %d", zero, len(found))
	}
	return found[0]
}

// oneOfKind returns the only object of a kind the scheme does not know
// (a ServiceMonitor, a PrometheusRule), failing the test if there is not
// exactly one.
func oneOfKind(t *testing.T, objects []runtime.Object, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, obj := range only[*unstructured.Unstructured](objects) {
		if obj.GetKind() == kind {
			found = append(found, obj)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s, got %d", kind, len(found))
	}
	return found[0]
}

// podOf is a Pod of the template of the Deployment or the DaemonSet, in its
// namespace.
func podOf(t *testing.T, workload runtime.Object) *corev1.Pod {
	t.Helper()
	var template corev1.PodTemplateSpec
	var namespace string
	switch w := workload.(type) {
	case *appsv1.Deployment:
		template, namespace = w.Spec.Template, w.Namespace
	case *appsv1.DaemonSet:
		template, namespace = w.Spec.Template, w.Namespace
	default:
		t.Fatalf("%T is no workload", workload)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-security", Namespace: namespace, Labels: template.Labels},
		Spec:       template.Spec,
	}
}

// deployManifest is the path of a file of examples/deploy.
func deployManifest(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(repoRoot(t), "examples", "deploy", name)
}

// decodeFiles decodes the objects of manifest files.
func decodeFiles(t *testing.T, paths ...string) []runtime.Object {
	t.Helper()
	var objects []runtime.Object
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := charttest.Decode(string(data))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		objects = append(objects, decoded...)
	}
	return objects
}
