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
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Every rendered object decodes strictly into its typed object (a
// ServiceMonitor, a PodMonitor or a PrometheusRule, whose types are not
// built in, into an Unstructured), with the defaults and with every value
// set. The dashboard and the PrometheusRule are off by default, like the
// ServiceMonitor and the agents' PodMonitor that goes with it.
func TestRender(t *testing.T) {
	cases := map[string]struct {
		values map[string]any
		want   []string
	}{
		"default values": {want: []string{
			"ClusterRole provfleet", "ClusterRole provfleet-node",
			"ClusterRoleBinding provfleet", "ClusterRoleBinding provfleet-node",
			"DaemonSet provfleet-node/provfleet-node", "Deployment provfleet-system/provfleet",
			"Namespace provfleet-node", "PodDisruptionBudget provfleet-system/provfleet",
			"Role provfleet-node/provfleet-manager", "Role provfleet-node/provfleet-node", "Role provfleet-system/provfleet",
			"RoleBinding provfleet-node/provfleet-manager", "RoleBinding provfleet-node/provfleet-node", "RoleBinding provfleet-system/provfleet",
			"Service provfleet-system/provfleet-metrics",
			"ServiceAccount provfleet-node/provfleet-node", "ServiceAccount provfleet-system/provfleet",
			"ValidatingAdmissionPolicy provfleet-node-claims", "ValidatingAdmissionPolicy provfleet-node-leases", "ValidatingAdmissionPolicy provfleet-node-volumes",
			"ValidatingAdmissionPolicyBinding provfleet-node-claims", "ValidatingAdmissionPolicyBinding provfleet-node-leases", "ValidatingAdmissionPolicyBinding provfleet-node-volumes",
		}},
		"full values": {values: readValues(t, fullValues), want: []string{
			"ClusterRole provfleet", "ClusterRole provfleet-node",
			"ClusterRoleBinding provfleet", "ClusterRoleBinding provfleet-node",
			"ConfigMap monitoring/provfleet-dashboard",
			"DaemonSet storage-agents/provfleet-node", "Deployment provfleet-system/provfleet",
			"Namespace storage-agents", "PodDisruptionBudget provfleet-system/provfleet",
			"PodMonitor storage-agents/provfleet-node",
			"PrometheusRule monitoring/provfleet", "ProvisionerConfig fast-local", "ProvisionerConfig shared",
			"Role storage-agents/provfleet-manager", "Role storage-agents/provfleet-node", "Role storage-leases/provfleet",
			"RoleBinding storage-agents/provfleet-manager", "RoleBinding storage-agents/provfleet-node", "RoleBinding storage-leases/provfleet",
			"Service provfleet-system/provfleet-metrics",
			"ServiceAccount provfleet-system/storage-manager", "ServiceAccount storage-agents/storage-agent",
			"ServiceMonitor provfleet-system/provfleet",
			"StorageClass fast-local", "StorageClass shared",
			"ValidatingAdmissionPolicy provfleet-node-claims", "ValidatingAdmissionPolicy provfleet-node-leases", "ValidatingAdmissionPolicy provfleet-node-volumes",
			"ValidatingAdmissionPolicyBinding provfleet-node-claims", "ValidatingAdmissionPolicyBinding provfleet-node-leases", "ValidatingAdmissionPolicyBinding provfleet-node-volumes",
		}},
		// nameOverride names every object after the release and itself.
		"common values": {values: readValues(t, commonValues), want: []string{
			"ClusterRole provfleet-storage", "ClusterRole provfleet-storage-node",
			"ClusterRoleBinding provfleet-storage", "ClusterRoleBinding provfleet-storage-node",
			"DaemonSet provfleet-node/provfleet-storage-node", "Deployment provfleet-system/provfleet-storage",
			"Namespace provfleet-node", "PodDisruptionBudget provfleet-system/provfleet-storage",
			"Role provfleet-node/provfleet-storage-manager", "Role provfleet-node/provfleet-storage-node", "Role provfleet-system/provfleet-storage",
			"RoleBinding provfleet-node/provfleet-storage-manager", "RoleBinding provfleet-node/provfleet-storage-node", "RoleBinding provfleet-system/provfleet-storage",
			"Service provfleet-system/provfleet-storage-metrics",
			"ServiceAccount provfleet-node/provfleet-storage-node", "ServiceAccount provfleet-system/provfleet-storage",
			"ValidatingAdmissionPolicy provfleet-storage-node-claims", "ValidatingAdmissionPolicy provfleet-storage-node-leases", "ValidatingAdmissionPolicy provfleet-storage-node-volumes",
			"ValidatingAdmissionPolicyBinding provfleet-storage-node-claims", "ValidatingAdmissionPolicyBinding provfleet-storage-node-leases", "ValidatingAdmissionPolicyBinding provfleet-storage-node-volumes",
		}},
		// Without agents the manager reads node Leases in its own Leases'
		// namespace, and nothing runs at the privileged level.
		"no node agents, no Service, no budget": {values: map[string]any{
			"nodeAgent":           map[string]any{"enabled": false},
			"metrics":             map[string]any{"service": map[string]any{"enabled": false}},
			"podDisruptionBudget": map[string]any{"enabled": false},
		}, want: []string{
			"ClusterRole provfleet", "ClusterRoleBinding provfleet", "Deployment provfleet-system/provfleet",
			"Role provfleet-system/provfleet", "Role provfleet-system/provfleet-manager",
			"RoleBinding provfleet-system/provfleet", "RoleBinding provfleet-system/provfleet-manager",
			"ServiceAccount provfleet-system/provfleet",
		}},
		// The agents' PodMonitor goes with the agents; the ServiceMonitor
		// stays, as it scrapes the manager.
		"monitors without node agents": {values: map[string]any{
			"nodeAgent": map[string]any{"enabled": false},
			"metrics":   map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
		}, want: []string{
			"ClusterRole provfleet", "ClusterRoleBinding provfleet", "Deployment provfleet-system/provfleet",
			"PodDisruptionBudget provfleet-system/provfleet",
			"Role provfleet-system/provfleet", "Role provfleet-system/provfleet-manager",
			"RoleBinding provfleet-system/provfleet", "RoleBinding provfleet-system/provfleet-manager",
			"Service provfleet-system/provfleet-metrics", "ServiceAccount provfleet-system/provfleet",
			"ServiceMonitor provfleet-system/provfleet",
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, obj := range render(t, tc.values) {
				got = append(got, describe(t, obj))
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

// describe is an object's kind and namespace/name.
func describe(t *testing.T, obj runtime.Object) string {
	t.Helper()
	accessor, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if accessor.GetNamespace() == "" {
		return fmt.Sprintf("%s %s", kind, accessor.GetName())
	}
	return fmt.Sprintf("%s %s/%s", kind, accessor.GetNamespace(), accessor.GetName())
}

// Each value reaches the field it is for.
func TestFullValues(t *testing.T) {
	objects := render(t, readValues(t, fullValues))
	manager := one[*appsv1.Deployment](t, objects)
	agent := one[*appsv1.DaemonSet](t, objects)
	monitor := oneOfKind(t, objects, "ServiceMonitor")
	podMonitor := oneOfKind(t, objects, "PodMonitor")
	managerPod, agentPod := manager.Spec.Template.Spec, agent.Spec.Template.Spec
	got := map[string]any{
		"replicas":              *manager.Spec.Replicas,
		"manager image":         managerPod.Containers[0].Image,
		"manager pull policy":   managerPod.Containers[0].ImagePullPolicy,
		"manager args":          managerPod.Containers[0].Args,
		"manager account":       managerPod.ServiceAccountName,
		"manager priority":      managerPod.PriorityClassName,
		"manager node selector": managerPod.NodeSelector,
		"manager fsGroup":       *managerPod.SecurityContext.FSGroup,
		"manager memory limit":  managerPod.Containers[0].Resources.Limits.Memory().String(),
		"manager tolerations":   len(managerPod.Tolerations),
		"manager affinity":      managerPod.Affinity.PodAntiAffinity != nil,
		"manager pod labels":    manager.Spec.Template.Labels["example.com/tier"],
		"manager spread":        managerPod.TopologySpreadConstraints,
		"manager budget":        one[*policyv1.PodDisruptionBudget](t, objects).Spec.MinAvailable.String(),
		"agent image":           agentPod.Containers[0].Image,
		"agent args":            agentPod.Containers[0].Args,
		"agent account":         agentPod.ServiceAccountName,
		"agent priority":        agentPod.PriorityClassName,
		"agent host path":       agentPod.Volumes[0].HostPath.Path,
		"agent capabilities":    agentPod.Containers[0].SecurityContext.Capabilities.Add,
		"monitor interval":      onlyInterval(t, monitor, "endpoints"),
		"monitor labels":        monitor.GetLabels()["release"],
		"pod monitor interval":  onlyInterval(t, podMonitor, "podMetricsEndpoints"),
		"pod monitor labels":    podMonitor.GetLabels()["release"],
	}
	want := map[string]any{
		"replicas":            int32(3),
		"manager image":       "registry.example.com/storage/provfleet:v9.9.9",
		"manager pull policy": corev1.PullAlways,
		"manager args": []string{
			"--role=manager", "--node-lease-namespace=storage-agents", "--namespace=storage-leases",
			"--leader-elect=true", "--kube-api-qps=20", "--kube-api-burst=40", "--host-path-root=/srv/volumes",
			"--metrics-bind-address=:9090", "--health-probe-bind-address=:9091", "--logging-format=text",
			"--memory-limit=$(MEMORY_LIMIT)", "--backend-probe-interval=1m",
		},
		"manager account":       "storage-manager",
		"manager priority":      "system-cluster-critical",
		"manager node selector": map[string]string{"node-role.kubernetes.io/control-plane": ""},
		"manager fsGroup":       int64(10001),
		"manager memory limit":  "512Mi",
		"manager tolerations":   1,
		"manager affinity":      true,
		"manager pod labels":    "storage",
		"manager spread": []corev1.TopologySpreadConstraint{{
			MaxSkew: 2, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/tier": "storage"}},
		}},
		"manager budget": "2",
		"agent image":    "registry.example.com/storage/provfleet-agent:v9.9.8",
		"agent args": []string{
			"--role=node", "--host-path-root=/mnt/disks", "--kube-api-qps=20", "--kube-api-burst=40",
			"--metrics-bind-address=:9090", "--health-probe-bind-address=:9091", "--logging-format=text",
			"--memory-limit=$(MEMORY_LIMIT)",
		},
		"agent account":        "storage-agent",
		"agent priority":       "system-node-critical",
		"agent host path":      "/mnt/disks",
		"agent capabilities":   []corev1.Capability{"CHOWN", "FOWNER"},
		"monitor interval":     "15s",
		"monitor labels":       "prometheus",
		"pod monitor interval": "15s",
		"pod monitor labels":   "prometheus",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rendered fields (-want +got):\n%s", diff)
	}
}

// onlyInterval is the interval of the only endpoint of a ServiceMonitor
// ("endpoints") or a PodMonitor ("podMetricsEndpoints").
func onlyInterval(t *testing.T, monitor *unstructured.Unstructured, field string) string {
	t.Helper()
	endpoints := monitorEndpoints(t, monitor, field)
	if len(endpoints) != 1 {
		t.Fatalf("want one endpoint of the %s, got %v", monitor.GetKind(), endpoints)
	}
	interval, _, _ := unstructured.NestedString(endpoints[0].(map[string]any), "interval")
	return interval
}

// The manager's replicas spread over nodes, or run side by side where there
// are not enough (ScheduleAnyway), and a drain evicts one of them at a time,
// however many run. A constraint without a labelSelector selects the
// manager's Pods.
func TestManagerReplicas(t *testing.T) {
	managerPods := &metav1.LabelSelector{MatchLabels: map[string]string{
		"app.kubernetes.io/name": "provfleet", "app.kubernetes.io/instance": "provfleet",
	}}
	cases := map[string]struct {
		values map[string]any
		want   policyv1.PodDisruptionBudgetSpec
		spread []corev1.TopologySpreadConstraint
	}{
		"defaults": {
			want: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: managerPods},
			spread: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector: managerPods, MatchLabelKeys: []string{"pod-template-hash"},
			}},
		},
		"five replicas, minAvailable, no spread": {
			values: map[string]any{
				"replicaCount":              5,
				"podDisruptionBudget":       map[string]any{"minAvailable": "60%"},
				"topologySpreadConstraints": []any{},
			},
			want: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("60%")), Selector: managerPods},
		},
		"a constraint of zones": {
			values: map[string]any{"topologySpreadConstraints": []any{map[string]any{
				"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
			}}},
			want: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: managerPods},
			spread: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: managerPods,
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objects := render(t, tc.values)
			budget := one[*policyv1.PodDisruptionBudget](t, objects)
			if diff := cmp.Diff(tc.want, budget.Spec); diff != "" {
				t.Errorf("PodDisruptionBudget (-want +got):\n%s", diff)
			}
			pod := one[*appsv1.Deployment](t, objects).Spec.Template.Spec
			if diff := cmp.Diff(tc.spread, pod.TopologySpreadConstraints); diff != "" {
				t.Errorf("topologySpreadConstraints (-want +got):\n%s", diff)
			}
		})
	}
}
