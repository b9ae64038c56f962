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
	"maps"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// Expander is implemented by backends that can grow a volume in place. A
// bound claim of this provisioner whose storage request grows beyond its
// status.capacity, in a StorageClass that allows volume expansion, is
// handed to Expand; the controller then raises the PersistentVolume's
// capacity and finishes the claim's resize as the Kubernetes resize
// protocol has a controller-only resize finish: no node takes part. A
// provisioner that does not implement it refuses every expansion with an
// Event, and changes nothing.
type Expander interface {
	// Expand grows the backend volume of volume, which claim is bound to,
	// to size, or counts it at that size, and returns the capacity it has
	// then, at least size. It may be called again for the same size (a
	// process killed before the PersistentVolume was written, a write that
	// failed) and must then succeed again. An error wrapping
	// ErrBackendUnavailable is retried; any other refuses this size (the
	// claim's resize turns ControllerResizeInfeasible, with an Event
	// carrying the error), ErrNoRoom for want of room in a capacity budget.
	Expand(ctx context.Context, volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim, size resource.Quantity) (resource.Quantity, error)
}

// Events of a claim's resize.
const (
	EventResizing          = "Resizing"
	EventResizeFailed      = "VolumeResizeFailed"
	EventResizeSuccessful  = "VolumeResizeSuccessful"
	resultResizeSucceeded  = "succeeded"
	resultResizeInfeasible = "infeasible"
	resultResizeFailed     = "failed"
	resultResizeNotAllowed = "not_allowed"
	resultResizeNoExpander = "unsupported"
)

// resizeConditions are the claim conditions of a resize, which a finished or
// abandoned one leaves none of.
var resizeConditions = []corev1.PersistentVolumeClaimConditionType{
	corev1.PersistentVolumeClaimResizing,
	corev1.PersistentVolumeClaimFileSystemResizePending,
	corev1.PersistentVolumeClaimControllerResizeError,
}

// WantsResize reports whether a bound claim asks for another size than it
// has, or carries the status of a resize that is not settled: only such a
// claim is looked at for expansion.
func WantsResize(claim *corev1.PersistentVolumeClaim) bool {
	if claim.Spec.VolumeName == "" || claim.DeletionTimestamp != nil || claim.Status.Phase != corev1.ClaimBound {
		return false
	}
	if _, ok := claim.Status.AllocatedResourceStatuses[corev1.ResourceStorage]; ok {
		return true
	}
	want := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	have := claim.Status.Capacity[corev1.ResourceStorage]
	return want.Cmp(have) > 0
}

// ResizerDeps are what a Resizer uses but does not own.
type ResizerDeps struct {
	// Name is the provisioner name that labels the metric series.
	Name string
	// KnownName reports whether a PersistentVolume's provisioned-by names
	// this provisioner.
	KnownName func(string) bool
	Client    Client
	// Volumes and Classes are the stores of the shared informers.
	Volumes, Classes cache.Store
	EventRecorder    record.EventRecorder
	// Metrics counts the expansions; nil counts none.
	Metrics *Metrics
	// Expander is nil when the backend cannot expand volumes.
	Expander Expander
	// Call, if set, runs the call of Expand under a deadline; nil calls it
	// as it is.
	Call func(ctx context.Context, operation string, call func(ctx context.Context) error) error
}

// Resizer grows the volumes of a provisioner's claims. It is not safe for
// concurrent use on one claim: the caller's work queue, or its one worker,
// hands a claim to one Sync at a time, and only the provisioner's leader
// runs one.
type Resizer struct {
	deps ResizerDeps
}

// NewResizer returns the Resizer of deps.
func NewResizer(deps ResizerDeps) *Resizer {
	if deps.Call == nil {
		deps.Call = func(ctx context.Context, _ string, call func(ctx context.Context) error) error { return call(ctx) }
	}
	return &Resizer{deps: deps}
}

// Sync brings the resize of a bound claim forward from what the API shows,
// so that a resize cut short by a crash is finished by the next Sync: a
// PersistentVolume already at the size asked for only has the claim's
// status finished. It returns an error when the claim is to be tried again
// later; a refusal is no error, it is told in the claim's status and an
// Event.
func (r *Resizer) Sync(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if !WantsResize(claim) {
		return nil
	}
	volume := r.volumeOf(claim)
	if volume == nil {
		return nil
	}
	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "volume", klog.KObj(volume)))
	want := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	have := claim.Status.Capacity[corev1.ResourceStorage]
	if want.Cmp(have) <= 0 {
		// The request went back to the capacity the claim has: the resize
		// it asked for before is given up on.
		_, err := r.updateStatus(ctx, claim, func(status *corev1.PersistentVolumeClaimStatus) {
			if _, ok := status.AllocatedResources[corev1.ResourceStorage]; ok {
				status.AllocatedResources[corev1.ResourceStorage] = have
			}
			clearResize(status)
		})
		return err
	}
	if claim.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInfeasible &&
		want.Cmp(claim.Status.AllocatedResources[corev1.ResourceStorage]) == 0 {
		// Refused already: it is tried again once the request changes.
		return nil
	}
	if refusal, result := r.refusal(claim, want); refusal != "" {
		r.deps.Metrics.observeResize(r.deps.Name, claimClassName(claim), result)
		r.deps.EventRecorder.Event(claim, corev1.EventTypeWarning, EventResizeFailed, refusal)
		// Marked on the claim, a refusal is told and counted once per
		// request, not at every sync of the claim.
		return r.markInfeasible(ctx, claim, want, refusal)
	}
	return r.expand(ctx, claim, volume, want)
}

// volumeOf returns the PersistentVolume of this provisioner that claim is
// bound to, as the informer shows it; nil when there is none.
func (r *Resizer) volumeOf(claim *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	obj, exists, err := r.deps.Volumes.GetByKey(claim.Spec.VolumeName)
	if err != nil || !exists {
		return nil
	}
	volume, ok := obj.(*corev1.PersistentVolume)
	if !ok || !r.deps.KnownName(volume.Annotations[AnnDynamicallyProvisioned]) ||
		volume.Spec.ClaimRef == nil || volume.Spec.ClaimRef.UID != claim.UID {
		return nil
	}
	return volume
}

// refusal says why claim may not grow to want, with the result it counts
// as; "" when it may.
func (r *Resizer) refusal(claim *corev1.PersistentVolumeClaim, want resource.Quantity) (string, string) {
	className := claimClassName(claim)
	class, err := classIn(r.deps.Classes, className)
	switch {
	case err != nil:
		return fmt.Sprintf("Cannot expand the volume to %s: %v", want.String(), err), resultResizeNotAllowed
	case class.AllowVolumeExpansion == nil || !*class.AllowVolumeExpansion:
		return fmt.Sprintf("Cannot expand the volume to %s: StorageClass %q does not allow volume expansion", want.String(), className), resultResizeNotAllowed
	case r.deps.Expander == nil:
		return fmt.Sprintf("Cannot expand the volume to %s: provisioner %q cannot expand volumes", want.String(), r.deps.Name), resultResizeNoExpander
	case want.CmpInt64(math.MaxInt64) > 0:
		return fmt.Sprintf("Cannot expand the volume to %s: no volume can be that large", want.String()), resultResizeInfeasible
	}
	return "", ""
}

// expand has the backend grow the volume of claim to want, raises the
// PersistentVolume's capacity and finishes the claim's resize.
func (r *Resizer) expand(ctx context.Context, claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume, want resource.Quantity) error {
	logger := klog.FromContext(ctx)
	className := claimClassName(claim)
	size := volume.Spec.Capacity[corev1.ResourceStorage]
	if size.Cmp(want) < 0 {
		claim, err := r.updateStatus(ctx, claim, func(status *corev1.PersistentVolumeClaimStatus) {
			markInProgress(status, want)
		})
		if err != nil {
			return err
		}
		r.deps.EventRecorder.Eventf(claim, corev1.EventTypeNormal, EventResizing, "Expanding volume %s to %s", volume.Name, want.String())
		err = r.deps.Call(ctx, "expand", func(ctx context.Context) error {
			var err error
			size, err = r.deps.Expander.Expand(ctx, volume, claim, want)
			return err
		})
		if err == nil && size.Cmp(want) < 0 {
			err = fmt.Errorf("the backend expanded it to %s only", size.String())
		}
		if err != nil {
			return r.expandFailed(ctx, claim, want, err)
		}
		if volume, err = r.raiseCapacity(ctx, volume, size); err != nil {
			r.deps.Metrics.observeResize(r.deps.Name, className, resultResizeFailed)
			return err
		}
		logger.Info("Raised the capacity of the volume", "capacity", size.String())
	}
	claim, err := r.updateStatus(ctx, claim, func(status *corev1.PersistentVolumeClaimStatus) {
		finishResize(status, size)
	})
	if err != nil {
		r.deps.Metrics.observeResize(r.deps.Name, className, resultResizeFailed)
		return err
	}
	r.deps.Metrics.observeResize(r.deps.Name, className, resultResizeSucceeded)
	r.deps.EventRecorder.Eventf(claim, corev1.EventTypeNormal, EventResizeSuccessful, "Expanded volume %s to %s", volume.Name, size.String())
	return nil
}

// expandFailed reports a failed Expand: one for want of an available
// backend is tried again, any other marks the resize infeasible.
func (r *Resizer) expandFailed(ctx context.Context, claim *corev1.PersistentVolumeClaim, want resource.Quantity, err error) error {
	message := fmt.Sprintf("Cannot expand the volume to %s: %v", want.String(), err)
	r.deps.EventRecorder.Event(claim, corev1.EventTypeWarning, EventResizeFailed, message)
	if errors.Is(err, ErrBackendUnavailable) {
		r.deps.Metrics.observeResize(r.deps.Name, claimClassName(claim), resultResizeFailed)
		return fmt.Errorf("cannot expand the volume of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	r.deps.Metrics.observeResize(r.deps.Name, claimClassName(claim), resultResizeInfeasible)
	return r.markInfeasible(ctx, claim, want, message)
}

// markInfeasible records on claim that it cannot grow to want, so that its
// user may lower the request again.
func (r *Resizer) markInfeasible(ctx context.Context, claim *corev1.PersistentVolumeClaim, want resource.Quantity, message string) error {
	_, err := r.updateStatus(ctx, claim, func(status *corev1.PersistentVolumeClaimStatus) {
		setAllocated(status, want, corev1.PersistentVolumeClaimControllerResizeInfeasible)
		status.Conditions = withoutResizeConditions(status.Conditions)
		status.Conditions = append(status.Conditions, corev1.PersistentVolumeClaimCondition{
			Type: corev1.PersistentVolumeClaimControllerResizeError, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.Now(), Message: message,
		})
	})
	return err
}

// raiseCapacity raises the capacity of volume to size, unless it has that
// much already.
func (r *Resizer) raiseCapacity(ctx context.Context, volume *corev1.PersistentVolume, size resource.Quantity) (*corev1.PersistentVolume, error) {
	volume, err := updateObject(ctx, r.deps.Client.CoreV1().PersistentVolumes(), volume, func(v *corev1.PersistentVolume) bool {
		current := v.Spec.Capacity[corev1.ResourceStorage]
		if current.Cmp(size) >= 0 {
			return false
		}
		if v.Spec.Capacity == nil {
			v.Spec.Capacity = corev1.ResourceList{}
		}
		v.Spec.Capacity[corev1.ResourceStorage] = size
		return true
	})
	if err != nil {
		return volume, fmt.Errorf("cannot raise the capacity of PersistentVolume %s: %w", volume.Name, err)
	}
	return volume, nil
}

// updateStatus applies mutate to the status of claim as the API has it now
// (the informer keeps only part of a claim's status), and writes it when it
// changed, at the version read.
func (r *Resizer) updateStatus(ctx context.Context, claim *corev1.PersistentVolumeClaim, mutate func(*corev1.PersistentVolumeClaimStatus)) (*corev1.PersistentVolumeClaim, error) {
	claims := r.deps.Client.CoreV1().PersistentVolumeClaims(claim.Namespace)
	result := claim
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if current.UID != claim.UID {
			return fmt.Errorf("the claim was replaced by another of its name")
		}
		updated := current.DeepCopy()
		mutate(&updated.Status)
		if equalStatus(current.Status, updated.Status) {
			result = current
			return nil
		}
		result, err = claims.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return claim, fmt.Errorf("cannot update the resize status of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return result, nil
}

// equalStatus compares the parts of a claim's status that a resize writes,
// conditions by type and status, so that an unchanged status is not
// written again with a new transition time.
func equalStatus(a, b corev1.PersistentVolumeClaimStatus) bool {
	return equality.Semantic.DeepEqual(a.Capacity, b.Capacity) &&
		equality.Semantic.DeepEqual(a.AllocatedResources, b.AllocatedResources) &&
		maps.Equal(a.AllocatedResourceStatuses, b.AllocatedResourceStatuses) &&
		slices.EqualFunc(a.Conditions, b.Conditions, func(x, y corev1.PersistentVolumeClaimCondition) bool {
			return x.Type == y.Type && x.Status == y.Status
		})
}

// markInProgress records that the controller grows the volume to want.
func markInProgress(status *corev1.PersistentVolumeClaimStatus, want resource.Quantity) {
	setAllocated(status, want, corev1.PersistentVolumeClaimControllerResizeInProgress)
	status.Conditions = withoutResizeConditions(status.Conditions)
	status.Conditions = append(status.Conditions, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
	})
}

// finishResize records that the volume has size now, with no resize left
// to do: an Expander's resize is a controller-only one, no node takes part.
func finishResize(status *corev1.PersistentVolumeClaimStatus, size resource.Quantity) {
	if status.Capacity == nil {
		status.Capacity = corev1.ResourceList{}
	}
	status.Capacity[corev1.ResourceStorage] = size
	if status.AllocatedResources == nil {
		status.AllocatedResources = corev1.ResourceList{}
	}
	status.AllocatedResources[corev1.ResourceStorage] = size
	clearResize(status)
}

// clearResize drops the status and conditions of a resize.
func clearResize(status *corev1.PersistentVolumeClaimStatus) {
	delete(status.AllocatedResourceStatuses, corev1.ResourceStorage)
	if len(status.AllocatedResourceStatuses) == 0 {
		status.AllocatedResourceStatuses = nil
	}
	status.Conditions = withoutResizeConditions(status.Conditions)
}

func setAllocated(status *corev1.PersistentVolumeClaimStatus, size resource.Quantity, resizeStatus corev1.ClaimResourceStatus) {
	if status.AllocatedResources == nil {
		status.AllocatedResources = corev1.ResourceList{}
	}
	status.AllocatedResources[corev1.ResourceStorage] = size
	if status.AllocatedResourceStatuses == nil {
		status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	status.AllocatedResourceStatuses[corev1.ResourceStorage] = resizeStatus
}

func withoutResizeConditions(conditions []corev1.PersistentVolumeClaimCondition) []corev1.PersistentVolumeClaimCondition {
	return slices.DeleteFunc(slices.Clone(conditions), func(c corev1.PersistentVolumeClaimCondition) bool {
		return slices.Contains(resizeConditions, c.Type)
	})
}
