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

package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InstanceCleanupFinalizer is put on every ProvisionerConfig by the manager, so
// that deleting the object first stops its instance, releases its Lease and
// removes its metric series.
const InstanceCleanupFinalizer = "provfleet.io/instance-cleanup"

// Condition types of ProvisionerConfigStatus.Conditions.
const (
	// ConditionReady is True while an instance runs with the observed spec.
	ConditionReady = "Ready"
	// ConditionLeading is True where a replica of the fleet holds the
	// provisioner's Lease.
	ConditionLeading = "Leading"
)

// Condition reasons.
const (
	// ReasonRunning: the instance runs and this replica leads it.
	ReasonRunning = "Running"
	// ReasonStandby: the instance runs and waits for another replica's Lease.
	ReasonStandby = "Standby"
	// ReasonPaused: spec.paused is true; nothing is provisioned or deleted.
	ReasonPaused = "Paused"
	// ReasonInvalidSpec: the spec passed the CRD but the manager refuses it,
	// e.g. a path outside --host-path-root or a pathPattern that does not parse.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonProvisionerNameConflict: an older ProvisionerConfig already uses one
	// of this object's provisioner names.
	ReasonProvisionerNameConflict = "ProvisionerNameConflict"
	// ReasonLeaseNameConflict: an older ProvisionerConfig has another
	// provisionerName with the same Lease name (e.g. a.b/c and a.b-c); this one
	// runs once the older is deleted.
	ReasonLeaseNameConflict = "LeaseNameConflict"
	// ReasonBackendOverlap: the backend's directories overlap an older
	// ProvisionerConfig's (hostPath paths or NFS mount paths of which one
	// contains the other, or overlapping exports of one NFS server); this one
	// runs once the older is deleted or moved.
	ReasonBackendOverlap = "BackendOverlap"
	// ReasonBackendUnavailable: the backend could not be started, the custom
	// driver is not compiled into this manager, or the running instance's
	// last probe of its storage failed (the message is the storage's error;
	// the instance keeps running and recovers once a probe succeeds).
	ReasonBackendUnavailable = "BackendUnavailable"
	// ReasonNoNodeServed: no selected node has a node agent that serves this
	// hostPath provisioner; status.nodes says why for each.
	ReasonNoNodeServed = "NoNodeServed"
	// ReasonNoNodeAgent: a selected node has no node agent holding its Lease
	// (status.nodes.unserved).
	ReasonNoNodeAgent = "NoNodeAgent"
	// ReasonNodeAgentPending: a selected node's agent runs but has not
	// reported on this ProvisionerConfig yet, as for a moment after either
	// starts (status.nodes.unserved); no Event is emitted for it.
	ReasonNodeAgentPending = "NodeAgentPending"
	// ReasonBackendStuck: a backend call runs past its deadline (see
	// spec.timeouts), or a stopped instance gave up waiting for one and its
	// replacement waits for the old instance's Lease to expire.
	ReasonBackendStuck = "BackendStuck"
)

// Values of ProvisionerConfigStatus.Backend for the built-in backends; a custom
// backend is reported as "custom/<driver>".
const (
	BackendHostPath = "hostPath"
	BackendNFS      = "nfs"
	BackendCustom   = "custom"
)

// ProvisionerConfig runs one volume provisioner in the fleet manager: claims of
// StorageClasses whose provisioner is spec.provisionerName (or one of
// spec.additionalProvisionerNames) get volumes from spec.backend.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=pcfg,categories=provfleet
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Provisioner",type=string,JSONPath=`.spec.provisionerName`
// +kubebuilder:printcolumn:name="Backend",type=string,JSONPath=`.status.backend`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader`
// +kubebuilder:printcolumn:name="Nodes",type=string,JSONPath=`.status.nodes.summary`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
type ProvisionerConfig struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired provisioner.
	// +required
	Spec ProvisionerConfigSpec `json:"spec"`

	// status is written by the fleet manager.
	// +optional
	Status ProvisionerConfigStatus `json:"status,omitempty"`
}

// ProvisionerConfigList is a list of ProvisionerConfigs.
//
// +kubebuilder:object:root=true
type ProvisionerConfigList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the ProvisionerConfigs.
	Items []ProvisionerConfig `json:"items"`
}

// ProvisionerConfigSpec is the desired state of one provisioner.
//
// +kubebuilder:validation:XValidation:rule="!has(self.additionalProvisionerNames) || !(self.provisionerName in self.additionalProvisionerNames)",message="additionalProvisionerNames must not repeat provisionerName"
// +kubebuilder:validation:XValidation:rule="!has(self.backend.nfs) || !has(self.backend.nfs.nfsSubdir) || (has(self.additionalProvisionerNames) && self.backend.nfs.nfsSubdir.provisionerName in self.additionalProvisionerNames)",message="backend.nfs.nfsSubdir.provisionerName must be one of additionalProvisionerNames"
type ProvisionerConfigSpec struct {
	// provisionerName is the name StorageClasses put in their provisioner field
	// to use this provisioner. It also names the provisioner's Lease: "/" made
	// "-" as the upstream library does, or, when that is not a valid object
	// name (upper case, "_"), lower-cased with a hash of the name appended.
	// Immutable, and unique across ProvisionerConfigs: of two objects with the
	// same name the older runs and the newer reports ProvisionerNameConflict,
	// and of two names with one Lease name (a.b/c and a.b-c) the newer reports
	// LeaseNameConflict.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="provisionerName is immutable"
	// +required
	ProvisionerName ProvisionerName `json:"provisionerName"`

	// additionalProvisionerNames are further provisioner names this provisioner
	// answers to, e.g. the name of the Deployment it replaces.
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +optional
	AdditionalProvisionerNames []ProvisionerName `json:"additionalProvisionerNames,omitempty"`

	// paused stops provisioning and deleting volumes while keeping the object;
	// the provisioner is reported Ready=False with reason Paused.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// workers is the number of claim workers and the number of volume workers.
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +optional
	Workers int32 `json:"workers,omitempty"`

	// resyncPeriod is how often every claim and volume is looked at again, from
	// 1s to 24h.
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('24h'))",message="resyncPeriod must be between 1s and 24h"
	// +optional
	ResyncPeriod *metav1.Duration `json:"resyncPeriod,omitempty"`

	// finalizer puts a finalizer on provisioned PersistentVolumes, so a
	// PersistentVolume object never goes away before its backend volume is
	// deleted. false takes it off this provisioner's PersistentVolumes that
	// carry it (one being deleted keeps it until its backend volume is), so
	// none hangs in Terminating once the provisioner is gone.
	// +kubebuilder:default=true
	// +optional
	Finalizer *bool `json:"finalizer,omitempty"`

	// retry tunes failure thresholds and the work queues' rate limiters.
	// +kubebuilder:default={}
	// +optional
	Retry RetrySpec `json:"retry,omitempty"`

	// volumeSave tunes how the PersistentVolume of a freshly provisioned volume
	// is saved when the API refuses it.
	// +kubebuilder:default={}
	// +optional
	VolumeSave VolumeSaveSpec `json:"volumeSave,omitempty"`

	// timeouts bound the backend's calls and the stop of this provisioner.
	// +kubebuilder:default={}
	// +optional
	Timeouts TimeoutsSpec `json:"timeouts,omitempty"`

	// leaderElection tunes this provisioner's Lease.
	// +kubebuilder:default={}
	// +optional
	LeaderElection LeaderElectionSpec `json:"leaderElection,omitempty"`

	// backend is where volumes are made; exactly one member is set.
	// +required
	Backend BackendSpec `json:"backend"`
}

// ProvisionerName is a name in the form StorageClass.provisioner accepts: a
// qualified name, i.e. an optional DNS subdomain prefix and "/", then a name
// part of at most 63 characters. Names are compared with their case, as the PV
// binder compares StorageClass provisioners: example.com/Fast and
// example.com/fast are two provisioners.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=317
// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self.lowerAscii()).hasValue()",message="must be a valid StorageClass provisioner name: an optional DNS subdomain prefix and '/', then at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
type ProvisionerName string

// The has() guards in the rules of RetrySpec and LeaderElectionSpec let the
// apiserver check the rules against their parents' `default: {}`, which it does
// before member defaults apply.

// RetrySpec tunes failure thresholds and rate limiting.
//
// +kubebuilder:validation:XValidation:rule="!has(self.initialDelay) || !has(self.maxDelay) || !self.initialDelay.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || !self.maxDelay.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self.initialDelay) <= duration(self.maxDelay)",message="initialDelay must not exceed maxDelay"
type RetrySpec struct {
	// provisionFailureThreshold is how many times a claim whose provisioning
	// failed is retried before the provisioner gives up on it until the claim
	// changes: a claim is tried at most provisionFailureThreshold+1 times, as
	// with FailedProvisionThreshold of sig-storage-lib-external-provisioner.
	// 0 retries forever.
	// +kubebuilder:default=15
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	ProvisionFailureThreshold *int32 `json:"provisionFailureThreshold,omitempty"`

	// deleteFailureThreshold is how many times a failed volume deletion is
	// retried before the provisioner gives up on it until the volume changes:
	// a deletion is tried at most deleteFailureThreshold+1 times, as with
	// FailedDeleteThreshold of sig-storage-lib-external-provisioner. 0 retries
	// forever.
	// +kubebuilder:default=15
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	DeleteFailureThreshold *int32 `json:"deleteFailureThreshold,omitempty"`

	// exponentialBackoff doubles an item's delay after each failure, from
	// initialDelay up to maxDelay; false waits initialDelay before every retry.
	// +kubebuilder:default=true
	// +optional
	ExponentialBackoff *bool `json:"exponentialBackoff,omitempty"`

	// initialDelay is the delay before an item's first retry, from 1ms to 1h.
	// +kubebuilder:default="15s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('1ms') && duration(self) <= duration('1h'))",message="initialDelay must be between 1ms and 1h"
	// +optional
	InitialDelay *metav1.Duration `json:"initialDelay,omitempty"`

	// maxDelay caps an item's retry delay, from 1ms to 24h.
	// +kubebuilder:default="1000s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('1ms') && duration(self) <= duration('24h'))",message="maxDelay must be between 1ms and 24h"
	// +optional
	MaxDelay *metav1.Duration `json:"maxDelay,omitempty"`

	// qps is the overall rate, in items per second, at which each work queue
	// hands out retries.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	QPS int32 `json:"qps,omitempty"`

	// burst is how many retries each work queue may hand out at once above qps.
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	Burst int32 `json:"burst,omitempty"`
}

// VolumeSaveMode says what happens when the PersistentVolume of a freshly
// provisioned volume cannot be saved.
//
// +kubebuilder:validation:Enum=Retry;RetryForever
type VolumeSaveMode string

const (
	// VolumeSaveRetry tries volumeSave.retries times, then deletes the backend
	// volume so nothing leaks, and emits an Event.
	VolumeSaveRetry VolumeSaveMode = "Retry"
	// VolumeSaveRetryForever never deletes the backend volume and keeps trying.
	VolumeSaveRetryForever VolumeSaveMode = "RetryForever"
)

// VolumeSaveSpec tunes how a provisioned PersistentVolume is saved.
type VolumeSaveSpec struct {
	// mode is Retry (try retries times, then delete the backend volume) or
	// RetryForever (never delete the backend volume, keep trying).
	// +kubebuilder:default=Retry
	// +optional
	Mode VolumeSaveMode `json:"mode,omitempty"`

	// retries is how many times mode Retry tries to save a PersistentVolume.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Retries int32 `json:"retries,omitempty"`

	// interval is the delay between two tries, from 1ms to 10m.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('1ms') && duration(self) <= duration('10m'))",message="interval must be between 1ms and 10m"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// TimeoutsSpec bounds backend calls, which may hang (a hard NFS mount, a stuck
// remote API), and the stop of the provisioner. Changes apply without a
// restart.
type TimeoutsSpec struct {
	// provision is the deadline of the context of each Provision call, and of
	// the backend's other calls about a claim, from 1s to 1h. A call that ends
	// with its deadline fails and is retried. A call that ignores its deadline
	// and goes on is reported, until it returns, by the Ready reason
	// BackendStuck, the metric provisioner_backend_calls_stuck and the
	// manager's /readyz.
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('1h'))",message="provision must be between 1s and 1h"
	// +optional
	Provision *metav1.Duration `json:"provision,omitempty"`

	// delete is the same as provision for each Delete call and the backend's
	// other calls about a volume, from 1s to 1h.
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('1h'))",message="delete must be between 1s and 1h"
	// +optional
	Delete *metav1.Duration `json:"delete,omitempty"`

	// drain is how long a stopping provisioner (a spec change that needs a
	// restart, a deleted ProvisionerConfig, a manager shutdown) waits for its
	// backend calls, which were cancelled, to return, from 1s to 10m. It then
	// stops anyway, and leaves its Lease to expire rather than release it, so
	// that no replica works on the claims of a call that may still finish
	// before the Lease expired; its replacement in the same manager starts
	// only then. Keep it below the pod's terminationGracePeriodSeconds.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('10m'))",message="drain must be between 1s and 10m"
	// +optional
	Drain *metav1.Duration `json:"drain,omitempty"`
}

// LeaderElectionSpec tunes the provisioner's Lease. client-go's elector needs
// renewDeadline < leaseDuration and renewDeadline > 1.2 × retryPeriod.
//
// +kubebuilder:validation:XValidation:rule="!has(self.renewDeadline) || !has(self.leaseDuration) || !self.renewDeadline.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || !self.leaseDuration.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self.renewDeadline) < duration(self.leaseDuration)",message="renewDeadline must be less than leaseDuration"
// +kubebuilder:validation:XValidation:rule="!has(self.retryPeriod) || !has(self.renewDeadline) || !self.retryPeriod.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || !self.renewDeadline.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self.retryPeriod).getMilliseconds() * 6 < duration(self.renewDeadline).getMilliseconds() * 5",message="retryPeriod must be less than renewDeadline / 1.2 (client-go's jitter factor)"
type LeaderElectionSpec struct {
	// leaseDuration is how long other replicas wait before taking over a Lease
	// that is not renewed, from 1s to 10m.
	// +kubebuilder:default="15s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('10m'))",message="leaseDuration must be between 1s and 10m"
	// +optional
	LeaseDuration *metav1.Duration `json:"leaseDuration,omitempty"`

	// renewDeadline is how long the leader keeps trying to renew before it steps
	// down, from 1s to 10m.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('10m'))",message="renewDeadline must be between 1s and 10m"
	// +optional
	RenewDeadline *metav1.Duration `json:"renewDeadline,omitempty"`

	// retryPeriod is the delay between two attempts to acquire or renew the
	// Lease, from 100ms to 1m.
	// +kubebuilder:default="2s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('100ms') && duration(self) <= duration('1m'))",message="retryPeriod must be between 100ms and 1m"
	// +optional
	RetryPeriod *metav1.Duration `json:"retryPeriod,omitempty"`
}

// BackendSpec selects and configures the storage backend; exactly one member is
// set.
//
// +kubebuilder:validation:XValidation:rule="[has(self.hostPath), has(self.nfs), has(self.custom)].filter(x, x).size() == 1",message="exactly one backend must be set: hostPath, nfs or custom"
type BackendSpec struct {
	// hostPath makes a directory per volume on a node's filesystem.
	// +optional
	HostPath *HostPathBackend `json:"hostPath,omitempty"`

	// nfs makes a subdirectory per volume on an NFS export, which the
	// manager reaches over NFSv3 itself (or through a mount in its pod).
	// +optional
	NFS *NFSBackend `json:"nfs,omitempty"`

	// custom selects a backend compiled into a custom manager binary.
	// +optional
	Custom *CustomBackend `json:"custom,omitempty"`
}

// ProvisionerNames returns every name the object answers to, as written:
// the PV binder and the provisioned-by annotation keep the case of a name.
func (s *ProvisionerConfigSpec) ProvisionerNames() []string {
	names := []string{string(s.ProvisionerName)}
	for _, name := range s.AdditionalProvisionerNames {
		names = append(names, string(name))
	}
	return names
}

// Name is the value of status.backend for this backend: hostPath, nfs,
// custom/<driver>, or empty when no member is set.
func (b BackendSpec) Name() string {
	switch {
	case b.HostPath != nil:
		return BackendHostPath
	case b.NFS != nil:
		return BackendNFS
	case b.Custom != nil:
		return BackendCustom + "/" + b.Custom.Driver
	}
	return ""
}

// NodeHostPath returns the hostPath backend when node agents serve it, nil
// otherwise: a sharedFileSystem one is the manager's, as an NFS one is.
func (b BackendSpec) NodeHostPath() *HostPathBackend {
	if b.HostPath == nil || b.HostPath.SharedFileSystem {
		return nil
	}
	return b.HostPath
}

// JoinPaths lists first and then others, as a path and its
// additionalPaths are read.
func JoinPaths(first AbsolutePath, others []AbsolutePath) []string {
	paths := []string{string(first)}
	for _, p := range others {
		paths = append(paths, string(p))
	}
	return paths
}

// SplitPaths is the inverse of JoinPaths; paths must not be empty.
func SplitPaths(paths []string) (AbsolutePath, []AbsolutePath) {
	var others []AbsolutePath
	for _, p := range paths[1:] {
		others = append(others, AbsolutePath(p))
	}
	return AbsolutePath(paths[0]), others
}

// AbsolutePath is an absolute path without ".." segments.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=4096
// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must be an absolute path"
// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.](/|$)')",message="must not contain a '..' segment"
type AbsolutePath string

// PathPattern is a Go text/template rendered per claim into a relative path
// under the backend's base directory, over .PVName and .PVC (the claim).
//
// +kubebuilder:validation:MaxLength=1024
// +kubebuilder:validation:XValidation:rule="!self.startsWith('/')",message="must be relative to the backend's base directory"
// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.](/|$)')",message="must not contain a '..' path element: every volume lies under the backend's base directory"
type PathPattern string

// OnDeletePolicy says what happens to a volume's directory when the volume is
// deleted.
//
// +kubebuilder:validation:Enum=Delete;Retain;Archive
type OnDeletePolicy string

const (
	// OnDeleteDelete removes the directory.
	OnDeleteDelete OnDeletePolicy = "Delete"
	// OnDeleteRetain keeps the directory as it is.
	OnDeleteRetain OnDeletePolicy = "Retain"
	// OnDeleteArchive renames the directory to archived-<name>-<UTC timestamp>.
	OnDeleteArchive OnDeletePolicy = "Archive"
)

// HostPathVolumeType is the kind of PersistentVolume a hostPath backend makes.
//
// +kubebuilder:validation:Enum=Local;HostPath
type HostPathVolumeType string

const (
	// HostPathVolumeLocal makes local volumes with required node affinity.
	HostPathVolumeLocal HostPathVolumeType = "Local"
	// HostPathVolumeHostPath makes hostPath volumes.
	HostPathVolumeHostPath HostPathVolumeType = "HostPath"
)

// HostPathBackend makes a directory per volume under path on the nodes it
// serves. The node agent of each node (the manager started with --role=node,
// a DaemonSet) makes and deletes the directories on its own node; the
// cluster-wide manager places Immediate claims, reports the nodes and handles
// removed nodes. With sharedFileSystem the manager alone serves path, a file
// system every node shares.
//
// +kubebuilder:validation:XValidation:rule="!has(self.nodeName) || !has(self.nodeSelector)",message="nodeName and nodeSelector are exclusive: nodeName serves one node, nodeSelector a set"
// +kubebuilder:validation:XValidation:rule="!has(self.sharedFileSystem) || !self.sharedFileSystem || (has(self.volumeType) && self.volumeType == 'HostPath')",message="sharedFileSystem volumes have no node affinity, which a local volume requires: set volumeType HostPath"
// +kubebuilder:validation:XValidation:rule="!has(self.sharedFileSystem) || !self.sharedFileSystem || !(has(self.nodeName) || has(self.nodeSelector) || has(self.nodePaths) || has(self.nodeRemoval) || has(self.additionalPaths))",message="sharedFileSystem serves one path that every node mounts: nodeName, nodeSelector, nodePaths, nodeRemoval and additionalPaths do not apply"
// +kubebuilder:validation:XValidation:rule="!has(self.sharedFileSystem) || !self.sharedFileSystem || !has(self.nodeAffinityKey) || self.nodeAffinityKey == 'kubernetes.io/hostname'",message="sharedFileSystem volumes are pinned to no node: nodeAffinityKey does not apply"
// +kubebuilder:validation:XValidation:rule="!has(self.sharedFileSystem) || !self.sharedFileSystem || !has(self.storageClasses) || self.storageClasses.all(c, !has(c.additionalPaths) && !has(c.nodePaths))",message="sharedFileSystem serves one path per StorageClass: storageClasses[].additionalPaths and nodePaths do not apply"
type HostPathBackend struct {
	// path is the base directory on each node, unless nodePaths names
	// another for that node; it must lie under the node agent's
	// --host-path-root.
	// +required
	Path AbsolutePath `json:"path"`

	// additionalPaths are further base directories on each node that
	// nodePaths does not cover, each under the node agent's
	// --host-path-root and none inside another or inside path. New volumes
	// go in path, unless their StorageClass parameter nodePath (that of
	// local-path-provisioner) names one of these; the volumes in any of them
	// are released by the node's agent.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	AdditionalPaths []AbsolutePath `json:"additionalPaths,omitempty"`

	// nodeAffinityKey is the node label new volumes are pinned with, by
	// required node affinity <key> In [<the node's value of that label, or
	// the node's name when it has none>], as local-path-provisioner's
	// StorageClass parameter of that name does. The label's value must tell
	// the node apart, or a volume is mounted wherever another node carries
	// that value too; the node agents may pin to their own node's value only.
	// A StorageClass parameter nodeAffinityKey other than this key is
	// refused.
	// +kubebuilder:default="kubernetes.io/hostname"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self.split('/')[size(self.split('/')) - 1].size() <= 63 && (size(self.split('/')) == 1 || self.split('/')[0].size() <= 253)",message="must be a qualified label name: a prefix of at most 253 characters and a name of at most 63"
	// +optional
	NodeAffinityKey string `json:"nodeAffinityKey,omitempty"`

	// sharedFileSystem says that every node mounts one shared file system
	// at path, as local-path-provisioner's sharedFileSystemPath: the
	// manager itself, not a node agent, makes and deletes the volumes,
	// through its own mount of that file system at path (under its
	// --host-path-root: mount the node's path at the same path in the
	// manager's pod), and writes their PersistentVolumes without node
	// affinity, so that pods of any node mount them, with any access mode.
	// The volumeType must be HostPath; the StorageClass parameters
	// nodePath and nodeAffinityKey are ignored, as local-path-provisioner
	// ignores them there.
	// +optional
	SharedFileSystem bool `json:"sharedFileSystem,omitempty"`

	// volumeType is Local (a local PersistentVolume with node affinity) or
	// HostPath (a hostPath PersistentVolume).
	// +kubebuilder:default=Local
	// +optional
	VolumeType HostPathVolumeType `json:"volumeType,omitempty"`

	// nodeName is the one-node form: only this node is served. Empty, the
	// nodes are those of nodeSelector.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$`
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// nodeSelector selects the nodes served by their labels. With neither
	// nodeName nor nodeSelector every node that runs a node agent is served.
	// +optional
	NodeSelector *NodeLabelSelector `json:"nodeSelector,omitempty"`

	// nodePaths overrides path on some nodes: the first entry that names or
	// selects a node gives its base directory; a node no entry matches uses
	// path.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +optional
	NodePaths []NodePath `json:"nodePaths,omitempty"`

	// storageClasses give the claims of some StorageClasses base
	// directories of their own, as local-path-provisioner's
	// storageClassConfigs do: a claim of a listed class gets its directory
	// in that entry's base directories on its node (path, additionalPaths
	// and nodePaths read as the backend's own), a claim of any other class
	// in the backend's. The volumes of every base directory are released
	// as the backend's are, whatever their class. A path may be listed by
	// several entries and the backend itself; a node serves at most 17
	// distinct base directories. With sharedFileSystem an entry has a path
	// alone, on the shared file system.
	// +listType=map
	// +listMapKey=storageClassName
	// +kubebuilder:validation:MaxItems=8
	// +optional
	StorageClasses []HostPathStorageClass `json:"storageClasses,omitempty"`

	// nodeRemoval is what the manager does with the volumes of a node whose
	// Node object was deleted. Unset, they are reported (Warning Events on
	// each volume and its claim, the metric
	// provisioner_removed_node_volumes) and kept.
	// +optional
	NodeRemoval *NodeRemoval `json:"nodeRemoval,omitempty"`

	// pathPattern renders each volume's directory under path; empty means the
	// PersistentVolume name. A '..' path element is refused; fixed text that
	// renders ".." for every claim in a way no rule sees, such as {{".."}},
	// makes the ProvisionerConfig Ready=False with reason InvalidSpec.
	// +optional
	PathPattern PathPattern `json:"pathPattern,omitempty"`

	// onDelete is what happens to a deleted volume's directory: Delete, Retain
	// or Archive.
	// +kubebuilder:default=Delete
	// +optional
	OnDelete OnDeletePolicy `json:"onDelete,omitempty"`

	// adoptRetainedDirectories gives a claim the directory its path pattern
	// renders when that directory exists without provfleet's owner marker
	// and is provably the one an earlier claim of the same namespace and
	// name used: exactly one PersistentVolume of this provisioner's names
	// (additionalProvisionerNames included) names it, as a local or hostPath volume of the same node and path, its claimRef
	// names the claim's namespace and name with another UID (the claim was
	// made again), it is Released, and its reclaim policy is Retain or its
	// recorded fate (provfleet.io/on-delete) is Retain. The directory's
	// contents, mode and owner are left as they are; the new
	// PersistentVolume records provfleet.io/adopted-from (the old one) and
	// the fate Retain, and the old one gets provfleet.io/adopted-by. Keep
	// the old PersistentVolume (reclaim policy Retain) for as long as its
	// claim may come back: without it there is no proof. The risk: a claim
	// of the same namespace and name is not necessarily the same
	// application (a namespace deleted and made again by someone else), and
	// the data may have changed since the old volume was released. Without
	// it (the default) such a directory is refused.
	// +optional
	AdoptRetainedDirectories bool `json:"adoptRetainedDirectories,omitempty"`

	// capacity optionally bounds what this backend hands out.
	// +optional
	Capacity *CapacitySpec `json:"capacity,omitempty"`

	// VolumeDirectory holds mode, uid and gid of each new volume directory.
	VolumeDirectory `json:",inline"`

	// localPathPatterns applies local-path-provisioner's StorageClass
	// patterns to new volume directories, as its setup script did with
	// the lines chown "${VOL_USER}:${VOL_GROUP}" "$VOL_DIR" (Owner) and
	// chmod "${VOL_PERM}" "$VOL_DIR" (Mode). A pattern is the class
	// parameter userPattern, groupPattern or permPattern, else the class
	// annotation of that name: a Go template over .PVName and .PVC
	// (Namespace, Name, Labels, Annotations), a missing key an error,
	// rendered with surrounding space trimmed. With Owner the rendered
	// user and group are numeric ids that own the directory (a name, or a
	// claim for which both render nothing, is refused with an Event, as
	// BusyBox's chown fails on it); a user without a group gives the group
	// of the same number. With Mode the rendered perm is an octal mode of
	// three or four digits (a symbolic mode is refused; nothing rendered
	// leaves the mode unchanged, as BusyBox's chmod does). A pattern that is
	// not applied is ignored. A class may not set both a pattern and the
	// parameter (uid, gid, mode) it would set. Owner needs a node agent
	// running as root. manager migrate --from local-path sets it from the
	// setup script.
	// +listType=set
	// +kubebuilder:validation:MaxItems=2
	// +optional
	LocalPathPatterns []LocalPathPattern `json:"localPathPatterns,omitempty"`
}

// LocalPathPattern names the line of local-path-provisioner's setup
// script whose patterns a hostPath backend applies.
//
// +kubebuilder:validation:Enum=Owner;Mode
type LocalPathPattern string

const (
	// LocalPathPatternOwner applies userPattern and groupPattern, as
	// chown "${VOL_USER}:${VOL_GROUP}" "$VOL_DIR" does.
	LocalPathPatternOwner LocalPathPattern = "Owner"
	// LocalPathPatternMode applies permPattern, as
	// chmod "${VOL_PERM}" "$VOL_DIR" does.
	LocalPathPatternMode LocalPathPattern = "Mode"
)

// NodePath is the base directory of the nodes it names or selects; exactly
// one of nodes and nodeSelector is set.
//
// +kubebuilder:validation:XValidation:rule="has(self.nodes) != has(self.nodeSelector)",message="exactly one of nodes and nodeSelector must be set"
type NodePath struct {
	// nodes are node names.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Nodes []string `json:"nodes,omitempty"`

	// nodeSelector selects nodes by their labels.
	// +optional
	NodeSelector *NodeLabelSelector `json:"nodeSelector,omitempty"`

	// path is the base directory on these nodes; it must lie under the node
	// agent's --host-path-root.
	// +required
	Path AbsolutePath `json:"path"`

	// additionalPaths are further base directories on these nodes, as the
	// backend's additionalPaths are on the others: new volumes go in path
	// unless their StorageClass parameter nodePath names one of these.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	AdditionalPaths []AbsolutePath `json:"additionalPaths,omitempty"`
}

// HostPathStorageClass is where the claims of one StorageClass get their
// directories.
type HostPathStorageClass struct {
	// storageClassName names the StorageClass.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	StorageClassName string `json:"storageClassName"`

	// path is the class's base directory on each node that nodePaths does
	// not cover; it must lie under the node agent's --host-path-root.
	// +required
	Path AbsolutePath `json:"path"`

	// additionalPaths are further base directories of the class on each
	// node that nodePaths does not cover: its new volumes go in path unless
	// their StorageClass parameter nodePath names one of these.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	AdditionalPaths []AbsolutePath `json:"additionalPaths,omitempty"`

	// nodePaths override path and additionalPaths on some nodes: the first
	// entry that names or selects a node gives the class's base directories
	// there.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +optional
	NodePaths []NodePath `json:"nodePaths,omitempty"`
}

// NodeLabelSelector selects nodes by their labels, as a Kubernetes label
// selector does: a node matches when it has every label of matchLabels and
// meets every expression of matchExpressions. An empty selector matches every
// node.
type NodeLabelSelector struct {
	// matchLabels are labels a node must have, with these values.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 317 && self[k].size() <= 63)",message="label keys must be at most 317 and values at most 63 characters long"
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	// matchExpressions are requirements on a node's labels.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	MatchExpressions []NodeLabelRequirement `json:"matchExpressions,omitempty"`
}

// NodeLabelRequirement is a requirement on a node label.
//
// +kubebuilder:validation:XValidation:rule="(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",message="values must be set for In and NotIn, and only for them"
type NodeLabelRequirement struct {
	// key is the label's key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +required
	Key string `json:"key"`

	// operator is In, NotIn, Exists or DoesNotExist.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	// +required
	Operator metav1.LabelSelectorOperator `json:"operator"`

	// values are the label values that In and NotIn compare with.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	Values []string `json:"values,omitempty"`
}

// LabelSelector returns s as a Kubernetes label selector.
func (s *NodeLabelSelector) LabelSelector() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	return out
}

// NodeRemovalPolicy says what happens to the volumes of a removed node.
//
// +kubebuilder:validation:Enum=Report;Delete
type NodeRemovalPolicy string

const (
	// NodeRemovalReport reports the volumes of a removed node and keeps them.
	NodeRemovalReport NodeRemovalPolicy = "Report"
	// NodeRemovalDelete deletes the PersistentVolumes of a node that stayed
	// removed for the grace period.
	NodeRemovalDelete NodeRemovalPolicy = "Delete"
)

// NodeRemoval is what the manager does with the volumes of a node whose Node
// object was deleted (by a cluster autoscaler, or a spot instance's end).
type NodeRemoval struct {
	// policy is Report (the volumes are reported and kept) or Delete: once
	// the node stayed removed for gracePeriod the manager deletes its
	// PersistentVolumes. A PersistentVolume bound to a claim then stays
	// Terminating, held by the kubernetes.io/pv-protection finalizer, and its
	// claim stays Bound until it is deleted; delete the claim, and it can be
	// made again on a live node (a StatefulSet does so). The directories
	// cannot be reached: a node that comes back under the same name has its
	// agent do to them what deleting each volume would have (its onDelete,
	// or Retain when its reclaim policy is not Delete), each only once its
	// PersistentVolume is fully gone.
	// +kubebuilder:default=Report
	// +optional
	Policy NodeRemovalPolicy `json:"policy,omitempty"`

	// gracePeriod is how long a node stays removed before Delete acts; a
	// node that comes back within it keeps its volumes.
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('0s') && duration(self) <= duration('8760h'))",message="gracePeriod must be between 0s and 8760h"
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}

// NFSBackend makes a subdirectory per volume on an NFS export.
type NFSBackend struct {
	// server is the NFS server's host name or IP address.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.:\[\]-]+$`
	// +required
	Server string `json:"server"`

	// path is the exported directory on the server.
	// +required
	Path AbsolutePath `json:"path"`

	// port is the one TCP port serving both MOUNT and NFS, as userspace
	// servers such as go-nfs serve them. Unset, the ports are asked of the
	// server's portmapper (port 111), as real servers run one. PersistentVolumes
	// get the mount options port=<port> and mountport=<port>, so that nodes
	// reach the same server; mountOptions may not name other ports.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// mountPath is where the export is mounted in the manager's pod. Unset,
	// the manager speaks NFSv3 to server:path itself: the pod needs no NFS
	// volume, no privilege and no restart to add an export. Set it for
	// servers that serve NFSv4 only.
	// +optional
	MountPath AbsolutePath `json:"mountPath,omitempty"`

	// pathPattern renders each volume's subdirectory; empty means the
	// PersistentVolume name. A '..' path element is refused; fixed text that
	// renders ".." for every claim in a way no rule sees, such as {{".."}},
	// makes the ProvisionerConfig Ready=False with reason InvalidSpec.
	// +optional
	PathPattern PathPattern `json:"pathPattern,omitempty"`

	// onDelete is what happens to a deleted volume's subdirectory: Delete,
	// Retain or Archive.
	// +kubebuilder:default=Delete
	// +optional
	OnDelete OnDeletePolicy `json:"onDelete,omitempty"`

	// adoptRetainedDirectories gives a claim the directory its path pattern
	// renders when that directory exists without provfleet's owner marker
	// and is provably the one an earlier claim of the same namespace and
	// name used: exactly one PersistentVolume of this provisioner's names
	// (additionalProvisionerNames included) names it, on the same server and path, its claimRef
	// names the claim's namespace and name with another UID (the claim was
	// made again), it is Released, and its reclaim policy is Retain or its
	// recorded fate (provfleet.io/on-delete) is Retain. The directory's
	// contents, mode and owner are left as they are; the new
	// PersistentVolume records provfleet.io/adopted-from (the old one) and
	// the fate Retain, and the old one gets provfleet.io/adopted-by. Keep
	// the old PersistentVolume (reclaim policy Retain) for as long as its
	// claim may come back: without it there is no proof. The risk: a claim
	// of the same namespace and name is not necessarily the same
	// application (a namespace deleted and made again by someone else), and
	// the data may have changed since the old volume was released. Without
	// it (the default) such a directory is refused.
	// +optional
	AdoptRetainedDirectories bool `json:"adoptRetainedDirectories,omitempty"`

	// mountOptions are put on every PersistentVolume, e.g. nfsvers=4.1.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +optional
	MountOptions []string `json:"mountOptions,omitempty"`

	// capacity optionally bounds what this backend hands out.
	// +optional
	Capacity *CapacitySpec `json:"capacity,omitempty"`

	// VolumeDirectory holds mode, uid and gid of each new volume
	// subdirectory.
	VolumeDirectory `json:",inline"`

	// nfsSubdir names the nfs-subdir-external-provisioner this backend takes
	// over, whose name must be one of additionalProvisionerNames. The claims
	// of its StorageClasses are served as it served them: their parameters
	// (pathPattern, onDelete, archiveOnDelete) read as it reads them, and
	// from v4.0.3 on the claim annotations k8s-sigs.io/nfs-directory-mode,
	// -uid and -gid. Each volume it made gets, once and before anything is
	// done to it, the fate of its directory recorded in the annotation
	// provfleet.io/on-delete, decided from its StorageClass as it decides at
	// delete time; a later change of the class changes nothing. Archives get
	// its name, archived-<directory> at the top of the export.
	// +optional
	NFSSubdir *NFSSubdirOrigin `json:"nfsSubdir,omitempty"`
}

// NFSSubdirOrigin is an nfs-subdir-external-provisioner whose volumes and
// StorageClasses an NFS backend takes over.
type NFSSubdirOrigin struct {
	// provisionerName is the name it provisioned as: its PROVISIONER_NAME,
	// the provisioner of its StorageClasses and the
	// pv.kubernetes.io/provisioned-by of its volumes.
	// +required
	ProvisionerName ProvisionerName `json:"provisionerName"`

	// version is the version of its image, such as v4.0.2: releases before
	// v4.0.3 ignore the k8s-sigs.io/nfs-directory-* claim annotations, give
	// a claim whose pathPattern renders nothing the whole export, and never
	// release a directory nested in folders.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^v?[0-9]+\.[0-9]+\.[0-9]+$`
	// +required
	Version string `json:"version"`
}

// VolumeDirectory is the mode and owner of each new volume directory, set
// when the directory is made; existing directories are left as they are. The
// fields sit beside the backend's others, under the names of the
// StorageClass parameters that override them for the claims of one class
// (parameters: {mode: "0750", uid: "1000", gid: "1000"}), as pathPattern
// does; uid and gid are also csi-driver-nfs' names, and mode is not its
// mountPermissions, since it is a directory's mode, not a mount's. Unset, a
// directory gets what nfs-subdir-external-provisioner gives: mode 0777 and
// the manager's user as owner (on NFS, whom the server maps it to).
//
// Under root_squash, the default of NFS servers, the manager's root is the
// server's anonymous user: a uid or gid is refused (no_root_squash on the
// export allows them, and gives root on the export to every client that
// reaches the server: AUTH_SYS believes any Pod that says it is root), while mode still applies, the manager owning the
// directory; with all_squash every directory belongs to the anonymous user
// whatever uid and gid say, so they are refused too. A refused uid or gid
// fails the claim with an Event saying so and leaves no directory behind. On
// a hostPath backend they need a manager running as root.
type VolumeDirectory struct {
	// mode is the permission bits of a new volume directory in octal, as chmod
	// takes them: three digits ("0750" or "750"), or four with the setuid (4),
	// setgid (2) and sticky (1) bits first ("2770"). It is set exactly,
	// whatever the umask, and applies under NFS root_squash too. Empty means
	// "0777", as nfs-subdir-external-provisioner gives. The StorageClass
	// parameter mode overrides it.
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-7]{3,4}$')",message="must be an octal mode of three or four digits, such as \"0750\" or \"2770\""
	// +optional
	Mode string `json:"mode,omitempty"`

	// uid is the user that owns a new volume directory; unset leaves it the
	// manager's (or whom the NFS server maps it to). Only root may set it: a
	// hostPath backend needs a manager running as root, and an NFS export
	// no_root_squash, which gives root on the export to every client that
	// reaches the server. The StorageClass parameter uid overrides it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	UID *int64 `json:"uid,omitempty"`

	// gid is the group that owns a new volume directory; unset leaves it the
	// manager's (or whom the NFS server maps it to). Like uid it needs root
	// (or a group of the manager's user). The StorageClass parameter gid
	// overrides it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	GID *int64 `json:"gid,omitempty"`
}

// CustomBackend selects a backend registered in a custom manager binary.
type CustomBackend struct {
	// driver is the name the backend was registered under
	// (fleet.WithBackend); a manager without it reports BackendUnavailable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$`
	// +required
	Driver string `json:"driver"`

	// parameters are handed to the backend as they are.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 253 && self[k].size() <= 4096)",message="parameter names must be at most 253 and values at most 4096 characters long"
	// +optional
	Parameters map[string]string `json:"parameters,omitempty"`
}

// CapacitySpec is a budget for a backend: claims that would exceed it stay
// Pending until room frees up. At least one member is set.
//
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!has(self.storage) || quantity(string(self.storage)).isGreaterThan(quantity('0'))",message="storage must be positive"
type CapacitySpec struct {
	// storage is the total size of all volumes of this backend, e.g. 500Gi.
	// +optional
	Storage *resource.Quantity `json:"storage,omitempty"`

	// maxVolumes is the most volumes this backend holds at once.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxVolumes int32 `json:"maxVolumes,omitempty"`
}

// ProvisionerConfigStatus is what the fleet manager observed and did.
type ProvisionerConfigStatus struct {
	// observedGeneration is the metadata.generation the running instance uses.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// leader is the identity of the manager replica holding this provisioner's
	// Lease.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Leader string `json:"leader,omitempty"`

	// backend names the backend in use: hostPath, nfs or custom/<driver>.
	// +kubebuilder:validation:MaxLength=260
	// +optional
	Backend string `json:"backend,omitempty"`

	// conditions are Ready (the instance runs with the observed spec) and
	// Leading (a replica of this fleet holds the Lease).
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// storage is the space of the backend's storage, as the leader's last
	// successful probe found it; absent for a backend that cannot be probed.
	// It is rewritten when the available space moves by a hundredth of the
	// total or more.
	// +optional
	Storage *StorageStatus `json:"storage,omitempty"`

	// nodes counts the nodes a hostPath backend serves; absent for other
	// backends.
	// +optional
	Nodes *NodesStatus `json:"nodes,omitempty"`
}

// NodesStatus counts the nodes a hostPath backend serves.
type NodesStatus struct {
	// selected is how many nodes nodeName or nodeSelector selects.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +required
	Selected int32 `json:"selected"`

	// served is how many of them have a node agent that runs this
	// provisioner.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +required
	Served int32 `json:"served"`

	// summary is served/selected, as the Nodes printer column shows it.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Summary string `json:"summary,omitempty"`

	// unserved names some of the selected nodes that are not served, each
	// with why.
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Unserved []UnservedNode `json:"unserved,omitempty"`
}

// UnservedNode is a selected node that no node agent serves, and why.
type UnservedNode struct {
	// node is the node's name.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Node string `json:"node"`

	// reason is NoNodeAgent (no agent holds the node's Lease),
	// NodeAgentPending (the agent has not reported on this provisioner yet),
	// InvalidSpec (the agent refuses the node's path), BackendUnavailable
	// (the node's disk cannot be reached) or another Ready reason of the
	// agent.
	// +kubebuilder:validation:MaxLength=128
	// +required
	Reason string `json:"reason"`

	// message is the agent's explanation.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// StorageStatus is the space of a backend's storage.
type StorageStatus struct {
	// available is what new volumes may still use: a claim that requests
	// more is refused.
	// +required
	Available resource.Quantity `json:"available"`

	// total is the size of the storage.
	// +required
	Total resource.Quantity `json:"total"`
}
