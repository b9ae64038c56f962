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

package leaderelection

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// newLeaseInformer returns an informer of the one Lease namespace/name, for
// an elector that was given no Lease router.
func newLeaseInformer(client Client, namespace, name string) cache.SharedIndexInformer {
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	leases := client.CoordinationV1().Leases(namespace)
	// The wrapper tells a reflector whether client (a fake) cannot stream lists.
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			options.FieldSelector = byName
			return leases.List(ctx, options)
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.FieldSelector = byName
			return leases.Watch(ctx, options)
		},
	}, client), &coordinationv1.Lease{}, 0, cache.Indexers{})
}

// leaseRecord is the election record of lease, as client-go reads it.
func leaseRecord(lease *coordinationv1.Lease) resourcelock.LeaderElectionRecord {
	if lease == nil {
		return resourcelock.LeaderElectionRecord{}
	}
	return *resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
}

// withRecord returns a copy of lease that carries record in client-go's
// format, so that client-go electors on the same Lease understand it.
func withRecord(lease *coordinationv1.Lease, record resourcelock.LeaderElectionRecord) *coordinationv1.Lease {
	lease = lease.DeepCopy()
	lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&record)
	return lease
}

// leaseSeconds is a lease duration as the Lease declares it; rounded up, so
// that no reader expires it earlier than the holder steps down.
func leaseSeconds(d time.Duration) int {
	return int(math.Ceil(d.Seconds()))
}

// legacyLockUntil reads the Endpoints lock namespace/name of an older
// provisioner: the seed and the upstream library v5 to v8 ran client-go's
// Endpoints lock, which keeps the record in an annotation. It returns the
// holder and until when its record counts; the zero time when there is no
// lock, it was released or identity holds it.
//
// A record counts until twice its lease duration after its renew time, by
// the holder's clock: an older follower takes an expired record within its
// retry period, shorter than the duration, and is left the time to, rather
// than raced for the lock it cannot see this elector take.
func legacyLockUntil(ctx context.Context, client Client, namespace, name, identity string) (string, time.Time, error) {
	// The older versions lock an Endpoints object, deprecated since v1.33.
	endpoints, err := client.CoreV1().Endpoints(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("cannot read the Endpoints lock %s/%s: %w", namespace, name, err)
	}
	data, ok := endpoints.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	if !ok {
		return "", time.Time{}, nil
	}
	var record resourcelock.LeaderElectionRecord
	if err := json.Unmarshal([]byte(data), &record); err != nil {
		return "", time.Time{}, fmt.Errorf("cannot parse the record of the Endpoints lock %s/%s: %w", namespace, name, err)
	}
	if record.HolderIdentity == "" || record.HolderIdentity == identity {
		return "", time.Time{}, nil
	}
	return record.HolderIdentity, record.RenewTime.Add(2 * time.Duration(record.LeaseDurationSeconds) * time.Second), nil
}
