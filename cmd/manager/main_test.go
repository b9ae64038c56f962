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

package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func fakeEnvironment(vars map[string]string, namespaceFile string) environment {
	return environment{
		getenv: func(key string) string { return vars[key] },
		readFile: func(path string) ([]byte, error) {
			if path != inClusterNamespaceFile || namespaceFile == "" {
				return nil, os.ErrNotExist
			}
			return []byte(namespaceFile + "\n"), nil
		},
		hostname: func() (string, error) { return "host-a", nil },
	}
}

func TestParseOptions(t *testing.T) {
	type result struct {
		Namespace, Identity, NodeName, Metrics, Health string
		QPS                                            float32
		Burst                                          int
		LeaderElect                                    bool
		LegacyLockNamespace                            string
		BackendProbeInterval                           time.Duration
		Roles                                          []string
		NodeLeaseNamespace                             string
		NodeLeaseDuration                              time.Duration
	}
	tests := map[string]struct {
		args          []string
		vars          map[string]string
		namespaceFile string
		want          result
		wantErr       bool
	}{
		"defaults from POD_NAMESPACE and NODE_NAME": {
			vars: map[string]string{"POD_NAMESPACE": "from-env", "NODE_NAME": "node-1"},
			want: result{Namespace: "from-env", Identity: "host-a_", NodeName: "node-1", Metrics: ":8080", Health: ":8081", QPS: 50, Burst: 100, LeaderElect: true, BackendProbeInterval: 30 * time.Second,
				Roles: []string{"manager"}, NodeLeaseDuration: 40 * time.Second},
		},
		"namespace from the in-cluster file": {
			namespaceFile: "from-file",
			want: result{Namespace: "from-file", Identity: "host-a_", Metrics: ":8080", Health: ":8081", QPS: 50, Burst: 100, LeaderElect: true, BackendProbeInterval: 30 * time.Second,
				Roles: []string{"manager"}, NodeLeaseDuration: 40 * time.Second},
		},
		"flags win": {
			args: []string{"--namespace=ns", "--identity=me", "--metrics-bind-address=0", "--health-probe-bind-address=:9", "--kube-api-qps=5", "--kube-api-burst=7", "--leader-elect=false", "--legacy-lock-namespace=kube-system", "--backend-probe-interval=1s",
				"--role=manager,node", "--node-lease-namespace=agents", "--node-lease-duration=10s"},
			vars: map[string]string{"POD_NAMESPACE": "from-env", "NODE_NAME": "node-1"},
			want: result{Namespace: "ns", Identity: "me", NodeName: "node-1", Metrics: "0", Health: ":9", QPS: 5, Burst: 7, LegacyLockNamespace: "kube-system", BackendProbeInterval: time.Second,
				Roles: []string{"manager", "node"}, NodeLeaseNamespace: "agents", NodeLeaseDuration: 10 * time.Second},
		},
		"node agent without its node": {
			args:    []string{"--namespace=ns", "--role=node"},
			wantErr: true,
		},
		"node agent without a namespace, even with no leader election": {
			args:    []string{"--role=node", "--leader-elect=false"},
			vars:    map[string]string{"NODE_NAME": "node-1"},
			wantErr: true,
		},
		"unknown role": {
			args:    []string{"--namespace=ns", "--role=manager,nodes"},
			wantErr: true,
		},
		"node lease too short to renew": {
			args:    []string{"--namespace=ns", "--node-lease-duration=1s"},
			wantErr: true,
		},
		"no namespace for the Leases": {
			wantErr: true,
		},
		"no namespace needed without leader election": {
			args: []string{"--leader-elect=false"},
			want: result{Identity: "host-a_", Metrics: ":8080", Health: ":8081", QPS: 50, Burst: 100, BackendProbeInterval: 30 * time.Second,
				Roles: []string{"manager"}, NodeLeaseDuration: 40 * time.Second},
		},
		"zero budget": {
			args:    []string{"--namespace=ns", "--kube-api-qps=0"},
			wantErr: true,
		},
		"no probe interval": {
			args:    []string{"--namespace=ns", "--backend-probe-interval=0"},
			wantErr: true,
		},
		"stray argument": {
			args:    []string{"--namespace=ns", "extra"},
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := parseOptions(tc.args, fakeEnvironment(tc.vars, tc.namespaceFile))
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseOptions() error = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			got := result{o.namespace, o.identity, o.nodeName, o.metricsBindAddress, o.healthProbeBindAddress, o.kubeAPIQPS, o.kubeAPIBurst, o.leaderElect, o.legacyLockNamespace, o.backendProbeInterval,
				o.roles, o.nodeLeaseNamespace, o.nodeLeaseDuration}
			if strings.HasPrefix(tc.want.Identity, "host-a_") {
				if !strings.HasPrefix(got.Identity, "host-a_") || len(got.Identity) <= len("host-a_") {
					t.Errorf("identity %q is not the host name plus a suffix", got.Identity)
				}
				got.Identity = tc.want.Identity
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseOptions() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultIdentitiesDiffer(t *testing.T) {
	env := fakeEnvironment(map[string]string{"POD_NAMESPACE": "ns"}, "")
	a, errA := parseOptions(nil, env)
	b, errB := parseOptions(nil, env)
	if errA != nil || errB != nil {
		t.Fatalf("parseOptions: %v, %v", errA, errB)
	}
	if a.identity == b.identity {
		t.Errorf("two replicas on one host got the same identity %q", a.identity)
	}
}

type fakeChecker struct{ ready, lease, stuck error }

func (f fakeChecker) Ready() error        { return f.ready }
func (f fakeChecker) LeaseHealthy() error { return f.lease }
func (f fakeChecker) Stuck() error        { return f.stuck }

func TestHealthHandler(t *testing.T) {
	tests := map[string]struct {
		checker    fakeChecker
		path       string
		wantCode   int
		wantInBody string
	}{
		"live while not ready":     {checker: fakeChecker{ready: errors.New("syncing")}, path: "/healthz", wantCode: http.StatusOK},
		"ready":                    {path: "/readyz", wantCode: http.StatusOK},
		"caches not synced":        {checker: fakeChecker{ready: errors.New("syncing")}, path: "/readyz", wantCode: http.StatusServiceUnavailable, wantInBody: "syncing"},
		"an overdue lease renewal": {checker: fakeChecker{lease: errors.New("lease of x.io/a overdue")}, path: "/readyz", wantCode: http.StatusServiceUnavailable, wantInBody: "x.io/a"},
		"a stuck backend call":     {checker: fakeChecker{stuck: errors.New("ProvisionerConfig slow: 1 backend call(s) running past their deadline")}, path: "/readyz", wantCode: http.StatusServiceUnavailable, wantInBody: "slow"},
		"live while stuck":         {checker: fakeChecker{stuck: errors.New("stuck")}, path: "/healthz", wantCode: http.StatusOK},
		"nothing on other paths":   {path: "/metrics", wantCode: http.StatusNotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			healthHandler(tc.checker).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.wantInBody) {
				t.Errorf("GET %s = %d %q, want %d containing %q", tc.path, rec.Code, rec.Body.String(), tc.wantCode, tc.wantInBody)
			}
		})
	}
}
