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

package testenv

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
// nothing and the tests skip themselves through Env. It returns the exit code
// of the test binary.
//
//	func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, testenv.Options{})) }
func RunMain(m *testing.M, opts Options) int {
	flag.Parse()
	if testing.Short() {
		fmt.Fprintln(os.Stderr, "-short: not starting a control plane, end-to-end tests skip")
		return m.Run()
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	received := make(chan os.Signal, 1)
	go func() {
		select {
		case sig := <-signals:
			received <- sig
			cancel()
		case <-ctx.Done():
		}
	}()
	env, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot start the control plane: %v\n", err)
		return 1
	}
	defer env.Stop()
	finished := make(chan struct{})
	defer close(finished)
	go stopOnSignal(env, received, finished)
	current = env
	code := m.Run()
	if code != 0 {
		env.DumpLogs(os.Stderr)
	}
	return code
}

// stopOnSignal stops env when a signal arrives before the tests finished, then
// ends the test binary with that same signal: the tests cut short would never
// reach the deferred Stop.
func stopOnSignal(env *Environment, received <-chan os.Signal, finished <-chan struct{}) {
	select {
	case <-finished:
	case sig := <-received:
		fmt.Fprintf(os.Stderr, "%v signal received: stopping the control plane\n", sig)
		env.Stop()
		signal.Reset(sig)
		if s, ok := sig.(syscall.Signal); ok {
			_ = syscall.Kill(os.Getpid(), s)
		}
	}
}

// Env returns the Environment started by RunMain and skips the test when there
// is none (-short mode).
func Env(tb testing.TB) *Environment {
	tb.Helper()
	if current == nil {
		tb.Skip("end-to-end test: needs the control plane of testenv.RunMain (not started in -short mode)")
	}
	return current
}
