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

package provisioning

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestIntentFinalizer(t *testing.T) {
	tests := map[string]struct {
		name string
		want string
	}{
		"plain":       {name: "provfleet.io/fast-local", want: "provfleet.io/provisioning-provfleet.io-fast-local"},
		"no slash":    {name: "example", want: "provfleet.io/provisioning-example"},
		"long name":   {name: "a.very.long.domain.example.com/with-a-very-long-provisioner-name-indeed"},
		"odd trailer": {name: "example.com/x_"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := IntentFinalizer(tc.name)
			if errs := validation.IsQualifiedName(got); len(errs) > 0 {
				t.Errorf("IntentFinalizer(%q) = %q, not a valid finalizer: %v", tc.name, got, errs)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("IntentFinalizer(%q) = %q, want %q", tc.name, got, tc.want)
			}
			if other := IntentFinalizer(tc.name + "2"); other == got {
				t.Errorf("IntentFinalizer of different names are both %q", got)
			}
		})
	}
}
