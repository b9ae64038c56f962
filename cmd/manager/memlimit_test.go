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
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGoMemoryLimit(t *testing.T) {
	type result struct {
		Limit int64
		OK    bool
	}
	tests := map[string]struct {
		args []string
		vars map[string]string
		want result
	}{
		"no container limit":         {want: result{}},
		"the chart's agent limit":    {args: []string{"--memory-limit=96Mi"}, want: result{64 << 20, true}},
		"a count of bytes":           {args: []string{"--memory-limit=268435456"}, want: result{224 << 20, true}},
		"a limit the reserve halves": {args: []string{"--memory-limit=48Mi"}, want: result{24 << 20, true}},
		"GOMEMLIMIT wins": {
			args: []string{"--memory-limit=96Mi"}, vars: map[string]string{"GOMEMLIMIT": "50MiB"},
			want: result{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			env := fakeEnvironment(tc.vars, "")
			o, err := parseOptions(append([]string{"--namespace=ns"}, tc.args...), env)
			if err != nil {
				t.Fatal(err)
			}
			limit, ok := goMemoryLimit(int64(o.memoryLimit), env)
			if diff := cmp.Diff(tc.want, result{limit, ok}); diff != "" {
				t.Errorf("Go memory limit (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMemoryLimitRefusesWhatIsNoQuantityOfBytes(t *testing.T) {
	for _, value := range []string{"lots", "0", "-1Mi", "64MiB"} {
		if _, err := parseOptions([]string{"--namespace=ns", "--memory-limit=" + value}, fakeEnvironment(nil, "")); err == nil {
			t.Errorf("--memory-limit=%s: want an error", value)
		}
	}
}
