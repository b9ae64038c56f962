package provisioning

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func leaderConfig(identity string) Config {
	cfg := testConfig(testProvisioner)
	cfg.LeaderElection = LeaderElectionConfig{
		Enabled:       true,
		Namespace:     "default",
		Identity:      identity,
		LeaseDuration: 2 * time.Second,
		RenewDeadline: 1500 * time.Millisecond,
		RetryPeriod:   100 * time.Millisecond,
	}
	return cfg
}

func TestTwoReplicasLeaderElection(t *testing.T) {
	f := newFixture(t)
	f.start()
	f.createClass("fast", testProvisioner)

	var mu sync.Mutex
	var holders []string
	newReplica := func(identity string, backend *fakeBackend) *Controller {
		c, err := New(leaderConfig(identity), Dependencies{
			Client:        f.client,
			Informers:     f.informers,
			EventRecorder: &testRecorder{},
			Provisioner:   backend,
			OnLeaderChange: func(holder string) {
				mu.Lock()
				defer mu.Unlock()
				if identity == "b" {
					holders = append(holders, holder)
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	backendA, backendB := newFakeBackend(), newFakeBackend()
	a := newReplica("a", backendA)
	stopA := run(t, a)
	eventually(t, "a leading", a.IsLeader)
	b := newReplica("b", backendB)
	run(t, b)

	provision := func(prefix string) []string {
		var pvs []string
		for i := range 5 {
			name := fmt.Sprintf("%s-%d", prefix, i)
			f.createClaim(newClaim(name, "fast", testProvisioner))
			pvs = append(pvs, "pvc-uid-"+name)
		}
		for _, pv := range pvs {
			eventually(t, "volume "+pv, func() bool { return f.volumeExists(pv) })
		}
		return pvs
	}
	first := provision("first")
	if b.IsLeader() {
		t.Error("both replicas lead")
	}
	if err := a.LeaseHealthy(); err != nil {
		t.Errorf("leader's lease unhealthy: %v", err)
	}
	if err := b.LeaseHealthy(); err != nil {
		t.Errorf("follower's lease unhealthy: %v", err)
	}

	stopA()
	if a.IsLeader() {
		t.Error("a stopped replica still leads")
	}
	eventually(t, "b leading", b.IsLeader)
	second := provision("second")

	for _, pv := range first {
		if got := [2]int{backendA.provisionCount(pv), backendB.provisionCount(pv)}; got != [2]int{1, 0} {
			t.Errorf("%s provisioned by (a, b) = %v, want only by a, once", pv, got)
		}
	}
	for _, pv := range second {
		if got := [2]int{backendA.provisionCount(pv), backendB.provisionCount(pv)}; got != [2]int{0, 1} {
			t.Errorf("%s provisioned by (a, b) = %v, want only by b, once", pv, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(holders) < 2 || holders[0] != "a" || holders[len(holders)-1] != "b" {
		t.Errorf("b saw lease holders %q, want a first and b last", holders)
	}
}

func TestLeaseName(t *testing.T) {
	tests := map[string]struct{ name, want string }{
		"with slash":    {name: "provfleet.io/fast-local", want: "provfleet.io-fast-local"},
		"many slashes":  {name: "a/b/c", want: "a-b-c"},
		"without slash": {name: "example", want: "example"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := LeaseName(tc.name); got != tc.want {
				t.Errorf("LeaseName(%q) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}

// A stopped informer refuses handlers; Run must still end with its context.
func TestRunWithStoppedInformers(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	f.factory.Start(ctx.Done())
	f.factory.WaitForCacheSync(ctx.Done())
	cancel()
	f.factory.Shutdown()
	eventually(t, "informers stopped", func() bool { return f.informers.Claims.IsStopped() })

	c := f.newController(testConfig(testProvisioner), newFakeBackend(), &testRecorder{})
	stop := run(t, c)
	eventually(t, "running", func() bool { return c.IsLeader() && c.started.Load() })
	stop()
}
