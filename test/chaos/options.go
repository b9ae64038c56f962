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

package chaos

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Options shape one chaos run. Zero fields take Defaults' values.
type Options struct {
	// Seed fixes the schedule of faults: which process is killed or cut
	// off when, what the proxies and stores fail. The ordering between
	// processes is the machine's and no seed replays it.
	Seed uint64
	// Duration is how long claims come and go under faults; the run then
	// turns faults off, waits for the system to converge and checks it.
	Duration time.Duration
	// Managers is the number of manager replicas.
	Managers int
	// ClaimsPerSecond is the rate claims are created at; about half of
	// them are deleted again during the run.
	ClaimsPerSecond float64
	// APIFaults, StoreFaults and NFSFaults are the shares of apiserver
	// requests, volume directory operations and mutating NFS calls that
	// fail.
	APIFaults, StoreFaults, NFSFaults float64
	// Every is the mean time between two disruptions of each kind.
	Every Intervals
	// ConvergeTimeout bounds the wait for the system to settle once the
	// faults are off.
	ConvergeTimeout time.Duration
	// ManagerBinary is cmd/manager built with the build tag chaos, which
	// carries the store's fault layer.
	ManagerBinary string
	// WorkDir holds the run's folders, logs and histories; it is kept
	// when the run fails.
	WorkDir string
	// Progress, when set, receives a line per disruption, one line at a
	// time.
	Progress io.Writer
}

// Intervals are the mean times between disruptions, by kind; each kind
// happens at least once in a run.
type Intervals struct {
	// Kill: a manager or node agent SIGKILLed, restarted after a moment.
	Kill time.Duration
	// Roll: a node agent replaced by a new one that starts first, so two
	// agents of one node run at once, as a DaemonSet's rolling update with
	// a surge does.
	Roll time.Duration
	// Partition: a leading manager or an agent cut off from the apiserver
	// for longer than its Lease.
	Partition time.Duration
	// NFSRestart: an NFS server stopped and started again.
	NFSRestart time.Duration
	// Config: a ProvisionerConfig edited, paused or deleted and recreated.
	Config time.Duration
	// Node: a Node removed and returned.
	Node time.Duration
}

// Defaults are the options of `make chaos`.
func Defaults() Options {
	return Options{
		Seed:            1,
		Duration:        10 * time.Minute,
		Managers:        3,
		ClaimsPerSecond: 2,
		APIFaults:       0.1,
		StoreFaults:     0.05,
		NFSFaults:       0.05,
		Every: Intervals{
			Kill: 20 * time.Second, Roll: 90 * time.Second, Partition: 60 * time.Second,
			NFSRestart: 90 * time.Second, Config: 30 * time.Second, Node: 120 * time.Second,
		},
		ConvergeTimeout: 4 * time.Minute,
	}
}

// withDefaults fills zero fields from Defaults and checks the rest.
func (o Options) withDefaults() (Options, error) {
	d := Defaults()
	if o.Duration == 0 {
		o.Duration = d.Duration
	}
	if o.Managers == 0 {
		o.Managers = d.Managers
	}
	if o.ClaimsPerSecond == 0 {
		o.ClaimsPerSecond = d.ClaimsPerSecond
	}
	if o.ConvergeTimeout == 0 {
		o.ConvergeTimeout = d.ConvergeTimeout
	}
	for _, f := range []struct {
		value *time.Duration
		def   time.Duration
	}{
		{&o.Every.Kill, d.Every.Kill}, {&o.Every.Roll, d.Every.Roll}, {&o.Every.Partition, d.Every.Partition},
		{&o.Every.NFSRestart, d.Every.NFSRestart}, {&o.Every.Config, d.Every.Config}, {&o.Every.Node, d.Every.Node},
	} {
		if *f.value == 0 {
			*f.value = f.def
		}
	}
	var errs []error
	for name, rate := range map[string]float64{"API": o.APIFaults, "store": o.StoreFaults, "NFS": o.NFSFaults} {
		if rate < 0 || rate > 0.5 {
			errs = append(errs, fmt.Errorf("the %s fault rate %v is not between 0 and 0.5", name, rate))
		}
	}
	if o.Managers < 1 || o.Managers > 5 {
		errs = append(errs, fmt.Errorf("%d manager replicas: run 1 to 5", o.Managers))
	}
	if o.Duration < 30*time.Second {
		errs = append(errs, fmt.Errorf("a run of %v leaves no time for a disruption of each kind: run 30s or more", o.Duration))
	}
	if o.ManagerBinary == "" || o.WorkDir == "" {
		errs = append(errs, errors.New("a run needs the manager built with the tag chaos and a work folder"))
	}
	return o, errors.Join(errs...)
}
