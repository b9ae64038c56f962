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
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// Reschedules is how many times claim was sent back to the scheduler, as
// its AnnReschedules says; a value that is no count reads as none.
func Reschedules(claim *v1.PersistentVolumeClaim) int {
	count, err := strconv.Atoi(claim.Annotations[AnnReschedules])
	if err != nil || count < 0 {
		return 0
	}
	return count
}

// Reschedule sends claim back to the scheduler, as external-provisioner
// does when a volume cannot be made on the selected node: it removes the
// selected-node annotation and counts the removal in AnnReschedules. The
// write is a merge patch at claim's resource version, so a claim changed
// meanwhile, as by the scheduler choosing again, fails with a conflict and
// keeps what was written. A claim sent back MaxReschedules times already is
// left as it is, with an error wrapping ErrRescheduleLimit. It returns the
// claim as last written.
func Reschedule(ctx context.Context, client Client, claim *v1.PersistentVolumeClaim) (*v1.PersistentVolumeClaim, error) {
	if _, ok := claim.Annotations[AnnSelectedNode]; !ok {
		return claim, nil
	}
	count := Reschedules(claim)
	if count >= MaxReschedules {
		return claim, fmt.Errorf("cannot send claim %s/%s back to the scheduler: %w (%d times)", claim.Namespace, claim.Name, ErrRescheduleLimit, count)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": claim.ResourceVersion,
		"annotations":     map[string]any{AnnSelectedNode: nil, AnnReschedules: strconv.Itoa(count + 1)},
	}})
	if err != nil {
		return claim, fmt.Errorf("cannot encode the rescheduling of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	updated, err := client.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return claim, fmt.Errorf("cannot send claim %s/%s back to the scheduler: %w", claim.Namespace, claim.Name, err)
	}
	return updated, nil
}
