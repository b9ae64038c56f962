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

package charttest_test

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// With the agents' namespace and ServiceAccount of other names, the policies
// concern that ServiceAccount alone, the Leases of that namespace, and read
// the manager's params there.
func TestNodeRestrictionNames(t *testing.T) {
	objects := render(t, readValues(t, fullValues))
	const user = "request.userInfo.username == 'system:serviceaccount:storage-agents:storage-agent'"
	for _, policy := range only[*admissionregistrationv1.ValidatingAdmissionPolicy](objects) {
		if len(policy.Spec.MatchConditions) != 1 || policy.Spec.MatchConditions[0].Expression != user {
			t.Errorf("policy %s matches %+v, want only the agents' ServiceAccount", policy.Name, policy.Spec.MatchConditions)
		}
		if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("policy %s does not fail closed", policy.Name)
		}
		if strings.HasSuffix(policy.Name, "-leases") {
			if got := policy.Spec.MatchConstraints.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]; got != "storage-agents" {
				t.Errorf("the Lease policy holds the Leases of namespace %q, want storage-agents", got)
			}
		}
	}
	for _, binding := range only[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](objects) {
		if ref := binding.Spec.ParamRef; ref != nil && (ref.Namespace != "storage-agents" || ref.Name != "provfleet-node-volumes") {
			t.Errorf("binding %s reads params %s/%s, want storage-agents/provfleet-node-volumes", binding.Name, ref.Namespace, ref.Name)
		}
	}
}
