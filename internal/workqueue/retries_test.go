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
)

func TestRetriesResyncDoesNotResetBackoff(t *testing.T) {
	r := NewRetries[string](RateLimits{Exponential: true, InitialDelay: time.Hour, MaxDelay: 2 * time.Hour, QPS: 1000, Burst: 1000})
	if !r.Admit("pv", "1") {
		t.Fatal("a new item was not admitted")
	}
	r.limiter.When("pv")
	r.items["pv"] = retryEntry{version: "1", retryAt: time.Now().Add(time.Hour)}
	if r.Admit("pv", "1") {
		t.Error("a resync at the same version was admitted while backing off")
	}
	if n := r.limiter.NumRequeues("pv"); n != 1 {
		t.Errorf("failures after a resync = %d, want 1", n)
	}
	if !r.Admit("pv", "2") {
		t.Error("a changed item was not admitted")
	}
	if n := r.limiter.NumRequeues("pv"); n != 0 {
		t.Errorf("failures after a change = %d, want 0", n)
	}
}
