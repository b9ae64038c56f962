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

package apirequests

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestDescribe(t *testing.T) {
	tests := map[string]struct {
		method, url            string
		wantVerb, wantResource string
	}{
		"get a volume": {
			method: http.MethodGet, url: "/api/v1/persistentvolumes/pvc-1",
			wantVerb: "get", wantResource: "persistentvolumes",
		},
		"list volumes": {
			method: http.MethodGet, url: "/api/v1/persistentvolumes?limit=500",
			wantVerb: "list", wantResource: "persistentvolumes",
		},
		"watch claims": {
			method: http.MethodGet, url: "/api/v1/persistentvolumeclaims?watch=true",
			wantVerb: "watch", wantResource: "persistentvolumeclaims",
		},
		"patch a claim": {
			method: http.MethodPatch, url: "/api/v1/namespaces/team/persistentvolumeclaims/db",
			wantVerb: "patch", wantResource: "persistentvolumeclaims",
		},
		"delete a volume": {
			method: http.MethodDelete, url: "/api/v1/persistentvolumes/pvc-1",
			wantVerb: "delete", wantResource: "persistentvolumes",
		},
		"update a status": {
			method: http.MethodPut, url: "/apis/provfleet.io/v1alpha1/provisionerconfigs/fast/status",
			wantVerb: "update", wantResource: "provisionerconfigs/status",
		},
		"create an Event": {
			method: http.MethodPost, url: "/api/v1/namespaces/team/events",
			wantVerb: "create", wantResource: "events",
		},
		"renew a Lease": {
			method: http.MethodPut, url: "/apis/coordination.k8s.io/v1/namespaces/provfleet-system/leases/example.com-fast",
			wantVerb: "update", wantResource: "leases",
		},
		"not a resource": {
			method: http.MethodGet, url: "/version",
			wantVerb: http.MethodGet, wantResource: "",
		},
	}
	counter, err := NewCounter(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.url, nil)
			verb, resource := counter.describe(req)
			if diff := cmp.Diff([2]string{tc.wantVerb, tc.wantResource}, [2]string{verb, resource}); diff != "" {
				t.Errorf("describe(%s %s) mismatch (-want +got):\n%s", tc.method, tc.url, diff)
			}
		})
	}
}

func TestCountsResponses(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer server.Close()
	reg := prometheus.NewRegistry()
	counter, err := NewCounter(reg)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: counter.Wrap(http.DefaultTransport)}
	for _, method := range []string{http.MethodGet, http.MethodGet, http.MethodDelete} {
		req, err := http.NewRequest(method, server.URL+"/api/v1/persistentvolumes/pvc-1", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	want := `
# HELP provfleet_api_requests_total API requests sent by this process, by verb, resource (with /subresource) and response code; code is empty when no response came.
# TYPE provfleet_api_requests_total counter
provfleet_api_requests_total{code="200",resource="persistentvolumes",verb="get"} 2
provfleet_api_requests_total{code="409",resource="persistentvolumes",verb="delete"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "provfleet_api_requests_total"); err != nil {
		t.Error(err)
	}
}
