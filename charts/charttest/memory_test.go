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
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// memorySettings are what sizes a container's memory: its resources, and
// the flag and variable that hand its limit to the Go runtime.
type memorySettings struct {
	Requests, Limits map[corev1.ResourceName]string
	LimitFlag        bool
	LimitVariable    *corev1.ResourceFieldSelector
}

// TestMemoryLimits: the manager and the agents have memory requests and
// limits in the chart's defaults, and each hands its own container's limit
// to --memory-limit.
func TestMemoryLimits(t *testing.T) {
	got := map[string]memorySettings{}
	for _, obj := range render(t, nil) {
		switch obj.(type) {
		case *appsv1.Deployment, *appsv1.DaemonSet:
			for _, c := range podOf(t, obj).Spec.Containers {
				got[obj.GetObjectKind().GroupVersionKind().Kind+" "+c.Name] = memoryOf(c)
			}
		}
	}
	if len(got) != 2 {
		t.Fatalf("want the containers of the Deployment and the DaemonSet, got %v", got)
	}
	for name, m := range got {
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
