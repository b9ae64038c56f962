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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// widget is a small CRD with one of each kind of field: an object, a list of
// objects, a map, a quantity, an immutable field, bounds and CEL rules.
const widget = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget, shortNames: [wg]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Why, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].reason', priority: 1, description: the reason}
    schema:
      openAPIV3Schema:
        description: Widget is a test.
        type: object
        required: [spec]
        properties:
          metadata: {type: object}
          spec:
            description: spec is what is wanted.
            type: object
            required: [name]
            x-kubernetes-validations:
            - {rule: 'has(self.size) || has(self.parts)', message: 'size or parts'}
            properties:
              name:
                description: "name is a | b,\nor <c>.\n\nSecond paragraph."
                type: string
                pattern: '^(a|b)$'
                x-kubernetes-validations:
                - {rule: self == oldSelf, message: name is immutable}
              size: {type: integer, format: int32, minimum: 1, maximum: 1000000, default: 3}
              labels:
                type: object
                maxProperties: 4
                additionalProperties: {type: string, maxLength: 63}
              parts:
                type: array
                maxItems: 2
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [id]
                items:
                  description: Part is a piece.
                  type: object
                  required: [id]
                  properties:
                    id: {type: string, enum: [left, right]}
          status:
            type: object
            properties:
              used:
                anyOf: [{type: integer}, {type: string}]
                x-kubernetes-int-or-string: true
`

const widgetDoc = "" +
	"\n## Widget (example.com/v1)\n\n" +
	"- API version: `example.com/v1`, the storage version\n" +
	"- Kind: `Widget`; list kind `WidgetList`\n" +
	"- Scope: Namespaced\n" +
	"- Resource: `widgets`; short names `wg`\n" +
	"- Subresources: `status`\n\n" +
	"### Printer columns\n\n" +
	"| Column | Type | JSONPath | Shown by | Description |\n" +
	"| --- | --- | --- | --- | --- |\n" +
	"| Size | integer | `.spec.size` | `kubectl get` |  |\n" +
	"| Why | string | `.status.conditions[?(@.type==\"Ready\")].reason` | `kubectl get -o wide` | the reason |\n\n" +
	"### Contents\n\n" +
	"- [`Widget`](#v1-widget)\n" +
	"  - [`Widget.spec`](#v1-widget-spec)\n" +
	"    - [`Widget.spec.parts`](#v1-widget-spec-parts)\n" +
	"  - [`Widget.status`](#v1-widget-status)\n\n" +
	"<a id=\"v1-widget\"></a>\n\n### `Widget`\n\nWidget is a test.\n\n" +
	"| Field | Type | Default | Description | Validation |\n| --- | --- | --- | --- | --- |\n" +
	"| `metadata` | [ObjectMeta](" + objectMetaDocs + ") |  |  |  |\n" +
	"| `spec` | [object](#v1-widget-spec) |  | spec is what is wanted. | Required<br>Rule `has(self.size) \\|\\| has(self.parts)` (message “size or parts”) |\n" +
	"| `status` | [object](#v1-widget-status) |  |  |  |\n\n" +
	"<a id=\"v1-widget-spec\"></a>\n\n### `Widget.spec`\n\nspec is what is wanted.\n\n" +
	"| Field | Type | Default | Description | Validation |\n| --- | --- | --- | --- | --- |\n" +
	"| `labels` | map of string to string |  |  | Max properties `4`<br>Values: Max length `63` |\n" +
	"| `name` | string |  | name is a \\| b, or &lt;c&gt;.<br><br>Second paragraph. | Required<br>Pattern `^(a\\|b)$`<br>Immutable: Rule `self == oldSelf` (message “name is immutable”) |\n" +
	"| `parts` | list of [object](#v1-widget-spec-parts) |  |  | Max items `2`<br>List type `map`, keyed by `id` |\n" +
	"| `size` | integer (int32) | `3` |  | Minimum `1`<br>Maximum `1000000` |\n\n" +
	"<a id=\"v1-widget-spec-parts\"></a>\n\n### `Widget.spec.parts`\n\nPart is a piece.\n\n" +
	"| Field | Type | Default | Description | Validation |\n| --- | --- | --- | --- | --- |\n" +
	"| `id` | string |  |  | Required<br>One of `\"left\"`, `\"right\"` |\n\n" +
	"<a id=\"v1-widget-status\"></a>\n\n### `Widget.status`\n\n" +
	"| Field | Type | Default | Description | Validation |\n| --- | --- | --- | --- | --- |\n" +
	"| `used` | integer or string |  |  |  |\n"

func decodeCRD(t *testing.T, doc string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(doc), crd); err != nil {
		t.Fatalf("cannot decode the test CRD: %v", err)
	}
	return crd
}

func TestRender(t *testing.T) {
	tests := map[string]struct {
		edit    func(s *apiextensionsv1.JSONSchemaProps)
		want    string
		wantErr string
	}{
		"every kind of field": {
			edit: func(*apiextensionsv1.JSONSchemaProps) {},
			want: widgetDoc,
		},
		"exclusive bounds": {
			edit: func(s *apiextensionsv1.JSONSchemaProps) {
				size := s.Properties["spec"].Properties["size"]
				size.ExclusiveMinimum, size.ExclusiveMaximum, size.MultipleOf = true, true, new(0.5)
				s.Properties["spec"].Properties["size"] = size
			},
			want: strings.Replace(widgetDoc, "Minimum `1`<br>Maximum `1000000`", "Greater than `1`<br>Less than `1000000`<br>Multiple of `0.5`", 1),
		},
		"a keyword it does not show": {
			edit: func(s *apiextensionsv1.JSONSchemaProps) {
				name := s.Properties["spec"].Properties["name"]
				name.XPreserveUnknownFields = new(true)
				s.Properties["spec"].Properties["name"] = name
			},
			wantErr: "cannot document Widget.spec.name: the schema keyword x-kubernetes-preserve-unknown-fields is not rendered",
		},
		"a keyword of a list's items": {
			edit: func(s *apiextensionsv1.JSONSchemaProps) {
				s.Properties["spec"].Properties["parts"].Items.Schema.OneOf = []apiextensionsv1.JSONSchemaProps{{Required: []string{"id"}}}
			},
			wantErr: "cannot document Widget.spec.parts: the schema keyword oneOf is not rendered",
		},
		"a map of objects": {
			edit: func(s *apiextensionsv1.JSONSchemaProps) {
				s.Properties["spec"].Properties["labels"].AdditionalProperties.Schema.Properties = map[string]apiextensionsv1.JSONSchemaProps{"a": {Type: "string"}}
			},
			wantErr: "cannot document Widget.spec.labels: maps of objects are not rendered",
		},
		"two paths with one anchor": {
			edit: func(s *apiextensionsv1.JSONSchemaProps) {
				s.Properties["spec"].Properties["Parts"] = s.Properties["spec"].Properties["parts"]
			},
			wantErr: `cannot document Widget.spec.parts: its anchor "v1-widget-spec-parts" is that of Widget.spec.Parts`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			crd := decodeCRD(t, widget)
			tc.edit(crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
			got, err := render([]*apiextensionsv1.CustomResourceDefinition{crd})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, got, _ = strings.Cut(got, "documented under the list's path.\n")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reference (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderSkipsVersionsNotServed(t *testing.T) {
	crd := decodeCRD(t, widget)
	old := crd.Spec.Versions[0].DeepCopy()
	old.Name, old.Served, old.Storage = "v0", false, false
	crd.Spec.Versions = append(crd.Spec.Versions, *old)
	got, err := render([]*apiextensionsv1.CustomResourceDefinition{crd})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "v0") {
		t.Errorf("the reference documents a version that is not served:\n%s", got)
	}
}

func TestProse(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"wrapped lines join":       {in: "a\nb  c\n", want: "a b c"},
		"paragraphs stay apart":    {in: "a\n\nb\n\n\nc", want: "a<br><br>b<br><br>c"},
		"a pipe stays in its cell": {in: "a | b", want: `a \| b`},
		"no HTML":                  {in: "custom/<driver> & x", want: "custom/&lt;driver&gt; &amp; x"},
		"no emphasis or links":     {in: "root_squash *x* [y](z) `c` ~d~", want: "root\\_squash \\*x\\* \\[y\\](z) \\`c\\` \\~d\\~"},
		"a backslash stays":        {in: `a\b`, want: `a\\b`},
		"empty":                    {in: "\n", want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, prose(tc.in)); diff != "" {
				t.Errorf("prose(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestCode(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"plain":              {in: "a == b", want: "`a == b`"},
		"a pipe":             {in: "a || b", want: "`a \\|\\| b`"},
		"a newline":          {in: "a\n&& b", want: "`a && b`"},
		"a backtick":         {in: "a`b", want: "``a`b``"},
		"a leading backtick": {in: "`a", want: "`` `a ``"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, code(tc.in)); diff != "" {
				t.Errorf("code(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
