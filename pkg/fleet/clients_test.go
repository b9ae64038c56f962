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
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"

	"github.com/provfleet/provfleet/api/v1alpha1"

	"github.com/provfleet/provfleet/internal/polltest"
)

// fakeAPIServer answers every list with nothing, holds every watch open,
// echoes every write, and counts the writes by path.
type fakeAPIServer struct {
	*httptest.Server

	mu     sync.Mutex
	writes map[string]int
}

func newFakeAPIServer(t *testing.T) *fakeAPIServer {
	t.Helper()
	s := &fakeAPIServer{writes: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *fakeAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	switch {
	case query.Get("sendInitialEvents") == "true":
		// Informers fall back to list and watch.
		http.Error(w, "streaming lists are not served", http.StatusBadRequest)
	case query.Get("watch") == "true":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"metadata":{"resourceVersion":"1"},"items":[]}`)
	default:
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.writes[r.URL.Path]++
		s.mu.Unlock()
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		_, _ = w.Write(body)
	}
}

func (s *fakeAPIServer) writesTo(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes[path]
}

// TestManagerLeaseAndEventWritesSkipTheSharedBudget spends the whole fleet
// budget, then shows that a provisioner's Lease writes and the manager's
// Events still go through: each has a budget of its own.
func TestManagerLeaseAndEventWritesSkipTheSharedBudget(t *testing.T) {
	api := newFakeAPIServer(t)
	_, ctx := ktesting.NewTestContext(t)
	const namespace = "provfleet-system"
	// A refill of one token in 1000 s: once the burst is spent, nothing
	// through the fleet budget goes out during the test.
	m, err := New(&rest.Config{Host: api.URL}, Settings{
		Roles: Roles{Manager: true}, Namespace: namespace, Identity: "replica-1", LeaderElection: true,
		HostPathRoot: t.TempDir(), QPS: 0.001, Burst: 50,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- m.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	polltest.Eventually(t, "the manager's caches sync", func() bool { return m.Ready() == nil })

	// Each new provisioner may take a token while the bucket holds one: spend
	// them all.
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatal("the fleet budget never ran out")
		}
		client, err := m.deps.tenants.clientFor(fmt.Sprintf("x.io/spend-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		reqCtx, cancelReq := context.WithTimeout(ctx, 2*time.Second)
		_, err = client.CoreV1().ConfigMaps(namespace).Create(reqCtx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "spend"}}, metav1.CreateOptions{})
		cancelReq()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("spending the fleet budget: %v", err)
		}
	}

	reqCtx, cancelReq := context.WithTimeout(ctx, 30*time.Second)
	defer cancelReq()
	client, err := m.deps.tenants.clientFor("x.io/a")
	if err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "x.io-a"}}
	if _, err := client.CoordinationV1().Leases(namespace).Create(reqCtx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a Lease create waited for the fleet budget: %v", err)
	}
	for i := range 5 {
		if _, err := client.CoordinationV1().Leases(namespace).Update(reqCtx, lease, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("Lease renewal %d waited for the fleet budget: %v", i, err)
		}
	}

	const events = 5
	for i := range events {
		pc := &v1alpha1.ProvisionerConfig{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pc-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}}
		m.recorder.Eventf(pc, corev1.EventTypeWarning, v1alpha1.ReasonInvalidSpec, "refusal %d", i)
	}
	path := "/api/v1/namespaces/" + metav1.NamespaceDefault + "/events"
	polltest.Eventually(t, fmt.Sprintf("the %d Events written", events), func() bool { return api.writesTo(path) == events })
}

// Each client of the fleet names itself in its User-Agent, though all share
// one connection pool: the apiserver's audit log and request logs then tell
// the provisioners apart.
func TestClientsSendTheirUserAgents(t *testing.T) {
	var mu sync.Mutex
	agents := map[string]string{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents[r.URL.Path] = r.Header.Get("User-Agent")
		mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	}))
	t.Cleanup(api.Close)
	m, err := New(&rest.Config{Host: api.URL}, Settings{
		Roles: Roles{Manager: true}, Namespace: "provfleet-system", Identity: "replica-1", LeaderElection: true,
		HostPathRoot: t.TempDir(), QPS: 100, Burst: 100,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(m.deps.stop)
	ctx := t.Context()
	tenant, err := m.deps.tenants.clientFor("x.io/a")
	if err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim"}}
	if _, err := tenant.CoreV1().PersistentVolumeClaims("team").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x.io-a"}}
	if _, err := tenant.CoordinationV1().Leases("provfleet-system").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "event"}}
	if _, err := m.deps.events.Events("team").Create(ctx, event, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	config := &v1alpha1.ProvisionerConfig{ObjectMeta: metav1.ObjectMeta{Name: "fast"}}
	if _, err := m.deps.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Create(ctx, config, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	want := map[string]string{
		"/api/v1/namespaces/team/persistentvolumeclaims":                  "provfleet/x.io/a",
		"/apis/coordination.k8s.io/v1/namespaces/provfleet-system/leases": "provfleet/x.io/a",
		"/api/v1/namespaces/team/events":                                  eventsUserAgent,
		"/apis/provfleet.io/v1alpha1/provisionerconfigs":                  managerTenant,
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, agents); diff != "" {
		t.Errorf("User-Agent by path (-want +got):\n%s", diff)
	}
}

func TestSeparateBudgets(t *testing.T) {
	type budget struct {
		QPS   float32
		Burst int
	}
	tests := map[string]struct {
		budget   func(Settings) (float32, int)
		settings Settings
		want     budget
	}{
		"events: derived from the fleet budget":      {budget: eventBudget, settings: Settings{QPS: 100, Burst: 200}, want: budget{20, 100}},
		"events: set":                                {budget: eventBudget, settings: Settings{QPS: 100, Burst: 200, EventQPS: 3, EventBurst: 7}, want: budget{3, 7}},
		"events: burst of at least one":              {budget: eventBudget, settings: Settings{QPS: 1, Burst: 1}, want: budget{0.2, 1}},
		"leases: default, whatever the fleet budget": {budget: leaseBudget, settings: Settings{QPS: 5, Burst: 10}, want: budget{200, 400}},
		"leases: set":                                {budget: leaseBudget, settings: Settings{QPS: 5, Burst: 10, LeaseQPS: 30, LeaseBurst: 60}, want: budget{30, 60}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got budget
			got.QPS, got.Burst = tc.budget(tc.settings)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("budget (-want +got):\n%s", diff)
			}
		})
	}
}
