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

package hostpathnodes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The agent's renewals carry its report and the removed volumes it
// released, by name and UID; they never touch the list of removed volumes
// an older manager kept on the Lease.
func TestNodeAgentAnnotate(t *testing.T) {
	report := `{"a":{"generation":2,"reason":"Running"}}`
	tests := map[string]struct {
		released releasedVolumes
		before   map[string]string
		want     map[string]string
	}{
		"the report alone": {
			before: map[string]string{"other": "kept"},
			want:   map[string]string{"other": "kept", AnnNodeReport: report},
		},
		"released volumes reported": {
			released: releasedVolumes{"a": {{Name: "pv-1", UID: "uid-1"}}},
			before:   map[string]string{AnnRemovedVolumes: `{"a":{"pv-1":"Delete"}}`},
			want: map[string]string{AnnRemovedVolumes: `{"a":{"pv-1":"Delete"}}`, AnnNodeReport: report,
				AnnReleasedVolumes: `{"a":[{"name":"pv-1","uid":"uid-1"}]}`},
		},
		"nothing released any more": {
			before: map[string]string{AnnReleasedVolumes: `{"a":[{"name":"pv-1","uid":"uid-1"}]}`},
			want:   map[string]string{AnnNodeReport: report},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := &Agent{reports: nodeReport{"a": {Generation: 2, Reason: "Running"}}, released: tc.released}
			got := tc.before
			a.annotate(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}

// The agent asks its backend to release only what its list names and it has
// not released yet, and forgets what the manager took off the list.
func TestNodeAgentPendingRelease(t *testing.T) {
	listed := []removedVolume{
		{Name: "pv-1", UID: "uid-1", OnDelete: "Delete"},
		{Name: "pv-2", UID: "uid-2", OnDelete: "Retain"},
	}
	a := &Agent{released: releasedVolumes{"a": {{Name: "pv-1", UID: "uid-1"}, {Name: "pv-0", UID: "uid-0"}, {Name: "pv-2", UID: "old-uid"}}}}
	pending := a.pendingRelease("a", listed)
	if diff := cmp.Diff(listed[1:], pending); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(releasedVolumes{"a": {{Name: "pv-1", UID: "uid-1"}}}, a.released); diff != "" {
		t.Errorf("released (-want +got):\n%s", diff)
	}
}
