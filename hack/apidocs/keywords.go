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
	"encoding/json"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// rendered are the schema keywords the reference shows; any other fails the
// run, so that no validation is silently left out.
var rendered = []string{
	"additionalProperties", "anyOf", "default", "description", "enum",
	"exclusiveMaximum", "exclusiveMinimum", "format", "items", "maxItems",
	"maxLength", "maxProperties", "maximum", "minItems", "minLength",
	"minProperties", "minimum", "multipleOf", "nullable", "pattern",
	"properties", "required", "type", "uniqueItems",
	"x-kubernetes-int-or-string", "x-kubernetes-list-map-keys",
	"x-kubernetes-list-type", "x-kubernetes-map-type",
	"x-kubernetes-validations",
}

// checkKeywords fails on a keyword of s, its items or its map values that
// the reference does not show. The fields of s are checked where they are
// rendered.
func checkKeywords(s *apiextensionsv1.JSONSchemaProps) error {
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("cannot encode a schema: %w", err)
	}
	var keywords map[string]json.RawMessage
	if err := json.Unmarshal(data, &keywords); err != nil {
		return fmt.Errorf("cannot decode a schema: %w", err)
	}
	for keyword := range keywords {
		if !slices.Contains(rendered, keyword) {
			return fmt.Errorf("the schema keyword %s is not rendered", keyword)
		}
	}
	switch {
	case len(s.AnyOf) > 0 && !s.XIntOrString:
		return fmt.Errorf("anyOf is rendered only for x-kubernetes-int-or-string")
	case s.Items != nil && s.Items.Schema == nil:
		return fmt.Errorf("a list of items of several schemas is not rendered")
	case s.AdditionalProperties != nil && s.AdditionalProperties.Schema == nil:
		return fmt.Errorf("additionalProperties without a schema is not rendered")
	case s.Items != nil:
		return checkKeywords(s.Items.Schema)
	case s.AdditionalProperties != nil:
		return checkKeywords(s.AdditionalProperties.Schema)
	}
	return nil
}
