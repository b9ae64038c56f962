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

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The checked-in reference is what make generate writes; these tests keep it
// complete against the checked-in CRDs, whatever the renderer does.

var (
	sectionHeading = regexp.MustCompile("^### `([^`]+)`$")
	fieldRow       = regexp.MustCompile("^\\| `([^`]+)` \\|")
	anchor         = regexp.MustCompile(`<a id="([^"]+)"></a>`)
	link           = regexp.MustCompile(`\]\(#([^)]+)\)`)
)

func checkedIn(t *testing.T) (crds []*apiextensionsv1.CustomResourceDefinition, doc string) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "crds", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("want the CRDs of crds/, got %v (%v)", paths, err)
	}
	for _, path := range paths {
		crd, err := readCRD(path)
		if err != nil {
			t.Fatal(err)
		}
		crds = append(crds, crd)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	return crds, string(data)
}

// propertyPaths lists the path of every property of s under prefix, the
// items of a list being documented under the list's path.
func propertyPaths(prefix string, s *apiextensionsv1.JSONSchemaProps) []string {
	var paths []string
	for s.Items != nil {
		s = s.Items.Schema
	}
	for name, p := range s.Properties {
		paths = append(paths, prefix+"."+name)
		paths = append(paths, propertyPaths(prefix+"."+name, &p)...)
	}
	return paths
}

func TestReferenceCoversEveryField(t *testing.T) {
	crds, doc := checkedIn(t)
	var want []string
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			want = append(want, propertyPaths(crd.Spec.Names.Kind, v.Schema.OpenAPIV3Schema)...)
		}
	}
	var got []string
	section := ""
	for line := range strings.Lines(doc) {
		line = strings.TrimSuffix(line, "\n")
		if m := sectionHeading.FindStringSubmatch(line); m != nil {
			section = m[1]
		} else if m := fieldRow.FindStringSubmatch(line); m != nil && section != "" {
			got = append(got, section+"."+m[1])
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fields of docs/api.md against the CRDs' properties (-CRD +docs); run make generate:\n%s", diff)
	}
}

func TestReferenceLinksResolve(t *testing.T) {
	_, doc := checkedIn(t)
	anchors := map[string]bool{}
	for _, m := range anchor.FindAllStringSubmatch(doc, -1) {
		anchors[m[1]] = true
	}
	links := link.FindAllStringSubmatch(doc, -1)
	if len(links) == 0 {
		t.Fatal("docs/api.md links no section")
	}
	for _, m := range links {
		if !anchors[m[1]] {
			t.Errorf("docs/api.md links #%s, which no section has", m[1])
		}
	}
}
