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

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/provfleet/provfleet/charts/charttest"
)

// The NetworkPolicy is off by default; enabled, it selects the manager's
// Pods only, for egress only, and lets them reach the NFS servers' ports,
// the API server, DNS and the extra rules, nothing else.
func TestNetworkPolicy(t *testing.T) {
	if got := only[*networkingv1.NetworkPolicy](render(t, nil)); len(got) != 0 {
		t.Errorf("%d NetworkPolicies by default, want none", len(got))
	}
	objects := render(t, map[string]any{"networkPolicy": map[string]any{
		"enabled": true,
		"nfsServers": []any{
			map[string]any{"cidr": "10.0.5.10/32", "ports": []any{111, 2049, 20048}},
			map[string]any{"cidr": "10.0.6.0/24", "ports": []any{2049}},
		},
		"apiServer":   map[string]any{"cidrs": []any{"192.168.1.10/32", "192.168.1.11/32"}, "port": 443},
		"extraEgress": []any{map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.9.0.0/16"}}}}},
	}})
	policy := one[*networkingv1.NetworkPolicy](t, objects)
	selector := labels.SelectorFromSet(policy.Spec.PodSelector.MatchLabels)
	manager := one[*appsv1.Deployment](t, objects)
	agent := one[*appsv1.DaemonSet](t, objects)
	if policy.Namespace != manager.Namespace || !selector.Matches(labels.Set(manager.Spec.Template.Labels)) {
		t.Errorf("the policy in %s selecting %v does not apply to the manager's Pods (%s, %v)", policy.Namespace, selector, manager.Namespace, manager.Spec.Template.Labels)
	}
	if policy.Namespace == agent.Namespace && selector.Matches(labels.Set(agent.Spec.Template.Labels)) {
		t.Error("the policy applies to the node agents too")
	}
	if diff := cmp.Diff([]networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, policy.Spec.PolicyTypes); diff != "" {
		t.Errorf("policy types (-want +got):\n%s", diff)
	}
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := func(protocol *corev1.Protocol, n int) networkingv1.NetworkPolicyPort {
		p := intstr.FromInt(n)
		return networkingv1.NetworkPolicyPort{Protocol: protocol, Port: &p}
	}
	to := func(cidrs ...string) []networkingv1.NetworkPolicyPeer {
		var peers []networkingv1.NetworkPolicyPeer
		for _, cidr := range cidrs {
			peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}})
		}
		return peers
	}
	want := []networkingv1.NetworkPolicyEgressRule{
		{To: to("10.0.5.10/32"), Ports: []networkingv1.NetworkPolicyPort{port(&tcp, 111), port(&tcp, 2049), port(&tcp, 20048)}},
		{To: to("10.0.6.0/24"), Ports: []networkingv1.NetworkPolicyPort{port(&tcp, 2049)}},
		{To: to("192.168.1.10/32", "192.168.1.11/32"), Ports: []networkingv1.NetworkPolicyPort{port(&tcp, 443)}},
		{Ports: []networkingv1.NetworkPolicyPort{port(&udp, 53), port(&tcp, 53)}},
		{To: to("10.9.0.0/16")},
	}
	if diff := cmp.Diff(want, policy.Spec.Egress); diff != "" {
		t.Errorf("egress rules (-want +got):\n%s", diff)
	}
}

// Enabled without the API server's addresses, the chart refuses to render
// rather than cut the manager off from the API server.
func TestNetworkPolicyNeedsTheAPIServer(t *testing.T) {
	_, err := charttest.Render(t.Context(), charttest.ChartDir(repoRoot(t)), map[string]any{"networkPolicy": map[string]any{
		"enabled":    true,
		"nfsServers": []any{map[string]any{"cidr": "10.0.5.10/32", "ports": []any{2049}}},
	}})
	if err == nil || !strings.Contains(err.Error(), "networkPolicy.apiServer.cidrs is required") {
		t.Errorf("render: %v, want the API server's addresses asked for", err)
	}
}
