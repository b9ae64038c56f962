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

// Command chaos runs one chaos run (see package chaos) and writes its
// results file; `make chaos` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	nfs "github.com/willscott/go-nfs"

	"github.com/provfleet/provfleet/test/chaos"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	d := chaos.Defaults()
	opts := chaos.Options{Progress: os.Stdout}
	flag.Uint64Var(&opts.Seed, "seed", d.Seed, "the seed of the fault schedule; a failing run prints it")
	flag.DurationVar(&opts.Duration, "duration", d.Duration, "how long claims come and go under faults")
	flag.IntVar(&opts.Managers, "managers", d.Managers, "manager replicas")
	flag.Float64Var(&opts.ClaimsPerSecond, "claims-per-second", d.ClaimsPerSecond, "the rate claims are made at; about half are deleted again")
	flag.Float64Var(&opts.APIFaults, "api-faults", d.APIFaults, "the share of apiserver requests that fail (500, 429, lost replies, timeouts, slow answers, cut watches)")
	flag.Float64Var(&opts.StoreFaults, "store-faults", d.StoreFaults, "the share of volume directory operations that fail (EIO, ENOSPC, EACCES, EROFS, EIO after carrying out)")
	flag.Float64Var(&opts.NFSFaults, "nfs-faults", d.NFSFaults, "the share of mutating NFS calls that fail (NFS3ERR_IO, NOSPC, ROFS, reply dropped)")
	flag.DurationVar(&opts.ConvergeTimeout, "converge-timeout", d.ConvergeTimeout, "how long the system may take to converge once the faults are off")
	flag.StringVar(&opts.ManagerBinary, "manager", "", "cmd/manager built with -tags chaos")
	results := flag.String("results", "test/chaos/results", "the folder the results file is written to")
	flag.Parse()
	// The NFS servers' log of the errors they are made to answer would
	// bury the run's progress.
	nfs.Log.SetLevel(nfs.FatalLevel)

	var err error
	if opts.WorkDir, err = os.MkdirTemp("", "provfleet-chaos-"); err != nil {
		return fmt.Errorf("cannot make the work folder: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	result, err := chaos.Run(ctx, opts)
	if err != nil {
		return fmt.Errorf("the chaos run (seed %d) could not be carried out, its folder kept in %s: %w", opts.Seed, opts.WorkDir, err)
	}
	file := filepath.Join(*results, fmt.Sprintf("%s-seed-%d.md", result.Started.UTC().Format(time.DateOnly), opts.Seed))
	if err := os.WriteFile(file, []byte(result.Markdown()), 0o644); err != nil { //nolint:gosec // a results file for the repository
		return fmt.Errorf("cannot write the results: %w", err)
	}
	fmt.Print("\n", result.Markdown())
	fmt.Println("results written to", file)
	if !result.Passed() {
		return fmt.Errorf("the chaos run with seed %d failed its checks; its logs, histories and disks are kept in %s", opts.Seed, opts.WorkDir)
	}
	return os.RemoveAll(opts.WorkDir)
}
