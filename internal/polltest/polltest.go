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
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls condition every 5ms until it holds, and fails the test
// naming what it waited for when it does not within 20s.
func Eventually(t testing.TB, what string, condition func() bool) {
	t.Helper()
	Until(context.Background(), t, what, 5*time.Millisecond, 20*time.Second,
		func(context.Context) (bool, error) { return condition(), nil })
}

// Until polls condition every interval until it holds, and fails the test
// naming what it waited for, with the condition's last error, when it does
// not within timeout or ctx ends. An error of the condition fails no poll:
// it is what was last seen, and so is the error before it, since the last
// may be one of the deadline alone.
func Until(ctx context.Context, t testing.TB, what string, interval, timeout time.Duration, condition func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last, before error
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		done, err := condition(ctx)
		if err != nil && (last == nil || err.Error() != last.Error()) {
			before, last = last, err
		}
		return done && err == nil, nil
	})
	switch {
	case err == nil:
	case before != nil:
		t.Fatalf("timed out waiting for %s: %v (before that: %v)", what, last, before)
	case last != nil:
		t.Fatalf("timed out waiting for %s: %v", what, last)
	default:
		t.Fatalf("timed out waiting for %s: %v", what, err)
	}
}
