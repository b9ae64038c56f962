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

package hostpathnodes

import (
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubetesting "k8s.io/client-go/testing"
)

// A node Lease's name tells its node unless the node's name was too long
// for it.
func TestLeaseNode(t *testing.T) {
	for node, want := range map[string]string{
		"node-a": "node-a", "a.b.example.com": "a.b.example.com",
		strings.Repeat("n", 228): strings.Repeat("n", 228), strings.Repeat("n", 229): "", strings.Repeat("n", 250): "",
	} {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: NodeLeaseName(node)}}
		if got := leaseNode(lease); got != want {
			t.Errorf("node of Lease %s: %q, want %q", lease.Name, got, want)
		}
	}
}

// A cluster older than 1.30, or one that does not serve
// ValidatingAdmissionPolicies, is told unrestricted.
func TestCheckAdmissionPolicies(t *testing.T) {
	served := []*metav1.APIResourceList{{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "validatingwebhookconfigurations"}, {Name: "validatingadmissionpolicies"},
	}}}
	notServed := []*metav1.APIResourceList{{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "validatingwebhookconfigurations"}}}}
	tests := map[string]struct {
		major, minor string
		resources    []*metav1.APIResourceList
		want         string
	}{
		"1.37":               {major: "1", minor: "37", resources: served},
		"1.30 of a provider": {major: "1", minor: "30+", resources: served},
		"1.29":               {major: "1", minor: "29", resources: served, want: "Kubernetes 1.29 is older than 1.30"},
		"policies off":       {major: "1", minor: "31", resources: notServed, want: "does not serve"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := &fakediscovery.FakeDiscovery{Fake: &kubetesting.Fake{Resources: tc.resources},
				FakedServerVersion: &version.Info{Major: tc.major, Minor: tc.minor}}
			got := checkAdmissionPolicies(client)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
