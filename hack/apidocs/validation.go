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
	"fmt"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// immutable is the CEL rule of a field that may not change once set.
const immutable = "self == oldSelf"

// validations lists what the apiserver checks of a value of s, then of its
// items and map values; the fields of an object are checked in its section.
func validations(s *apiextensionsv1.JSONSchemaProps) []string {
	checks := append(bounds(s), lists(s)...)
	checks = append(checks, rules(s.XValidations)...)
	if s.Items != nil {
		for _, c := range validations(s.Items.Schema) {
			checks = append(checks, "Items: "+c)
		}
	}
	if s.AdditionalProperties != nil {
		for _, c := range validations(s.AdditionalProperties.Schema) {
			checks = append(checks, "Values: "+c)
		}
	}
	return checks
}

// bounds lists the enum, the numeric, length and size bounds and the
// pattern of s.
func bounds(s *apiextensionsv1.JSONSchemaProps) []string {
	var checks []string
	if len(s.Enum) > 0 {
		values := make([]string, 0, len(s.Enum))
		for _, v := range s.Enum {
			values = append(values, code(string(v.Raw)))
		}
		checks = append(checks, "One of "+strings.Join(values, ", "))
	}
	checks = append(checks, numeric(s)...)
	checks = appendCount(checks, "Min length ", s.MinLength)
	checks = appendCount(checks, "Max length ", s.MaxLength)
	checks = appendCount(checks, "Min items ", s.MinItems)
	checks = appendCount(checks, "Max items ", s.MaxItems)
	checks = appendCount(checks, "Min properties ", s.MinProperties)
	checks = appendCount(checks, "Max properties ", s.MaxProperties)
	if s.Pattern != "" {
		checks = append(checks, "Pattern "+code(s.Pattern))
	}
	return checks
}

// numeric lists the bounds of a number, exclusive or not.
func numeric(s *apiextensionsv1.JSONSchemaProps) []string {
	var checks []string
	if s.Minimum != nil {
		label := "Minimum "
		if s.ExclusiveMinimum {
			label = "Greater than "
		}
		checks = append(checks, label+decimal(*s.Minimum))
	}
	if s.Maximum != nil {
		label := "Maximum "
		if s.ExclusiveMaximum {
			label = "Less than "
		}
		checks = append(checks, label+decimal(*s.Maximum))
	}
	if s.MultipleOf != nil {
		checks = append(checks, "Multiple of "+decimal(*s.MultipleOf))
	}
	return checks
}

// decimal renders n without an exponent, as the markers wrote it.
func decimal(n float64) string {
	return code(strconv.FormatFloat(n, 'f', -1, 64))
}

func appendCount(checks []string, label string, n *int64) []string {
	if n == nil {
		return checks
	}
	return append(checks, label+code(strconv.FormatInt(*n, 10)))
}

// lists lists the list and map semantics of s that constrain its values.
func lists(s *apiextensionsv1.JSONSchemaProps) []string {
	var checks []string
	if s.UniqueItems {
		checks = append(checks, "Unique items")
	}
	if s.Nullable {
		checks = append(checks, "Nullable")
	}
	if s.XListType != nil {
		check := "List type " + code(*s.XListType)
		if len(s.XListMapKeys) > 0 {
			check += ", keyed by " + code(strings.Join(s.XListMapKeys, ", "))
		}
		checks = append(checks, check)
	}
	if s.XMapType != nil {
		checks = append(checks, "Map type "+code(*s.XMapType))
	}
	return checks
}

// rules lists the CEL rules with the message each gives when it fails.
func rules(rs apiextensionsv1.ValidationRules) []string {
	checks := make([]string, 0, len(rs))
	for _, r := range rs {
		check := "Rule " + code(r.Rule)
		if r.Rule == immutable {
			check = "Immutable: " + check
		}
		var details []string
		if r.Message != "" {
			details = append(details, "message “"+prose(r.Message)+"”")
		}
		if r.MessageExpression != "" {
			details = append(details, "message "+code(r.MessageExpression))
		}
		if r.Reason != nil {
			details = append(details, "reason "+code(string(*r.Reason)))
		}
		if r.FieldPath != "" {
			details = append(details, "field "+code(r.FieldPath))
		}
		if r.OptionalOldSelf != nil && *r.OptionalOldSelf {
			details = append(details, "also checked on create")
		}
		if len(details) > 0 {
			check += fmt.Sprintf(" (%s)", strings.Join(details, ", "))
		}
		checks = append(checks, check)
	}
	return checks
}
