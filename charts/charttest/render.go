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

package charttest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// ReleaseName and ReleaseNamespace give the chart's objects the names and
// the namespace examples/deploy gives its own.
const (
	ReleaseName      = "provfleet"
	ReleaseNamespace = "provfleet-system"
)

// ChartDir is the folder of the chart in the repository at root.
func ChartDir(root string) string {
	return filepath.Join(root, "charts", "provfleet")
}

// Render renders the chart in dir with values as release ReleaseName in
// ReleaseNamespace, client-side, as `helm template` does.
func Render(ctx context.Context, dir string, values map[string]any) (*release.Release, error) {
	chart, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot load the chart: %w", err)
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun = true
	install.ClientOnly = true
	install.ReleaseName = ReleaseName
	install.Namespace = ReleaseNamespace
	rel, err := install.RunWithContext(ctx, chart, values)
	if err != nil {
		return nil, fmt.Errorf("cannot render the chart: %w", err)
	}
	return rel, nil
}

// codecs decode the kinds of client-go and of provfleet.io strictly: an
// unknown or duplicated field is an error.
var codecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{scheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict)
}()

// Decode returns the objects of a multi-document YAML manifest, in order:
// typed objects of the kinds client-go and provfleet.io know, Unstructured
// ones of any other kind (a ServiceMonitor, a PrometheusRule).
func Decode(manifest string) ([]runtime.Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var objects []runtime.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objects, nil
		} else if err != nil {
			return nil, fmt.Errorf("cannot read the manifest: %w", err)
		}
		obj, err := decodeDocument(doc)
		if err != nil {
			return nil, err
		}
		if obj != nil {
			objects = append(objects, obj)
		}
	}
}

// decodeDocument decodes one document; nil for one of comments only.
func decodeDocument(doc []byte) (runtime.Object, error) {
	var fields map[string]any
	if err := utilyaml.Unmarshal(doc, &fields); err != nil {
		return nil, fmt.Errorf("cannot parse a document: %w", err)
	}
	if len(fields) == 0 {
		return nil, nil
	}
	obj, _, err := codecs.UniversalDeserializer().Decode(doc, nil, nil)
	if runtime.IsNotRegisteredError(err) {
		return &unstructured.Unstructured{Object: fields}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot decode %s: %w", firstLine(doc), err)
	}
	return obj, nil
}

// firstLine names a document in errors: helm starts each with its template.
func firstLine(doc []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(doc)), "\n")
	return line
}
