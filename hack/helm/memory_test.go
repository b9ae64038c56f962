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

package helm_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// memorySettings are what sizes a container's memory: its resources, and
// the flag and variable that hand its limit to the Go runtime.
type memorySettings struct {
	Requests, Limits map[corev1.ResourceName]string
	LimitFlag        bool
	LimitVariable    *corev1.ResourceFieldSelector
}

// The manager and the agents have the same memory requests and limits in
// the chart's defaults and in examples/deploy, and each hands its own
// container's limit to --memory-limit.
func TestMemoryInStep(t *testing.T) {
	sources := map[string][]runtime.Object{
		"chart":           render(t, nil),
		"examples/deploy": decodeFiles(t, deployManifest(t, "deployment.yaml"), deployManifest(t, "daemonset.yaml")),
	}
	got := map[string]map[string]memorySettings{}
	for source, objects := range sources {
		got[source] = map[string]memorySettings{}
		for _, obj := range objects {
			switch obj.(type) {
			case *appsv1.Deployment, *appsv1.DaemonSet:
				for _, c := range podOf(t, obj).Spec.Containers {
					got[source][obj.GetObjectKind().GroupVersionKind().Kind+" "+c.Name] = memoryOf(c)
				}
			}
		}
	}
	if diff := cmp.Diff(got["examples/deploy"], got["chart"]); diff != "" {
		t.Errorf("memory of the workloads (-examples/deploy +chart):\n%s", diff)
	}
	for name, m := range got["chart"] {
		if m.Limits[corev1.ResourceMemory] == "" || m.Requests[corev1.ResourceMemory] == "" {
			t.Errorf("%s: want a memory request and limit, got %+v", name, m)
		}
		if !m.LimitFlag || m.LimitVariable == nil || m.LimitVariable.Resource != "limits.memory" {
			t.Errorf("%s: want --memory-limit from the container's limits.memory, got %+v", name, m)
		}
	}
}

// memoryOf reads the memory settings of c; MEMORY_LIMIT is the variable
// --memory-limit takes, from c's own resources.
func memoryOf(c corev1.Container) memorySettings {
	m := memorySettings{Requests: quantities(c.Resources.Requests), Limits: quantities(c.Resources.Limits)}
	for _, arg := range c.Args {
		m.LimitFlag = m.LimitFlag || arg == "--memory-limit=$(MEMORY_LIMIT)"
	}
	for _, env := range c.Env {
		// Another container's limit would not be this one's.
		if env.Name == "MEMORY_LIMIT" && env.ValueFrom != nil && env.ValueFrom.ResourceFieldRef != nil &&
			(env.ValueFrom.ResourceFieldRef.ContainerName == "" || env.ValueFrom.ResourceFieldRef.ContainerName == c.Name) {
			m.LimitVariable = env.ValueFrom.ResourceFieldRef
		}
	}
	return m
}

func quantities(list corev1.ResourceList) map[corev1.ResourceName]string {
	out := map[corev1.ResourceName]string{}
	for name, q := range list {
		out[name] = q.String()
	}
	return out
}
