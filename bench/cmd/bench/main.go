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
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/provfleet/provfleet/bench/internal/harness"
	"github.com/provfleet/provfleet/bench/internal/report"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := config(args)
	if err != nil {
		return err
	}
	result, err := harness.Run(ctx, cfg)
	if result != nil {
		printRatios(stdout, result)
		fmt.Fprintf(stdout, "results in %s\n", cfg.Out)
	}
	return err
}

// flags are the command line.
type flags struct {
	smoke                           *bool
	root, out, work, bin, scenarios *string
	sizes                           map[string]*int
	s3, s4, s8                      *string
	s12Window, s12Settle            *time.Duration
}

// config is the run the command line asks for.
func config(args []string) (harness.Config, error) {
	full := harness.Full()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	f := flags{
		smoke:     fs.Bool("smoke", false, "Every scenario with a few tenants and claims."),
		root:      fs.String("repo", "", "The provfleet repository. Empty: found above the working directory."),
		out:       fs.String("out", "", "Results folder. Empty: bench/results of the repository."),
		work:      fs.String("work", "", "Scratch folder for volumes, logs and profiles. Empty: _output/bench of the repository."),
		bin:       fs.String("bin", "", "Folder for the built binaries; kept between runs, only what changed is relinked. Empty: bin in the scratch folder."),
		scenarios: fs.String("scenarios", "", "Comma-separated scenarios to run (1-13). Empty: all."),
		sizes:     map[string]*int{},
	}
	for name, def := range map[string]int{
		"s1-claims": full.S1Claims, "s2-tenants": full.S2Tenants, "s2-claims": full.S2Claims,
		"s3-peer-max": full.S3PeerMax, "s4-bad": full.S4Bad, "s4-good": full.S4Good,
		"s4-rounds": full.S4Rounds, "s4-flood": full.S4Flood,
		"s5-edits": full.S5Edits, "s6-claims": full.S6Claims, "s7-claims": full.S7Claims,
		"s11-bytes": full.S11Bytes,
		"s9-nodes":  full.S9Nodes, "s9-claims": full.S9Claims, "s9-crowd": full.S9Crowd,
		"s12-provisioners": full.S12Provisioners, "s12-replicas": full.S12Replicas,
		"s13-tenants": full.S13Tenants, "s13-claims": full.S13Claims, "s13-replicas": full.S13Replicas,
		"s13-qps": int(full.S13QPS), "s13-burst": full.S13Burst,
	} {
		f.sizes[name] = fs.Int(name, def, "Size of a scenario; see the issue. Ignored with -smoke.")
	}
	f.s3 = fs.String("s3-counts", "1,10,100,500", "Idle fleet sizes. Ignored with -smoke.")
	f.s8 = fs.String("s8-objects", joined(full.S8Counts), "Comma-separated counts of claims and PVs scenario 8 fills the cluster with, in turn. Ignored with -smoke.")
	f.s12Window = fs.Duration("s12-window", full.S12Window, "Length of each idle window of scenario 12. Ignored with -smoke.")
	f.s12Settle = fs.Duration("s12-settle-timeout", full.S12SettleTimeout, "How long scenarios 12 and 13 wait for the spread to settle. Ignored with -smoke.")
	f.s4 = fs.String("s4-cases", "", "Comma-separated cases of scenario 4 to run in each round, of "+
		strings.Join(s4CaseNames(), ", ")+". Empty: all.")
	if err := fs.Parse(args); err != nil {
		return harness.Config{}, err
	}
	cfg, err := f.sized(full)
	if err != nil {
		return cfg, err
	}
	if err := f.placed(&cfg); err != nil {
		return cfg, err
	}
	cfg.ControlPlaneBin = os.Getenv("PROVFLEET_CONTROLPLANE_BIN")
	cfg.Log = os.Stderr
	return cfg, nil
}

// sized is full with the sizes and scenarios of the flags, or the smoke run.
func (f flags) sized(full harness.Config) (harness.Config, error) {
	cfg := full
	if *f.smoke {
		cfg = harness.Smoke()
	} else {
		cfg.S1Claims, cfg.S2Tenants, cfg.S2Claims = *f.sizes["s1-claims"], *f.sizes["s2-tenants"], *f.sizes["s2-claims"]
		cfg.S3PeerMax, cfg.S4Bad, cfg.S4Good = *f.sizes["s3-peer-max"], *f.sizes["s4-bad"], *f.sizes["s4-good"]
		cfg.S4Rounds, cfg.S4Flood = *f.sizes["s4-rounds"], *f.sizes["s4-flood"]
		cfg.S5Edits, cfg.S6Claims, cfg.S7Claims = *f.sizes["s5-edits"], *f.sizes["s6-claims"], *f.sizes["s7-claims"]
		cfg.S11Bytes = *f.sizes["s11-bytes"]
		cfg.S9Nodes, cfg.S9Claims, cfg.S9Crowd = *f.sizes["s9-nodes"], *f.sizes["s9-claims"], *f.sizes["s9-crowd"]
		cfg.S12Provisioners, cfg.S12Replicas = *f.sizes["s12-provisioners"], *f.sizes["s12-replicas"]
		cfg.S12Window, cfg.S12SettleTimeout = *f.s12Window, *f.s12Settle
		cfg.S13Tenants, cfg.S13Claims, cfg.S13Replicas = *f.sizes["s13-tenants"], *f.sizes["s13-claims"], *f.sizes["s13-replicas"]
		cfg.S13QPS, cfg.S13Burst = float32(*f.sizes["s13-qps"]), *f.sizes["s13-burst"]
		var err error
		if cfg.S3Counts, err = ints(*f.s3); err != nil {
			return cfg, fmt.Errorf("cannot parse -s3-counts: %w", err)
		}
		if cfg.S8Counts, err = ints(*f.s8); err != nil {
			return cfg, fmt.Errorf("cannot parse -s8-objects: %w", err)
		}
	}
	if *f.scenarios != "" {
		list, err := ints(*f.scenarios)
		if err != nil {
			return cfg, fmt.Errorf("cannot parse -scenarios: %w", err)
		}
		cfg.Scenarios = list
	}
	if *f.s4 != "" {
		cases, err := s4Cases(*f.s4)
		if err != nil {
			return cfg, fmt.Errorf("cannot parse -s4-cases: %w", err)
		}
		cfg.S4Cases = cases
	}
	return cfg, nil
}

// s4CaseNames are the cases of scenario 4 as -s4-cases names them: their
// scenario names without "s4-".
func s4CaseNames() []string {
	names := make([]string, len(report.S4Cases))
	for i, c := range report.S4Cases {
		names[i] = strings.TrimPrefix(c, "s4-")
	}
	return names
}

// s4Cases are the scenario names of the cases a comma-separated list names.
func s4Cases(list string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(s4CaseNames(), name) {
			return nil, fmt.Errorf("no case %q, only %s", name, strings.Join(s4CaseNames(), ", "))
		}
		out = append(out, "s4-"+name)
	}
	return out, nil
}

// placed sets the folders of cfg from the flags, the repository's where
// they are empty.
func (f flags) placed(cfg *harness.Config) error {
	var err error
	if cfg.RepoRoot = *f.root; cfg.RepoRoot == "" {
		if cfg.RepoRoot, err = repoRoot(); err != nil {
			return err
		}
	}
	if cfg.Out = *f.out; cfg.Out == "" {
		cfg.Out = filepath.Join(cfg.RepoRoot, "bench", "results")
	}
	if cfg.Work = *f.work; cfg.Work == "" {
		cfg.Work = filepath.Join(cfg.RepoRoot, "_output", "bench")
	}
	cfg.BinDir = *f.bin
	return nil
}

func printRatios(stdout io.Writer, result *report.Run) {
	fmt.Fprintln(stdout, "ratios against the targets:")
	for _, r := range report.Ratios(result) {
		met := "n/a"
		if r.Met != nil {
			met = strconv.FormatBool(*r.Met)
		}
		fmt.Fprintf(stdout, "  %-75s %10s  target %-40s met: %s\n", r.What, r.Value, r.Target, met)
	}
}

// joined is the comma-separated list of ns, as ints reads it.
func joined(ns []int) string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = strconv.Itoa(n)
	}
	return strings.Join(out, ",")
}

func ints(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// repoRoot walks up from the working directory to the folder holding
// bench/go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("cannot get the working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "bench", "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repository: no bench/go.mod above the working directory")
		}
		dir = parent
	}
}
