package provisioning

import (
	"fmt"
	"math"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseWatch routes the events of one Lease informer to the electors of the
// Leases they name. A fleet has hundreds of electors on one informer: one
// handler and a map lookup per event cost far less than a handler (two
// goroutines and a buffer) per elector, each called for every Lease.
type leaseWatch struct {
	informer cache.SharedIndexInformer
	handle   cache.ResourceEventHandlerRegistration

	mu   sync.RWMutex
	subs map[string]map[*leaseSubscription]struct{} // by namespace/name
}

type leaseSubscription struct {
	key     string
	observe func(*coordinationv1.Lease) // nil: the Lease is gone
}

// leaseWatches holds the watch of every Lease informer that has subscribers;
// the informer is the only thing electors of one fleet share.
var leaseWatches = struct {
	sync.Mutex
	byInformer map[cache.SharedIndexInformer]*leaseWatch
}{byInformer: map[cache.SharedIndexInformer]*leaseWatch{}}

// subscribeLease calls observe with every change of the Lease namespace/name
// seen by informer, until the returned unsubscribe is called. It does not
// replay the informer's store: the caller reads it once the informer synced.
func subscribeLease(informer cache.SharedIndexInformer, namespace, name string, observe func(*coordinationv1.Lease)) (unsubscribe func(), err error) {
	leaseWatches.Lock()
	defer leaseWatches.Unlock()
	w := leaseWatches.byInformer[informer]
	if w == nil {
		w = &leaseWatch{informer: informer, subs: map[string]map[*leaseSubscription]struct{}{}}
		handle, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.dispatch(obj, false) },
			UpdateFunc: func(_, obj any) { w.dispatch(obj, false) },
			DeleteFunc: func(obj any) { w.dispatch(obj, true) },
		})
		if err != nil {
			return nil, fmt.Errorf("cannot watch Leases: %w", err)
		}
		w.handle = handle
		leaseWatches.byInformer[informer] = w
	}
	sub := &leaseSubscription{key: namespace + "/" + name, observe: observe}
	w.mu.Lock()
	if w.subs[sub.key] == nil {
		w.subs[sub.key] = map[*leaseSubscription]struct{}{}
	}
	w.subs[sub.key][sub] = struct{}{}
	w.mu.Unlock()
	return func() { w.unsubscribe(sub) }, nil
}

func (w *leaseWatch) unsubscribe(sub *leaseSubscription) {
	leaseWatches.Lock()
	defer leaseWatches.Unlock()
	w.mu.Lock()
	delete(w.subs[sub.key], sub)
	if len(w.subs[sub.key]) == 0 {
		delete(w.subs, sub.key)
	}
	last := len(w.subs) == 0
	w.mu.Unlock()
	if !last {
		return
	}
	delete(leaseWatches.byInformer, w.informer)
	// No need to wait for the handler to stop: dispatch holds w.mu, so no
	// subscriber is called once it was deleted above.
	_ = w.informer.RemoveEventHandler(w.handle)
}

// dispatch hands one event to the subscribers of its Lease.
func (w *leaseWatch) dispatch(obj any, deleted bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	for sub := range w.subs[lease.Namespace+"/"+lease.Name] {
		if deleted {
			sub.observe(nil)
		} else {
			sub.observe(lease)
		}
	}
}

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
