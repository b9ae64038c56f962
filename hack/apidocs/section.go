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
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func renderNames(b *strings.Builder, crd *apiextensionsv1.CustomResourceDefinition, v *apiextensionsv1.CustomResourceDefinitionVersion) {
	names := crd.Spec.Names
	fmt.Fprintf(b, "- API version: `%s/%s`", crd.Spec.Group, v.Name)
	if v.Storage {
		b.WriteString(", the storage version")
	}
	if v.Deprecated {
		b.WriteString(", deprecated")
		if v.DeprecationWarning != nil {
			fmt.Fprintf(b, ": %s", prose(*v.DeprecationWarning))
		}
	}
	fmt.Fprintf(b, "\n- Kind: `%s`; list kind `%s`\n", names.Kind, names.ListKind)
	fmt.Fprintf(b, "- Scope: %s\n", crd.Spec.Scope)
	fmt.Fprintf(b, "- Resource: `%s`", names.Plural)
	if len(names.ShortNames) > 0 {
		fmt.Fprintf(b, "; short names `%s`", strings.Join(names.ShortNames, "`, `"))
	}
	if len(names.Categories) > 0 {
		fmt.Fprintf(b, "; categories `%s`", strings.Join(names.Categories, "`, `"))
	}
	b.WriteString("\n")
	if sub := v.Subresources; sub != nil {
		var list []string
		if sub.Status != nil {
			list = append(list, "`status`")
		}
		if sub.Scale != nil {
			list = append(list, "`scale`")
		}
		fmt.Fprintf(b, "- Subresources: %s\n", strings.Join(list, ", "))
	}
}

// renderColumns lists the printer columns: those of priority 0 are what
// kubectl get shows, the others need -o wide.
func renderColumns(b *strings.Builder, columns []apiextensionsv1.CustomResourceColumnDefinition) {
	if len(columns) == 0 {
		return
	}
	b.WriteString("\n### Printer columns\n\n")
	b.WriteString("| Column | Type | JSONPath | Shown by | Description |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, c := range columns {
		shown := code("kubectl get")
		if c.Priority > 0 {
			shown = code("kubectl get -o wide")
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", prose(c.Name), c.Type, code(c.JSONPath), shown, prose(c.Description))
	}
}

// renderSection writes an object's heading, description and the table of
// its fields; anchors gives the sections of object fields by path.
func renderSection(b *strings.Builder, s section, anchors map[string]string) error {
	fmt.Fprintf(b, "\n<a id=\"%s\"></a>\n\n### `%s`\n\n", s.anchor, s.path)
	if d := prose(s.schema.Description); d != "" {
		b.WriteString(d + "\n\n")
	}
	b.WriteString("| Field | Type | Default | Description | Validation |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, name := range fieldNames(s.schema) {
		field := s.schema.Properties[name]
		path := s.path + "." + name
		typ := typeOf(&field, anchors[path])
		if !strings.Contains(s.path, ".") && name == "metadata" && len(field.Properties) == 0 {
			typ = fmt.Sprintf("[ObjectMeta](%s)", objectMetaDocs)
		}
		def, err := defaultOf(&field)
		if err != nil {
			return fmt.Errorf("cannot render the default of %s: %w", name, err)
		}
		var checks []string
		if slices.Contains(s.schema.Required, name) {
			checks = append(checks, "Required")
		}
		checks = append(checks, validations(&field)...)
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", code(name), typ, def, description(&field), strings.Join(checks, "<br>"))
	}
	return nil
}

// typeOf names the type of a field; anchor is the section of its fields,
// for an object or a list of objects.
func typeOf(s *apiextensionsv1.JSONSchemaProps, anchor string) string {
	switch {
	case s.Items != nil:
		return "list of " + typeOf(s.Items.Schema, anchor)
	case anchor != "":
		return fmt.Sprintf("[object](#%s)", anchor)
	case s.AdditionalProperties != nil:
		return "map of string to " + typeOf(s.AdditionalProperties.Schema, "")
	case s.XIntOrString:
		return "integer or string"
	case s.Format != "":
		return fmt.Sprintf("%s (%s)", s.Type, s.Format)
	}
	return s.Type
}

func defaultOf(s *apiextensionsv1.JSONSchemaProps) (string, error) {
	if s.Default == nil {
		return "", nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, s.Default.Raw); err != nil {
		return "", fmt.Errorf("cannot compact %q: %w", s.Default.Raw, err)
	}
	return code(compact.String()), nil
}

// description is a field's description, followed by that of its items or
// map values when they are not objects, whose own sections show theirs.
func description(s *apiextensionsv1.JSONSchemaProps) string {
	parts := []string{prose(s.Description)}
	if s.Items != nil && len(element(s).Properties) == 0 && s.Items.Schema.Description != "" {
		parts = append(parts, "Items: "+prose(s.Items.Schema.Description))
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema.Description != "" {
		parts = append(parts, "Values: "+prose(s.AdditionalProperties.Schema.Description))
	}
	return strings.Join(slices.DeleteFunc(parts, func(p string) bool { return p == "" }), "<br><br>")
}
