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

package leaderelection

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLeaseSeconds(t *testing.T) {
	tests := map[string]struct {
		duration time.Duration
		want     int
	}{
		"whole seconds":            {duration: 15 * time.Second, want: 15},
		"fraction rounds up":       {duration: 1500 * time.Millisecond, want: 2},
		"less than a second is 1s": {duration: 100 * time.Millisecond, want: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, leaseSeconds(tc.duration)); diff != "" {
				t.Errorf("leaseSeconds(%v) (-want +got):\n%s", tc.duration, diff)
			}
		})
	}
}
