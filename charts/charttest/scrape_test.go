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
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// monitorsOn are the chart's values that turn the ServiceMonitor, and with
// it the node agents' PodMonitor, on.
var monitorsOn = map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}}

// exampleObjects are the manifests of examples/deploy with the
// ServiceMonitor and PodMonitor of examples/monitoring.
func exampleObjects(t *testing.T) []runtime.Object {
	t.Helper()
	monitoring := filepath.Join(repoRoot(t), "examples", "monitoring")
	return decodeFiles(t, deployManifest(t, "deployment.yaml"), deployManifest(t, "daemonset.yaml"), deployManifest(t, "service.yaml"),
		filepath.Join(monitoring, "servicemonitor.yaml"), filepath.Join(monitoring, "podmonitor.yaml"))
}

// The ServiceMonitor scrapes the manager's pods through the metrics Service
// and the PodMonitor the node agents' pods, on a port each of them names,
// in the chart and in examples/ alike: the probe and capacity series of a
// hostPath backend come from the agents only.
func TestScrapeTargets(t *testing.T) {
	for name, objects := range map[string][]runtime.Object{
		"chart":    render(t, monitorsOn),
		"examples": exampleObjects(t),
	} {
		t.Run(name, func(t *testing.T) {
			manager := one[*appsv1.Deployment](t, objects)
			agent := one[*appsv1.DaemonSet](t, objects)
			service := one[*corev1.Service](t, objects)
			checkServiceMonitor(t, oneOfKind(t, objects, "ServiceMonitor"), service, manager)
			checkSelects(t, oneOfKind(t, objects, "PodMonitor"), "podMetricsEndpoints", agent.Namespace, agent.Spec.Template.Labels,
				containerPorts(agent.Spec.Template.Spec))
		})
	}
}

// checkServiceMonitor checks that monitor selects service by a port it
// has, and that service sends that port to a named port of manager's pods.
func checkServiceMonitor(t *testing.T, monitor *unstructured.Unstructured, service *corev1.Service, manager *appsv1.Deployment) {
	t.Helper()
	ports := map[string]bool{}
	for _, port := range service.Spec.Ports {
		ports[port.Name] = true
		if !containerPorts(manager.Spec.Template.Spec)[port.TargetPort.String()] {
			t.Errorf("port %s of Service %s targets %s, which the manager's container does not name", port.Name, service.Name, port.TargetPort.String())
		}
	}
	checkSelects(t, monitor, "endpoints", service.Namespace, service.Labels, ports)
	if !labels.SelectorFromSet(service.Spec.Selector).Matches(labels.Set(manager.Spec.Template.Labels)) {
		t.Errorf("Service %s selects %v, not the manager's pods %v", service.Name, service.Spec.Selector, manager.Spec.Template.Labels)
	}
}

// checkSelects checks that a ServiceMonitor or PodMonitor, which selects in
// its own namespace, selects objects labelled with targetLabels in
// namespace and scrapes a port among ports on each of its endpoints.
func checkSelects(t *testing.T, monitor *unstructured.Unstructured, endpointsField, namespace string, targetLabels map[string]string, ports map[string]bool) {
	t.Helper()
	if monitor.GetNamespace() != namespace {
		t.Errorf("%s %s lies in namespace %q, its targets in %q", monitor.GetKind(), monitor.GetName(), monitor.GetNamespace(), namespace)
	}
	matchLabels, _, err := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
	if err != nil {
		t.Fatal(err)
	}
	if len(matchLabels) == 0 || !labels.SelectorFromSet(matchLabels).Matches(labels.Set(targetLabels)) {
		t.Errorf("%s %s selects %v, not its targets labelled %v", monitor.GetKind(), monitor.GetName(), matchLabels, targetLabels)
	}
	endpoints := monitorEndpoints(t, monitor, endpointsField)
	if len(endpoints) == 0 {
		t.Errorf("%s %s has no %s", monitor.GetKind(), monitor.GetName(), endpointsField)
	}
	for _, endpoint := range endpoints {
		if port, _, _ := unstructured.NestedString(endpoint.(map[string]any), "port"); !ports[port] {
			t.Errorf("%s %s scrapes port %q, not one of %v", monitor.GetKind(), monitor.GetName(), port, ports)
		}
	}
}

// containerPorts are the names of the ports of a pod's containers.
func containerPorts(pod corev1.PodSpec) map[string]bool {
	names := map[string]bool{}
	for _, container := range pod.Containers {
		for _, port := range container.Ports {
			names[port.Name] = true
		}
	}
	return names
}

// monitorEndpoints is the list of endpoints of a ServiceMonitor
// ("endpoints") or a PodMonitor ("podMetricsEndpoints").
func monitorEndpoints(t *testing.T, monitor *unstructured.Unstructured, field string) []any {
	t.Helper()
	endpoints, _, err := unstructured.NestedSlice(monitor.Object, "spec", field)
	if err != nil {
		t.Fatal(err)
	}
	return endpoints
}

// The monitors of examples/monitoring scrape as the chart's do with its
// defaults: same ports, paths, intervals and relabelings.
func TestMonitorsInStep(t *testing.T) {
	chart, examples := render(t, monitorsOn), exampleObjects(t)
	for kind, field := range map[string]string{"ServiceMonitor": "endpoints", "PodMonitor": "podMetricsEndpoints"} {
		want := monitorEndpoints(t, oneOfKind(t, chart, kind), field)
		got := monitorEndpoints(t, oneOfKind(t, examples, kind), field)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s of examples/monitoring's %s (-chart +example):\n%s", field, kind, diff)
		}
	}
}
