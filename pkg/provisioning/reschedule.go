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
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// AnnReschedules counts, on a claim, how many times a provisioner removed
// its selected-node annotation so that the scheduler chooses again. It is
// kept on the claim so that the bound holds across restarts and leaders.
const AnnReschedules = "provfleet.io/reschedules"

// MaxReschedules is how many times one claim is sent back to the scheduler:
// a claim that fits no node the scheduler gives it would otherwise go back
// and forth with the scheduler forever. With a Warning Event for each, the
// Warning of the limit still fits in the few an Event spam filter (the
// manager's lets 5 through per object) writes at once.
const MaxReschedules = 3

// EventRescheduleLimit is the reason of the Warning Event of a claim that
// is not sent back to the scheduler any more.
const EventRescheduleLimit = "RescheduleLimitReached"

// ErrRescheduleLimit means that a claim was sent back to the scheduler
// MaxReschedules times already.
var ErrRescheduleLimit = errors.New("sent back to the scheduler too often")

// ErrSelectionChanged means that a claim names another selected node, or
// none, than the one it was to be sent back from: the scheduler chose again.
var ErrSelectionChanged = errors.New("its selected node changed meanwhile")

// Reschedules is how many times claim was sent back to the scheduler, as
// its AnnReschedules says; a value that is no count reads as none.
func Reschedules(claim *corev1.PersistentVolumeClaim) int {
	count, err := strconv.Atoi(claim.Annotations[AnnReschedules])
	if err != nil || count < 0 {
		return 0
	}
	return count
}

// Reschedule sends claim back to the scheduler, as external-provisioner
// does when a volume cannot be made on the selected node: it removes the
// selected-node annotation and counts the removal in AnnReschedules. The
// write is a patch at claim's resource version; after a conflict it is made
// again on the claim as it is now, but only while the claim still names the
// node it named: a node the scheduler chose meanwhile is kept, with an error
// wrapping ErrSelectionChanged. A claim sent
// back MaxReschedules times already is left as it is, with an error wrapping
// ErrRescheduleLimit. It returns the claim as last known.
func Reschedule(ctx context.Context, client Client, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	rejected, ok := claim.Annotations[AnnSelectedNode]
	if !ok {
		return claim, nil
	}
	limited, changed := 0, false
	updated, err := updateObject(ctx, client.CoreV1().PersistentVolumeClaims(claim.Namespace), claim, func(current *corev1.PersistentVolumeClaim) bool {
		if node, ok := current.Annotations[AnnSelectedNode]; !ok || node != rejected {
			changed = true
			return false
		}
		count := Reschedules(current)
		if count >= MaxReschedules {
			limited = count
			return false
		}
		current.Annotations[AnnReschedules] = strconv.Itoa(count + 1)
		delete(current.Annotations, AnnSelectedNode)
		return true
	})
	if err != nil {
		return updated, fmt.Errorf("cannot send claim %s/%s back to the scheduler: %w", claim.Namespace, claim.Name, err)
	}
	if changed {
		return updated, fmt.Errorf("cannot send claim %s/%s back to the scheduler from node %s: %w", claim.Namespace, claim.Name, rejected, ErrSelectionChanged)
	}
	if limited > 0 {
		return updated, fmt.Errorf("cannot send claim %s/%s back to the scheduler: %w (%d times)", claim.Namespace, claim.Name, ErrRescheduleLimit, limited)
	}
	return updated, nil
}
