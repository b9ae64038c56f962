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

package workqueue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRetryLimiter(t *testing.T) {
	tests := map[string]struct {
		limits RateLimits
		want   []time.Duration
	}{
		"exponential up to the maximum": {
			limits: RateLimits{Exponential: true, InitialDelay: time.Second, MaxDelay: 5 * time.Second, QPS: 1000, Burst: 1000},
			want:   []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second},
		},
		"fixed": {
			limits: RateLimits{InitialDelay: time.Second, MaxDelay: 5 * time.Second, QPS: 1000, Burst: 1000},
			want:   []time.Duration{time.Second, time.Second, time.Second},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := NewRetryLimiter[string](tc.limits)
			var got []time.Duration
			for range tc.want {
				got = append(got, l.When("item"))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("delays (-want +got):\n%s", diff)
			}
			if n := l.NumRequeues("item"); n != len(tc.want) {
				t.Errorf("NumRequeues = %d, want %d", n, len(tc.want))
			}
			l.Forget("item")
			if n := l.NumRequeues("item"); n != 0 {
				t.Errorf("NumRequeues after Forget = %d", n)
			}
		})
	}
}

func TestRetryLimiterRetuneKeepsFailures(t *testing.T) {
	l := NewRetryLimiter[string](RateLimits{Exponential: true, InitialDelay: time.Second, MaxDelay: time.Hour, QPS: 1000, Burst: 1000})
	l.When("item")
	l.When("item")
	l.Retune(RateLimits{Exponential: true, InitialDelay: time.Minute, MaxDelay: time.Hour, QPS: 1000, Burst: 1000})
	if got, want := l.When("item"), 4*time.Minute; got != want {
		t.Errorf("third delay after retuning = %v, want %v", got, want)
	}
	// The overall bucket: one token a second, no burst beyond one.
	l.Retune(RateLimits{InitialDelay: time.Millisecond, MaxDelay: time.Millisecond, QPS: 1, Burst: 1})
	l.When("a")
	if got := l.When("b"); got < 500*time.Millisecond {
		t.Errorf("the bucket let a second item through after %v", got)
	}
}
