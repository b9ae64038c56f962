package provisioning

import "time"

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
	Finalizer      bool
	Retry          RetryConfig
	VolumeSave     VolumeSaveConfig
	LeaderElection LeaderElectionConfig
}

// RetryConfig tunes failure thresholds and the work queues' rate limiters.
type RetryConfig struct {
	// ProvisionFailureThreshold is how many times a claim is tried before the
	// controller gives up until the claim changes; 0 retries forever.
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

// LeaderElectionConfig tunes the per-instance Lease.
type LeaderElectionConfig struct {
	// Enabled turns on leader election. Without it the controller works as soon
	// as it runs (tests, single replicas).
	Enabled bool
	// Namespace holds the Lease.
	Namespace string
	// Identity names this replica in the Lease.
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
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
		LeaderElection: LeaderElectionConfig{
			Enabled:       true,
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
		},
	}
}
