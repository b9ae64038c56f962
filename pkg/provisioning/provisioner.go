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
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ProvisioningState says what a backend did with a Provision call and so whether
// the controller must keep the claim in its claims-in-progress set.
type ProvisioningState string

const (
	// ProvisioningFinished means the operation is over, successfully or not. A failed
	// Finished call is final for this attempt; nothing was left behind.
	ProvisioningFinished ProvisioningState = "Finished"
	// ProvisioningInBackground means the backend is still working and a retry must
	// continue the same operation, even if the claim was deleted meanwhile, so the
	// backend can clean up. Its error says what the backend is doing: the claim
	// gets it in a Normal Event, and it never counts as a failure; a backend
	// whose work failed returns ProvisioningFinished with the error.
	ProvisioningInBackground ProvisioningState = "InBackground"
	// ProvisioningNoChange means nothing changed since the previous call; keep whatever
	// in-progress state the claim had.
	ProvisioningNoChange ProvisioningState = "NoChange"
	// ProvisioningReschedule means the selected node cannot host the volume; the
	// controller removes the selected-node annotation so the scheduler picks again.
	ProvisioningReschedule ProvisioningState = "Reschedule"
)

// ProvisionOptions carries everything a backend needs to create one volume.
type ProvisionOptions struct {
	// StorageClass is the claim's class.
	StorageClass *storagev1.StorageClass
	// PVName is the name the PersistentVolume must have: pvc-<claim UID>. The
	// controller names the returned PersistentVolume so in any case.
	PVName string
	// PVC is the claim being provisioned. The manager's informers trim what
	// no controller reads (internal/cachetrim), so it may lack its managed
	// fields, the last-applied annotation and its status but the phase,
	// capacity and resize.
	PVC *corev1.PersistentVolumeClaim
	// SelectedNode is the node chosen by the scheduler for WaitForFirstConsumer
	// classes, read from the shared node informer; nil otherwise. In the
	// manager it has its metadata (less managed fields and the last-applied
	// annotation) and spec, not its status.
	SelectedNode *corev1.Node
	// DataSource is what the volume is to be filled from: the claim's
	// spec.dataSourceRef, else its spec.dataSource, with the namespace always
	// set; nil for an empty volume. It is set only for kinds the backend
	// supports (DataSourceProvisioner).
	DataSource *corev1.TypedObjectReference
	// CloneSource is the claim whose volume this one is to be a copy of,
	// for a claim whose data source is a PersistentVolumeClaim; nil
	// otherwise. The controller checked it before calling Provision (same
	// namespace and StorageClass, Bound to a PersistentVolume of this
	// provisioner, no larger than the request, on the selected node when
	// its volume is bound to nodes), when the provisioning began: later
	// calls of a provisioning in the background get the same source.
	CloneSource *CloneSource
	// Abandoned is set when the claim no longer wants its volume (it is
	// deleted, or bound to another PersistentVolume) and Provision is
	// called only so that the backend can finish or stop what it runs in
	// the background: the backend stops that work, removes what it made of
	// the volume, and returns ProvisioningFinished with no volume, or with
	// the volume it had finished, which the controller then deletes.
	Abandoned bool
	// Eventf, when set, records an Event on the claim: what a backend did
	// that the claim's owner should hear of beyond ProvisioningSucceeded.
	// Use ProvisionOptions.Event, which takes it unset.
	Eventf func(eventType, reason, messageFmt string, args ...any)
	// Annotate, when set, adds annotations to another PersistentVolume with
	// the controller's client, as RecordOnVolume does: what a backend's
	// Provision decided about a volume it took something from. Use
	// ProvisionOptions.AnnotateVolume, which takes it unset.
	Annotate func(ctx context.Context, volume *corev1.PersistentVolume, annotations map[string]string) error
	// Wake, when set, asks for the claim to be provisioned again at once
	// rather than after its backoff: a backend whose work in the background
	// (ProvisioningInBackground) ended calls it, so that the claim does not
	// wait a retry's delay to be told. It may be called from any goroutine,
	// and does nothing once the provisioner stopped.
	Wake func()
}

// CloneSource is the source of a clone: a claim and the PersistentVolume it
// is bound to, both as the shared informers hold them, which the backend
// must not modify. In the manager they are trimmed as ProvisionOptions.PVC
// is.
type CloneSource struct {
	Claim  *corev1.PersistentVolumeClaim
	Volume *corev1.PersistentVolume
}

// Event records an Event on the claim through Eventf; nothing without it.
func (o ProvisionOptions) Event(eventType, reason, messageFmt string, args ...any) {
	if o.Eventf != nil {
		o.Eventf(eventType, reason, messageFmt, args...)
	}
}

// AnnotateVolume adds annotations to volume through Annotate; without it,
// it fails, so that nothing is taken for written.
func (o ProvisionOptions) AnnotateVolume(ctx context.Context, volume *corev1.PersistentVolume, annotations map[string]string) error {
	if o.Annotate == nil {
		return fmt.Errorf("cannot record %v on PersistentVolume %s: no client to write it", annotations, volume.Name)
	}
	return o.Annotate(ctx, volume, annotations)
}

// Provisioner creates and deletes backend volumes. Implementations must be safe
// for concurrent use and idempotent: Provision for a PVName that already exists
// returns the same volume, Delete of a missing volume succeeds.
type Provisioner interface {
	// Provision creates a backend volume and returns the PersistentVolume that
	// represents it. The controller creates the PV object itself. A refusal
	// for want of room wraps ErrNoRoom, so that the claim waits for room.
	Provision(ctx context.Context, options ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error)
	// Delete removes the backend volume behind a PersistentVolume. It is
	// handed either the PersistentVolume that uses the backend volume, or a
	// volume for whose name no PersistentVolume exists: as Provision returned
	// it, as a Reclaimer recorded it, or, when a claim went away before its
	// PersistentVolume was saved, rebuilt from the claim alone (name
	// pvc-<claim UID>, claimRef, storage class, capacity, access and volume
	// modes, the provisioned-by annotation, no source), and the backend volume
	// may then not exist: Delete must succeed. Never is it handed a volume
	// whose name a PersistentVolume uses for another backend volume, so a
	// backend may find the volume by its name as well as by its source.
	Delete(ctx context.Context, volume *corev1.PersistentVolume) error
}

// Reclaimer is implemented by backends that keep a record of every volume they
// make, written before the volume can exist and kept until they learn that its
// PersistentVolume exists. With it the controller writes nothing to a claim
// before Provision, so a claim costs one API write: what a crash or a deleted
// claim leaves without a PersistentVolume is found in the record and deleted.
// Without it, an intent finalizer on the claim guards the same window (two
// more writes per claim).
//
// Only the backend can tell whether two volume sources name one backend
// volume (a local and a hostPath source of one path do; an NFS server by name
// and by address may or may not), so it, not the controller, settles a
// record whose PersistentVolume exists.
type Reclaimer interface {
	// Unsaved lists the volumes on record, each as Provision returned it:
	// the PersistentVolume name and volume source at least, enough for
	// Delete. It may return volumes with an error (a part of the backend
	// it could not read, housekeeping that failed): those volumes are
	// settled, and the error makes the controller call it again later.
	Unsaved(ctx context.Context) ([]UnsavedVolume, error)
	// Saved is told that saved, a PersistentVolume of this provisioner,
	// exists with the name of volume, a volume on record (as Unsaved or
	// Provision returned it). If saved uses volume's backend volume, Saved
	// drops the record. If the backend can prove that saved uses another
	// one, volume is a second backend volume made for that name (by an
	// earlier attempt under another configuration): Saved deletes it and
	// drops its record, since Delete is never handed it. If the backend
	// cannot tell, Saved keeps the backend volume and drops its record:
	// nothing is deleted in doubt, and a record kept would have reclaim
	// delete the volume once saved and its claim are gone, whatever the
	// reclaim policy of saved chose. An error is for a record Saved could
	// not settle now, which the next reclaim hands it again. Delete drops
	// the record of the volume it deletes.
	Saved(ctx context.Context, volume, saved *corev1.PersistentVolume) error
}

// Prober is implemented by backends that can tell whether their storage
// answers, and how much room it has. While leading, the controller probes
// at once, every Config.ProbeInterval, and right after a failed Provision or
// Delete, so that an outage is seen at once. While the last probe failed,
// failures of Provision and Delete do not count towards the failure
// thresholds: claims and volumes wait for the storage, retried at each probe
// interval with an Event each time, rather than being given up on. Health
// reports the last probe, Dependencies.OnHealthChange hears of its changes,
// and the metrics provisioner_backend_up, provisioner_backend_available_bytes
// and provisioner_backend_total_bytes export it.
type Prober interface {
	// Probe reaches the storage as Provision and Delete would, under a
	// deadline of the probe interval, and returns its space; an error says
	// why the storage cannot be used now.
	Probe(ctx context.Context) (Space, error)
}

// BudgetReporter is implemented by a Prober whose volumes count against a
// capacity budget of its own. At each successful probe the controller reads
// the budget and exports it as provisioner_capacity_used_bytes,
// provisioner_capacity_limit_bytes, provisioner_capacity_used_volumes and
// provisioner_capacity_limit_volumes. Budget must not reach the storage: it
// counts what the backend knows.
type BudgetReporter interface {
	// Budget returns the limits and what the volumes counted towards them
	// use now; zero limits when there is no budget.
	Budget() (Budget, error)
}

// Budget is a backend's capacity budget and its use. A zero limit means no
// limit of that kind.
type Budget struct {
	UsedBytes, LimitBytes     int64
	UsedVolumes, LimitVolumes int64
}

// Space is the room of a backend's storage, in bytes.
type Space struct {
	// AvailableBytes is what new volumes may still use.
	AvailableBytes int64
	// TotalBytes is the size of the storage; 0 when it reports none.
	TotalBytes int64
}

// spaceStep is the share of the total by which available space must move to
// count as a change: reports of free space are not redone for every byte.
const spaceStep = 100

// Moved reports whether s differs from old enough to report: another total,
// or available space that moved by a Step or more.
func (s Space) Moved(old Space) bool {
	if s.TotalBytes != old.TotalBytes {
		return true
	}
	delta := s.AvailableBytes - old.AvailableBytes
	return max(delta, -delta) >= s.Step()
}

// Step is how far the available space moves before it is reported again:
// a hundredth of the total, at least one byte.
func (s Space) Step() int64 {
	return max(s.TotalBytes/spaceStep, 1)
}

// UnsavedVolume is a backend volume that may have no PersistentVolume yet.
type UnsavedVolume struct {
	Volume *corev1.PersistentVolume
	// Since is when the backend recorded the volume.
	Since time.Time
}

// Qualifier is implemented by backends that can tell cheaply, before any work is
// queued, that they will not provision a claim.
type Qualifier interface {
	ShouldProvision(ctx context.Context, claim *corev1.PersistentVolumeClaim) bool
}

// DeletionGuard is implemented by backends that must veto the deletion of some
// of their volumes.
type DeletionGuard interface {
	ShouldDelete(ctx context.Context, volume *corev1.PersistentVolume) bool
}

// VolumeRecorder is implemented by backends that write down on a
// PersistentVolume of theirs, once and before they act on it, what they
// decided about it from things that may change later, such as the fate of a
// volume another provisioner made, which that provisioner read from the
// volume's StorageClass at delete time. The controller asks before each sync
// of the volume, adds what Record returns as annotations, and only then goes
// on to delete it.
type VolumeRecorder interface {
	// Record returns the annotations to add to volume, whose StorageClass is
	// class (nil when it names none or that does not exist); none when
	// nothing is to be recorded. An error says why what should be recorded
	// cannot be; nothing is recorded then, and the volume is synced on
	// without it.
	Record(ctx context.Context, volume *corev1.PersistentVolume, class *storagev1.StorageClass) (map[string]string, error)
}

// BlockProvisioner is implemented by backends that can provision raw block
// volumes. Claims with volumeMode Block are refused by other backends.
type BlockProvisioner interface {
	Provisioner
	SupportsBlock(ctx context.Context) bool
}

// DataSourceProvisioner is implemented by backends that can fill a new volume
// from a data source. A claim with a data source (a claim to clone or a
// VolumeSnapshot) whose kind the backend does not support is refused with an
// Event and left Pending, never provisioned as an empty volume. Other kinds,
// unless supported, belong to volume populators and are left to them. A
// backend that supports PersistentVolumeClaim is handed the checked source
// of each clone in ProvisionOptions.CloneSource; a copy whose source goes
// away under it must fail, never finish short.
type DataSourceProvisioner interface {
	Provisioner
	SupportsDataSource(ctx context.Context, kind schema.GroupKind) bool
}

// ErrNoRoom is wrapped (with %w) by the error of a Provision that a backend
// refuses because it has no room for the volume now: a capacity budget used
// up, a file system too full. Room may free up, so such a refusal does not
// count towards Config.Retry.ProvisionFailureThreshold: the claim gets its
// ProvisioningFailed Event each time and is retried with the backoff of
// Config.Retry for as long as it is refused, and at once when this
// controller deleted a backend volume or saw a PersistentVolume of its
// provisioner go. A claim that can never fit (larger than the whole
// budget) is refused with another error, which counts.
var ErrNoRoom = errors.New("no room")

// ErrBackendUnavailable is wrapped (with %w) by the error of a Provision
// that failed because the backend could not be reached or failed to
// answer: a server down or answering with errors, a missing mount. That
// says nothing of the claim, so, as with ErrNoRoom, such a failure does not
// count towards Config.Retry.ProvisionFailureThreshold: the claim gets its
// ProvisioningFailed Event each time and is retried with the backoff of
// Config.Retry until the backend answers. backend.ErrUnavailable is this
// error.
var ErrBackendUnavailable = errors.New("backend unavailable")

// IgnoredError is returned by a backend that decides a claim or volume is not
// its own. The controller drops the item without an Event or a retry.
type IgnoredError struct {
	Reason string
}

func (e *IgnoredError) Error() string {
	return "ignored: " + e.Reason
}

// IsIgnoredError reports whether err is, or wraps, an *IgnoredError.
func IsIgnoredError(err error) bool {
	var ignored *IgnoredError
	return errors.As(err, &ignored)
}
