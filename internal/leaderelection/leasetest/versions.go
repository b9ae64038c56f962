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

package leasetest

import (
	"strconv"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// EnforceVersions makes the fake clientset treat Lease resource versions
// as the API server does: every write assigns a new one, and an update of an
// older version fails with a conflict, as does a delete whose
// preconditions the Lease no longer meets. Elections depend on it.
func EnforceVersions(client *fake.Clientset) {
	var version atomic.Int64
	resource := coordinationv1.SchemeGroupVersion.WithResource("leases")
	client.PrependReactor("create", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		lease := action.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease)
		lease.ResourceVersion = strconv.FormatInt(version.Add(1), 10)
		return false, nil, nil
	})
	client.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		lease := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		current, err := client.Tracker().Get(resource, lease.Namespace, lease.Name)
		if err != nil {
			return false, nil, nil // the tracker reports it
		}
		if current.(*coordinationv1.Lease).ResourceVersion != lease.ResourceVersion {
			return true, nil, apierrors.NewConflict(resource.GroupResource(), lease.Name, nil)
		}
		lease.ResourceVersion = strconv.FormatInt(version.Add(1), 10)
		return false, nil, nil
	})
	client.PrependReactor("delete", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		del := action.(k8stesting.DeleteAction)
		pre := del.GetDeleteOptions().Preconditions
		current, err := client.Tracker().Get(resource, del.GetNamespace(), del.GetName())
		if pre == nil || err != nil {
			return false, nil, nil
		}
		lease := current.(*coordinationv1.Lease)
		if pre.UID != nil && *pre.UID != lease.UID || pre.ResourceVersion != nil && *pre.ResourceVersion != lease.ResourceVersion {
			return true, nil, apierrors.NewConflict(resource.GroupResource(), lease.Name, nil)
		}
		return false, nil, nil
	})
}

// RecordSummary is the part of a Lease's election record that does not
// depend on when it was written.
type RecordSummary struct {
	Holder               string
	LeaseDurationSeconds int
	Transitions          int
}

// Summary is the RecordSummary of lease.
func Summary(lease *coordinationv1.Lease) RecordSummary {
	r := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	return RecordSummary{Holder: r.HolderIdentity, LeaseDurationSeconds: r.LeaseDurationSeconds, Transitions: r.LeaderTransitions}
}
