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

package fleet

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// Reasons of the Leading condition.
const (
	reasonLeaseHeld = "LeaseHeld"
	reasonNoLeader  = "NoLeader"
	// reasonHandOver: the instance runs and the Lease is free, released by
	// the replica that led or never taken; the instance takes it within a
	// retry period.
	reasonHandOver               = "HandOver"
	reasonNotRunning             = "NotRunning"
	reasonLeaderElectionDisabled = "LeaderElectionDisabled"
)

// eventBackendAvailable is the reason of the Normal Event of a provisioner
// whose backend is available again.
const eventBackendAvailable = "BackendAvailable"

// eventNodeNotServed is the reason of the Warning Event of a selected node
// that newly is not served.
const eventNodeNotServed = "NodeNotServed"

var metav1UpdateOptions = metav1.UpdateOptions{FieldManager: component}

// desiredStatus is pc's status after obs. Conditions keep their transition
// time unless their status changes.
func desiredStatus(pc *v1alpha1.ProvisionerConfig, obs observation) v1alpha1.ProvisionerConfigStatus {
	st := *pc.Status.DeepCopy()
	st.ObservedGeneration = pc.Generation
	st.Backend = pc.Spec.Backend.Name()
	st.Leader = obs.leader
	st.Storage = desiredStorage(st.Storage, obs)
	st.Nodes = obs.nodes

	ready := metav1.ConditionFalse
	if obs.reason == v1alpha1.ReasonRunning || obs.reason == v1alpha1.ReasonStandby {
		ready = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type:               v1alpha1.ConditionReady,
		Status:             ready,
		Reason:             obs.reason,
		Message:            obs.message,
		ObservedGeneration: pc.Generation,
	})

	leading := metav1.Condition{
		Type:               v1alpha1.ConditionLeading,
		Status:             metav1.ConditionFalse,
		ObservedGeneration: pc.Generation,
	}
	switch {
	case isRefusal(obs.reason) && !obs.running:
		leading.Reason, leading.Message = reasonNotRunning, "no instance runs"
	case obs.leaderElectionDisabled:
		leading.Status, leading.Reason, leading.Message = metav1.ConditionTrue, reasonLeaderElectionDisabled, "every replica works without a Lease"
	case obs.leader != "":
		leading.Status, leading.Reason, leading.Message = metav1.ConditionTrue, reasonLeaseHeld, "the Lease is held by "+obs.leader
	case obs.running:
		leading.Reason, leading.Message = reasonHandOver, "the Lease is free: the replica that runs this provisioner is taking it"
	default:
		leading.Reason, leading.Message = reasonNoLeader, "no replica holds the Lease"
	}
	meta.SetStatusCondition(&st.Conditions, leading)
	return st
}

// desiredStorage is status.storage after obs: what the leader's last probe
// found, kept while it moved less than Space.Moved tells, so the status is
// not rewritten for every byte; left to the leader by other replicas, and
// cleared once no instance runs.
func desiredStorage(current *v1alpha1.StorageStatus, obs observation) *v1alpha1.StorageStatus {
	switch {
	case !obs.running:
		return nil
	case obs.storage == nil:
		return current
	case current != nil && !obs.storage.Moved(provisioning.Space{AvailableBytes: current.Available.Value(), TotalBytes: current.Total.Value()}):
		return current
	}
	return &v1alpha1.StorageStatus{
		Available: *resource.NewQuantity(obs.storage.AvailableBytes, resource.BinarySI),
		Total:     *resource.NewQuantity(obs.storage.TotalBytes, resource.BinarySI),
	}
}

// isRefusal reports whether Ready's reason calls for a Warning Event: the
// object was refused, or its running instance's backend is unavailable.
func isRefusal(reason string) bool {
	switch reason {
	case v1alpha1.ReasonInvalidSpec, v1alpha1.ReasonProvisionerNameConflict, v1alpha1.ReasonLeaseNameConflict,
		v1alpha1.ReasonBackendOverlap, v1alpha1.ReasonBackendUnavailable, v1alpha1.ReasonNoNodeServed, v1alpha1.ReasonNoNodeAgent:
		return true
	}
	return false
}

// needsWrite reports whether this replica must write want over pc's status. A
// standby replica leaves the status to the leader once the leader reported the
// current generation, so that replicas never overwrite each other in a loop.
func needsWrite(pc *v1alpha1.ProvisionerConfig, want v1alpha1.ProvisionerConfigStatus, obs observation) bool {
	if equality.Semantic.DeepEqual(pc.Status, want) {
		return false
	}
	if obs.reason != v1alpha1.ReasonStandby || obs.leader == "" {
		return true
	}
	current := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionReady)
	leaderReported := current != nil && slices.Contains([]string{v1alpha1.ReasonRunning, v1alpha1.ReasonBackendUnavailable}, current.Reason) &&
		current.ObservedGeneration == pc.Generation && pc.Status.Leader == obs.leader
	return !leaderReported
}

// writeStatus writes the status of obs unless nothing changed, and emits an
// Event when Ready changes as recordTransition tells.
func (m *Manager) writeStatus(ctx context.Context, pc *v1alpha1.ProvisionerConfig, obs observation) error {
	want := desiredStatus(pc, obs)
	if !needsWrite(pc, want, obs) {
		return nil
	}
	m.recordTransition(pc, obs)
	m.recordUnservedNodes(pc, obs)
	updated := pc.DeepCopy()
	updated.Status = want
	if _, err := m.deps.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().UpdateStatus(ctx, updated, metav1UpdateOptions); err != nil {
		return fmt.Errorf("cannot update the status of ProvisionerConfig %s: %w", pc.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated status", "reason", obs.reason, "leader", obs.leader, "observedGeneration", pc.Generation)
	return nil
}

// recordTransition emits a Warning Event when the object is newly refused
// or its backend newly unavailable, and a Normal one when the backend of its
// running instance is available again.
func (m *Manager) recordTransition(pc *v1alpha1.ProvisionerConfig, obs observation) {
	current := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionReady)
	switch {
	case isRefusal(obs.reason):
		if current == nil || current.Reason != obs.reason || current.Message != obs.message || pc.Status.ObservedGeneration != pc.Generation {
			m.recorder.Event(pc, corev1.EventTypeWarning, obs.reason, obs.message)
		}
	case obs.reason == v1alpha1.ReasonRunning && current != nil && current.Reason == v1alpha1.ReasonBackendUnavailable:
		m.recorder.Event(pc, corev1.EventTypeNormal, eventBackendAvailable, "the backend is available again: "+obs.message)
	}
}

// recordUnservedNodes emits a Warning Event for each node listed unserved
// that was not before.
func (m *Manager) recordUnservedNodes(pc *v1alpha1.ProvisionerConfig, obs observation) {
	if obs.nodes == nil {
		return
	}
	before := map[string]bool{}
	if pc.Status.Nodes != nil {
		for _, u := range pc.Status.Nodes.Unserved {
			before[u.Node] = true
		}
	}
	for _, u := range obs.nodes.Unserved {
		if !before[u.Node] && u.Reason != v1alpha1.ReasonNodeAgentPending {
			m.recorder.Eventf(pc, corev1.EventTypeWarning, eventNodeNotServed, "node %s is not served: %s: %s", u.Node, u.Reason, u.Message)
		}
	}
}
