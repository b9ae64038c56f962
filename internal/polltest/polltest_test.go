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

package polltest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recorder is a testing.TB that records a fatal failure instead of ending
// the test.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

// TestUntil: a condition that comes to hold passes, errors on the way
// included; one that never does fails naming what was awaited and the
// last error seen.
func TestUntil(t *testing.T) {
	tests := map[string]struct {
		condition func(calls int) (bool, error)
		want      string
	}{
		"holds at once": {condition: func(int) (bool, error) { return true, nil }},
		"holds after errors": {condition: func(calls int) (bool, error) {
			if calls < 3 {
				return false, errors.New("not yet")
			}
			return true, nil
		}},
		"never holds": {
			condition: func(int) (bool, error) { return false, nil },
			want:      "timed out waiting for the thing: context deadline exceeded",
		},
		"never holds, with an error": {
			condition: func(calls int) (bool, error) { return false, fmt.Errorf("seen %d", min(calls, 1)) },
			want:      "timed out waiting for the thing: seen 1",
		},
		"never holds, with errors": {
			condition: func(calls int) (bool, error) { return false, fmt.Errorf("seen %d", min(calls, 2)) },
			want:      "timed out waiting for the thing: seen 2 (before that: seen 1)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &recorder{TB: t}
			calls := 0
			Until(t.Context(), r, "the thing", time.Millisecond, 50*time.Millisecond, func(context.Context) (bool, error) {
				calls++
				return tc.condition(calls)
			})
			if diff := cmp.Diff(tc.want, r.fatal); diff != "" {
				t.Errorf("failure (-want +got):\n%s", diff)
			}
		})
	}
}
