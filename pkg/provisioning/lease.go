package provisioning

import (
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// newLeaseInformer returns an informer of the one Lease namespace/name, for
// an elector that was given no shared Lease informer.
func newLeaseInformer(client kubernetes.Interface, namespace, name string) cache.SharedIndexInformer {
	return coordinationinformers.NewFilteredLeaseInformer(client, namespace, 0, cache.Indexers{}, func(options *metav1.ListOptions) {
		options.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
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
