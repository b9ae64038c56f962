package provisioning

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// enforceLeaseVersions makes the fake clientset treat Lease resource versions
// as the API server does: every write assigns a new one, and an update of an
// older version fails with a conflict. Elections depend on it.
func enforceLeaseVersions(client *fake.Clientset) {
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
}

func TestEnforceLeaseVersions(t *testing.T) {
	client := fake.NewClientset()
	enforceLeaseVersions(client)
	ctx := t.Context()
	leases := client.CoordinationV1().Leases("default")
	created, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	updated, err := leases.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion == created.ResourceVersion {
		t.Errorf("update kept resource version %q", created.ResourceVersion)
	}
	if _, err := leases.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update of a stale version: got %v, want a conflict", err)
	}
}

// observations records what one subscriber saw: holder identities, or
// "deleted".
type observations struct {
	mu   sync.Mutex
	seen []string
}

func (o *observations) observe(lease *coordinationv1.Lease) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if lease == nil {
		o.seen = append(o.seen, "deleted")
		return
	}
	o.seen = append(o.seen, ptr.Deref(lease.Spec.HolderIdentity, ""))
}

func (o *observations) get() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seen...)
}

func leaseHeldBy(name, holder string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
}

// One handler on the informer serves every subscriber, routed by Lease name,
// and goes away with the last subscriber.
func TestSubscribeLease(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Coordination().V1().Leases().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	var a1, a2, b observations
	unsubscribeA1, err := subscribeLease(informer, "default", "a", a1.observe)
	if err != nil {
		t.Fatal(err)
	}
	unsubscribeA2, err := subscribeLease(informer, "default", "a", a2.observe)
	if err != nil {
		t.Fatal(err)
	}
	unsubscribeB, err := subscribeLease(informer, "default", "b", b.observe)
	if err != nil {
		t.Fatal(err)
	}
	leases := client.CoordinationV1().Leases("default")
	for _, lease := range []*coordinationv1.Lease{leaseHeldBy("a", "x"), leaseHeldBy("b", "y")} {
		if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := leases.Update(ctx, leaseHeldBy("a", "z"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both subscribers of a see two holders", func() bool { return len(a1.get()) == 2 && len(a2.get()) == 2 })
	unsubscribeA1()
	if err := leases.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the remaining subscriber of a sees the deletion", func() bool { return len(a2.get()) == 3 })
	eventually(t, "the subscriber of b sees its Lease", func() bool { return len(b.get()) == 1 })

	for name, tc := range map[string]struct {
		got, want []string
	}{
		"a, unsubscribed early": {got: a1.get(), want: []string{"x", "z"}},
		"a":                     {got: a2.get(), want: []string{"x", "z", "deleted"}},
		"b":                     {got: b.get(), want: []string{"y"}},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s observed (-want +got):\n%s", name, diff)
		}
	}

	watching := func() bool {
		leaseWatches.Lock()
		defer leaseWatches.Unlock()
		return leaseWatches.byInformer[informer] != nil
	}
	unsubscribeA2()
	if !watching() {
		t.Error("the handler went away while b still subscribes")
	}
	unsubscribeB()
	if watching() {
		t.Error("the handler stays after the last subscriber left")
	}
}

func TestSubscribeLeaseStoppedInformer(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	informer := factory.Coordination().V1().Leases().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	cancel()
	factory.Shutdown()
	if _, err := subscribeLease(informer, "default", "a", func(*coordinationv1.Lease) {}); err == nil {
		t.Error("subscribing to a stopped informer succeeded")
	}
}

func TestLeaseSeconds(t *testing.T) {
	tests := map[string]struct {
		duration time.Duration
		want     int
	}{
		"whole seconds":            {duration: 15 * time.Second, want: 15},
		"fraction rounds up":       {duration: 1500 * time.Millisecond, want: 2},
		"less than a second is 1s": {duration: 100 * time.Millisecond, want: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, leaseSeconds(tc.duration)); diff != "" {
				t.Errorf("leaseSeconds(%v) (-want +got):\n%s", tc.duration, diff)
			}
		})
	}
}
