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

package framework

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// current is the Environment of this test binary, set by RunMain before any test
// runs and never changed while tests run.
var current *Environment

// RunMain is the body of a TestMain: it starts one Environment for the test
// binary, runs the tests, prints the servers' logs when a test failed and always
// stops the Environment, also on SIGINT or SIGTERM. In -short mode it starts
// nothing and the tests skip themselves through Env.
//
//	func TestMain(m *testing.M) { framework.RunMain(m, framework.Options{}) }
func RunMain(m *testing.M, opts Options) {
	os.Exit(runMain(m, opts))
}

func runMain(m *testing.M, opts Options) int {
	flag.Parse()
	if testing.Short() {
		fmt.Fprintln(os.Stderr, "-short: not starting a control plane, end-to-end tests skip")
		return m.Run()
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	env, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot start the control plane: %v\n", err)
		return 1
	}
	defer env.Stop()
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-finished:
		case <-ctx.Done():
			// A signal: the deferred Stop will not run once the tests are cut short.
			fmt.Fprintf(os.Stderr, "%v: stopping the control plane\n", context.Cause(ctx))
			env.Stop()
			os.Exit(1)
		}
	}()
	current = env
	code := m.Run()
	if code != 0 {
		env.DumpLogs(os.Stderr)
	}
	return code
}

// Env returns the Environment started by RunMain and skips the test when there
// is none (-short mode).
func Env(tb testing.TB) *Environment {
	tb.Helper()
	if current == nil {
		tb.Skip("end-to-end test: needs the control plane of framework.RunMain (not started in -short mode)")
	}
	return current
}
