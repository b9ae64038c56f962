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

package fleet

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The agent's renewals carry its report and drop the removed volumes it
// released, and only those; a Lease that lists none any more is left alone.
func TestNodeAgentAnnotate(t *testing.T) {
	tests := map[string]struct {
		released map[string][]string
		before   map[string]string
		want     map[string]string
	}{
		"the report alone": {
			before: map[string]string{"other": "kept"},
			want:   map[string]string{"other": "kept", AnnNodeReport: `{"a":{"generation":2,"reason":"Running"}}`},
		},
		"released names dropped, others kept": {
			released: map[string][]string{"a": {"pv-1"}},
			before:   map[string]string{AnnRemovedVolumes: `{"a":{"pv-1":"Delete","pv-2":"Retain"},"b":{"pv-9":"Delete"}}`},
			want:     map[string]string{AnnRemovedVolumes: `{"a":{"pv-2":"Retain"},"b":{"pv-9":"Delete"}}`, AnnNodeReport: `{"a":{"generation":2,"reason":"Running"}}`},
		},
		"the last name dropped with the annotation": {
			released: map[string][]string{"a": {"pv-1"}},
			before:   map[string]string{AnnRemovedVolumes: `{"a":{"pv-1":"Delete"}}`},
			want:     map[string]string{AnnNodeReport: `{"a":{"generation":2,"reason":"Running"}}`},
		},
		"released names the Lease no longer lists": {
			released: map[string][]string{"a": {"pv-1"}},
			before:   map[string]string{},
			want:     map[string]string{AnnNodeReport: `{"a":{"generation":2,"reason":"Running"}}`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := &nodeAgent{reports: nodeReport{"a": {Generation: 2, Reason: "Running"}}, released: tc.released}
			got := tc.before
			a.annotate(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}
