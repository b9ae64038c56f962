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

package harness

import (
	"io"
	"time"
)

// LeaseTimes are a Lease's leaseDuration, renewDeadline and retryPeriod.
type LeaseTimes struct {
	Duration, RenewDeadline, RetryPeriod time.Duration
}

// Config sizes and places a benchmark run.
type Config struct {
	// RepoRoot is the provfleet repository; Out receives the results, Work
	// the volumes, logs and profiles.
	RepoRoot, Out, Work string
	// BinDir receives the binaries; empty: Work/bin.
	BinDir string
	// ControlPlaneBin holds etcd, kube-apiserver and kube-controller-manager;
	// empty: RepoRoot/_output/controlplane.
	ControlPlaneBin string
	// Scenarios to run, 1 to 13.
	Scenarios []int
	// QPS and Burst are every system's client budget: the manager's for its
	// whole fleet, each peer process's, and the limit's.
	QPS   float32
	Burst int
	// Lease is the Lease timing of every provisioner outside scenario 6.
	Lease LeaseTimes
	// Settle passes between a system's start and a measurement.
	Settle time.Duration
	// S1Claims: one tenant's claims. S2Tenants x S2Claims: many tenants.
	S1Claims            int
	S2Tenants, S2Claims int
	// S3Counts are the idle fleet sizes; the peer runs at most S3PeerMax
	// processes. S3Settle passes before each S3Window of measurement.
	S3Counts           []int
	S3PeerMax          int
	S3Settle, S3Window time.Duration
	// S4Bad claims of the failing tenant next to S4Good of the good one, in
	// S4Rounds rounds of a run alone and a run next to the failing tenant,
	// whose good-tenant latencies are pooled: the p99 of 50 claims is
	// their slowest one, too noisy to compare on its own. S4Flood are the
	// valid claims of the second tenant in case report.S4Flood (0: that
	// case is not run).
	S4Bad, S4Good, S4Rounds, S4Flood int
	// S4Cases are the cases of scenario 4 each round runs, in the order of
	// report.S4Cases; empty: all of them.
	S4Cases []string
	// S5Edits spec edits; the peer, which restarts to re-tune and so waits
	// for its Lease to expire each time, does S5PeerRestarts.
	S5Edits, S5PeerRestarts int
	// S6Claims are created at each failover; S6Lease are the Lease times.
	S6Claims int
	S6Lease  LeaseTimes
	// S7Claims of one tenant whose volumes are on an NFS export.
	S7Claims int
	// S8Counts of claims, and as many PVs bound to them, fill the cluster in
	// turn, each next to one idle provisioner of each system that caches
	// them; each count adds to the objects of the one before.
	S8Counts []int
	// S9Nodes simulated nodes, each with a node agent and a peer process,
	// share S9Claims claims; S9Crowd claims and PVs of no node surround one
	// idle agent (0: not measured).
	S9Nodes, S9Claims, S9Crowd int
	// S10Depths and S10Widths are the trees of scenario 10: chains of
	// directories so deep, and directories of so many files.
	S10Depths, S10Widths []int
	// S11Bytes is the size of the tree scenario 11 clones.
	S11Bytes int
	// S12Provisioners idle provisioners run on one replica, then on up to
	// S12Replicas; each idle window lasts S12Window, after S3Settle; a
	// spread that has not settled within S12SettleTimeout is reported so.
	// S12LongLease are the Lease times of the last window.
	S12Provisioners, S12Replicas int
	S12Window, S12SettleTimeout  time.Duration
	S12LongLease                 LeaseTimes
	// S13Tenants x S13Claims claims on NFS exports are provisioned by one
	// replica, then by S13Replicas, each with the client budget S13QPS and
	// S13Burst.
	S13Tenants, S13Claims, S13Replicas int
	S13QPS                             float32
	S13Burst                           int
	// SystemsAtOnce runs the systems of each scenario at the same time:
	// quicker, but each one's figures then include the others' load.
	SystemsAtOnce bool
	// Profile takes CPU profiles of the manager in scenarios 1, 2, 3 and 7,
	// and in the first round of scenario 4 next to a hostile NFS server and
	// next to a flood.
	Profile bool
	// WaitTimeout bounds every wait.
	WaitTimeout time.Duration
	// Log receives progress lines.
	Log io.Writer
}

// defaultLease is the Lease timing of the upstream library and of a
// ProvisionerConfig left at its defaults.
var defaultLease = LeaseTimes{Duration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}

// longLease is scenario 12's Lease of a fleet that trades a slower failover
// for fewer renewals: one every 30 s (renewDeadline less two retry periods).
var longLease = LeaseTimes{Duration: 60 * time.Second, RenewDeadline: 40 * time.Second, RetryPeriod: 5 * time.Second}

// shortLease makes the smoke run's failovers and peer restarts quick.
var shortLease = LeaseTimes{Duration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 500 * time.Millisecond}

// Full is the benchmark of the issue, sized to finish well within an hour on
// two cores.
func Full() Config {
	return Config{
		Scenarios: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13},
		QPS:       100, Burst: 200,
		Lease: defaultLease, Settle: 2 * time.Second,
		S1Claims:  500,
		S2Tenants: 50, S2Claims: 20,
		S3Counts: []int{1, 10, 100, 500}, S3PeerMax: 100,
		S3Settle: 15 * time.Second, S3Window: 20 * time.Second,
		S4Bad: 500, S4Good: 50, S4Rounds: 4, S4Flood: 2000,
		S5Edits: 20, S5PeerRestarts: 3,
		S6Claims: 20, S6Lease: defaultLease,
		// As many as s1, so the two compare claim for claim.
		S7Claims: 500,
		S8Counts: []int{10000, 20000},
		S9Nodes:  10, S9Claims: 500, S9Crowd: 10000,
		S10Depths: []int{1000, 5000, 20000}, S10Widths: []int{1000, 10000, 100000},
		S11Bytes:        1 << 30,
		S12Provisioners: 2000, S12Replicas: 3,
		S12Window: time.Minute, S12SettleTimeout: 3 * time.Minute, S12LongLease: longLease,
		// A budget a tenth of the default, so that it and not the machine
		// limits: about five claims a second for one replica.
		S13Tenants: 60, S13Claims: 10, S13Replicas: 3, S13QPS: 10, S13Burst: 10,
		Profile:     true,
		WaitTimeout: 10 * time.Minute,
	}
}

// Smoke runs every scenario with a few tenants and claims, to prove the
// harness works; its figures mean nothing.
func Smoke() Config {
	return Config{
		Scenarios: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13},
		QPS:       100, Burst: 200,
		Lease:     shortLease,
		S1Claims:  3,
		S2Tenants: 2, S2Claims: 2,
		S3Counts: []int{2}, S3PeerMax: 4,
		S3Settle: 100 * time.Millisecond, S3Window: 500 * time.Millisecond,
		S4Bad: 3, S4Good: 2, S4Rounds: 1, S4Flood: 5,
		S5Edits: 2, S5PeerRestarts: 1,
		S6Claims: 1, S6Lease: shortLease,
		S7Claims: 3,
		S8Counts: []int{10, 20},
		S9Nodes:  2, S9Claims: 6, S9Crowd: 20,
		S10Depths: []int{10, 100}, S10Widths: []int{10, 100},
		S11Bytes:        4 << 20,
		S12Provisioners: 6, S12Replicas: 3,
		S12Window: time.Second, S12SettleTimeout: 15 * time.Second, S12LongLease: shortLease,
		S13Tenants: 3, S13Claims: 2, S13Replicas: 2, S13QPS: 20, S13Burst: 20,
		SystemsAtOnce: true,
		WaitTimeout:   2 * time.Minute,
	}
}
