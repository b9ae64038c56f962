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

package provisioning

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/leaderelection"
)

// VolumeSaveMode says what happens when the PersistentVolume of a freshly
// provisioned backend volume cannot be saved to the API.
type VolumeSaveMode string

const (
	// VolumeSaveRetry tries VolumeSaveConfig.Retries times, then deletes the
	// backend volume so nothing leaks, and emits an Event.
	VolumeSaveRetry VolumeSaveMode = "Retry"
	// VolumeSaveRetryForever never deletes the backend volume and keeps trying
	// to save the PersistentVolume until it is in the API.
	VolumeSaveRetryForever VolumeSaveMode = "RetryForever"
)

// Config tunes one provision controller. Every field maps one to one to the
// spec of a ProvisionerConfig; DefaultConfig gives the defaults.
type Config struct {
	// ProvisionerName is the name claims and classes use to ask for this
	// provisioner (StorageClass.provisioner).
	ProvisionerName string
	// AdditionalProvisionerNames are further names this controller answers to.
	AdditionalProvisionerNames []string
	// Paused stops provisioning and deleting while keeping the instance.
	Paused bool
	// Workers is the number of claim workers and of volume workers, each.
	Workers int
	// ResyncPeriod is how often every claim and volume is looked at again.
	ResyncPeriod time.Duration
	// Finalizer puts a finalizer on provisioned PersistentVolumes so a
	// PersistentVolume object never goes away before its backend volume.
	// Without it, the finalizer is taken off the volumes that have it.
	Finalizer      bool
	Retry          RetryConfig
	VolumeSave     VolumeSaveConfig
	Timeouts       TimeoutConfig
	LeaderElection LeaderElectionConfig
	// ProbeInterval is how often a leading controller probes a backend that
	// is a Prober, and the deadline of each probe. The manager sets it for
	// every instance (--backend-probe-interval); no spec field maps to it.
	ProbeInterval time.Duration
}

// RetryConfig tunes failure thresholds and the work queues' rate limiters.
type RetryConfig struct {
	// ProvisionFailureThreshold is how many times a failed claim is retried
	// before the controller gives up until the claim changes (as
	// FailedProvisionThreshold of sig-storage-lib-external-provisioner): a
	// claim is tried at most threshold+1 times. 0 retries forever.
	ProvisionFailureThreshold int
	// DeleteFailureThreshold is the same for volume deletion; 0 retries forever.
	DeleteFailureThreshold int
	// ExponentialBackoff doubles the per-item delay after each failure, from
	// InitialDelay up to MaxDelay; otherwise every retry waits InitialDelay.
	ExponentialBackoff bool
	InitialDelay       time.Duration
	MaxDelay           time.Duration
	// QPS and Burst bound the overall rate of each work queue.
	QPS   float64
	Burst int
}

// VolumeSaveConfig tunes how a provisioned PersistentVolume is saved.
type VolumeSaveConfig struct {
	Mode     VolumeSaveMode
	Retries  int
	Interval time.Duration
}

// TimeoutConfig bounds backend calls and the stop of a controller.
type TimeoutConfig struct {
	// Provision is the deadline of the context of each Provision call and of
	// the other calls about a claim (Qualifier, BlockProvisioner,
	// DataSourceProvisioner).
	Provision time.Duration
	// Delete is the deadline of each Delete call and of the other calls about
	// a volume (DeletionGuard, Reclaimer).
	Delete time.Duration
	// Drain is how long a stopping controller waits for its workers, whose
	// backend calls were cancelled, before it gives up on calls that ignore
	// their context: it then returns without releasing its Lease, which
	// expires, so that no other replica works on the same objects sooner.
	Drain time.Duration
}

// LeaderElectionConfig tunes the per-instance Lease.
type LeaderElectionConfig struct {
	// Enabled turns on leader election. Without it the controller works as soon
	// as it runs (tests, single replicas).
	Enabled bool
	// Namespace holds the Lease.
	Namespace string
	// Identity names this replica in the Lease; empty: the host name and a
	// random suffix.
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// LegacyLockNamespace, if set, is the namespace where a provisioner of an
	// older upstream version (the seed, sig-storage-lib-external-provisioner
	// v5 to v8) locks an Endpoints object named like the Lease: this instance
	// does not lead while that lock holds a live record of another holder.
	// Endpoints are deprecated since v1.33: give the client a warning handler
	// that logs each warning once, as the manager does. Empty: no such check.
	LegacyLockNamespace string
}

// DefaultConfig returns the defaults of a ProvisionerConfig for one provisioner
// name: the seed's, except the PersistentVolume finalizer, which is on.
func DefaultConfig(provisionerName string) Config {
	return Config{
		ProvisionerName: provisionerName,
		Workers:         4,
		ResyncPeriod:    15 * time.Minute,
		Finalizer:       true,
		Retry: RetryConfig{
			ProvisionFailureThreshold: 15,
			DeleteFailureThreshold:    15,
			ExponentialBackoff:        true,
			InitialDelay:              15 * time.Second,
			MaxDelay:                  1000 * time.Second,
			QPS:                       10,
			Burst:                     100,
		},
		VolumeSave: VolumeSaveConfig{
			Mode:     VolumeSaveRetry,
			Retries:  5,
			Interval: 10 * time.Second,
		},
		Timeouts: TimeoutConfig{
			Provision: 2 * time.Minute,
			Delete:    2 * time.Minute,
			Drain:     10 * time.Second,
		},
		LeaderElection: LeaderElectionConfig{
			Enabled:       true,
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
		},
		ProbeInterval: 30 * time.Second,
	}
}

// ErrRestartRequired is returned by Controller.Reconfigure when the new Config
// changes something a running controller cannot change: the provisioner name,
// the resync period or the leader election settings.
var ErrRestartRequired = errors.New("configuration change requires a restart")

// CheckReconfigure returns cfg, with names of its own, for a running
// controller of running to apply live. It fails with Validate's error, or
// with ErrRestartRequired when cfg changes what a running controller cannot
// change: the provisioner name, the resync period or the leader election
// settings.
func CheckReconfigure(running, cfg Config) (Config, error) {
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	if cfg.ProvisionerName != running.ProvisionerName || cfg.ResyncPeriod != running.ResyncPeriod || cfg.LeaderElection != running.LeaderElection {
		return Config{}, ErrRestartRequired
	}
	cfg.AdditionalProvisionerNames = slices.Clone(cfg.AdditionalProvisionerNames)
	return cfg, nil
}

// KnownName reports whether name is the provisioner name or one of the
// additional names; the empty name is none.
func (c Config) KnownName(name string) bool {
	return name != "" && (name == c.ProvisionerName || slices.Contains(c.AdditionalProvisionerNames, name))
}

// leaseHashBytes of a provisioner name's SHA-256 end the Lease names that
// LeaseName makes up.
const leaseHashBytes = 4

// LeaseName returns the name of the Lease that elects the leader of a
// provisioner. A name whose upstream Lease name (every "/" made a "-") is a
// valid object name keeps it, so that a fleet and an older single-provisioner
// deployment never both lead. Any other valid provisioner name (upper case,
// "_", too long) is lower-cased, every character a Lease name refuses made a
// "-", cut to length, and ended with a hash of the provisioner name, so that
// names differing only there keep different Leases.
func LeaseName(provisionerName string) string {
	upstream := strings.ReplaceAll(provisionerName, "/", "-")
	if len(validation.IsDNS1123Subdomain(upstream)) == 0 {
		return upstream
	}
	lower := strings.ToLower(upstream)
	name := make([]byte, 0, len(lower))
	for i := range len(lower) {
		c := lower[i]
		switch {
		case isLowerAlphanumeric(c):
		// A dot must stand between two alphanumerics.
		case c == '.' && len(name) > 0 && isLowerAlphanumeric(name[len(name)-1]) && i+1 < len(lower) && isLowerAlphanumeric(lower[i+1]):
		default:
			c = '-'
		}
		name = append(name, c)
	}
	sum := sha256.Sum256([]byte(provisionerName))
	suffix := "-" + hex.EncodeToString(sum[:leaseHashBytes])
	name = name[:min(len(name), validation.DNS1123SubdomainMaxLength-len(suffix))]
	return strings.TrimRight(string(name), "-.") + suffix
}

func isLowerAlphanumeric(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
}

// Validate reports every problem of the Config at once.
func (c Config) Validate() error {
	var errs field.ErrorList
	errs = append(errs, validateProvisionerName(field.NewPath("provisionerName"), c.ProvisionerName)...)
	seen := map[string]bool{c.ProvisionerName: true}
	for i, name := range c.AdditionalProvisionerNames {
		path := field.NewPath("additionalProvisionerNames").Index(i)
		errs = append(errs, validateProvisionerName(path, name)...)
		if seen[name] {
			errs = append(errs, field.Duplicate(path, name))
		}
		seen[name] = true
	}
	if c.Workers < 1 {
		errs = append(errs, field.Invalid(field.NewPath("workers"), c.Workers, "must be at least 1"))
	}
	if c.ResyncPeriod < 0 {
		errs = append(errs, field.Invalid(field.NewPath("resyncPeriod"), c.ResyncPeriod.String(), "must not be negative"))
	}
	if c.ProbeInterval <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("probeInterval"), c.ProbeInterval.String(), "must be positive"))
	}
	errs = append(errs, c.Retry.validate(field.NewPath("retry"))...)
	errs = append(errs, c.VolumeSave.validate(field.NewPath("volumeSave"))...)
	errs = append(errs, c.Timeouts.validate(field.NewPath("timeouts"))...)
	errs = append(errs, c.LeaderElection.validate(field.NewPath("leaderElection"))...)
	return errs.ToAggregate()
}

func validateProvisionerName(path *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	// StorageClass.provisioner is validated the same way by the apiserver,
	// and compared with its case by the PV binder.
	for _, msg := range validation.IsQualifiedName(strings.ToLower(name)) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

func (r RetryConfig) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.ProvisionFailureThreshold < 0 {
		errs = append(errs, field.Invalid(path.Child("provisionFailureThreshold"), r.ProvisionFailureThreshold, "must not be negative"))
	}
	if r.DeleteFailureThreshold < 0 {
		errs = append(errs, field.Invalid(path.Child("deleteFailureThreshold"), r.DeleteFailureThreshold, "must not be negative"))
	}
	if r.InitialDelay <= 0 {
		errs = append(errs, field.Invalid(path.Child("initialDelay"), r.InitialDelay.String(), "must be positive"))
	}
	if r.MaxDelay < r.InitialDelay {
		errs = append(errs, field.Invalid(path.Child("maxDelay"), r.MaxDelay.String(), "must not be less than initialDelay"))
	}
	if r.QPS <= 0 {
		errs = append(errs, field.Invalid(path.Child("qps"), r.QPS, "must be positive"))
	}
	if r.Burst < 1 {
		errs = append(errs, field.Invalid(path.Child("burst"), r.Burst, "must be at least 1"))
	}
	return errs
}

func (v VolumeSaveConfig) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch v.Mode {
	case VolumeSaveRetry:
		if v.Retries < 1 {
			errs = append(errs, field.Invalid(path.Child("retries"), v.Retries, "must be at least 1"))
		}
	case VolumeSaveRetryForever:
	default:
		errs = append(errs, field.NotSupported(path.Child("mode"), v.Mode, []VolumeSaveMode{VolumeSaveRetry, VolumeSaveRetryForever}))
	}
	if v.Interval <= 0 {
		errs = append(errs, field.Invalid(path.Child("interval"), v.Interval.String(), "must be positive"))
	}
	return errs
}

func (t TimeoutConfig) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, timeout := range []struct {
		name string
		d    time.Duration
	}{{"provision", t.Provision}, {"delete", t.Delete}, {"drain", t.Drain}} {
		if timeout.d <= 0 {
			errs = append(errs, field.Invalid(path.Child(timeout.name), timeout.d.String(), "must be positive"))
		}
	}
	return errs
}

// Validate checks the timings and namespace of an enabled election, as the
// elector needs them.
func (l LeaderElectionConfig) Validate() error {
	return l.validate(field.NewPath("leaderElection")).ToAggregate()
}

func (l LeaderElectionConfig) validate(path *field.Path) field.ErrorList {
	if !l.Enabled {
		return nil
	}
	var errs field.ErrorList
	if l.Namespace == "" {
		errs = append(errs, field.Required(path.Child("namespace"), "the namespace of the Lease"))
	}
	if l.RetryPeriod <= 0 {
		errs = append(errs, field.Invalid(path.Child("retryPeriod"), l.RetryPeriod.String(), "must be positive"))
	}
	// The same bounds client-go's elector enforces, reported up front.
	if l.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(l.RetryPeriod)) {
		errs = append(errs, field.Invalid(path.Child("renewDeadline"), l.RenewDeadline.String(),
			fmt.Sprintf("must be greater than retryPeriod times %v", leaderelection.JitterFactor)))
	}
	if l.LeaseDuration <= l.RenewDeadline {
		errs = append(errs, field.Invalid(path.Child("leaseDuration"), l.LeaseDuration.String(), "must be greater than renewDeadline"))
	}
	return errs
}
