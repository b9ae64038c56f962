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
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/provfleet/provfleet/charts/charttest"
)

// commonLabels and pullSecrets are those commonValues sets.
var (
	commonLabels = map[string]string{"example.com/cost-center": "storage", "example.com/tier": "platform"}
	pullSecrets  = []corev1.LocalObjectReference{{Name: "registry-credentials"}, {Name: "mirror-credentials"}}
)

// Every object the chart renders carries commonLabels beside its own.
func TestCommonLabelsOnEveryObject(t *testing.T) {
	objects := render(t, readValues(t, commonValues))
	if len(objects) == 0 {
		t.Fatal("the chart rendered nothing")
	}
	for _, obj := range objects {
		accessor, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for key := range commonLabels {
			got[key] = accessor.GetLabels()[key]
		}
		if diff := cmp.Diff(commonLabels, got); diff != "" {
			t.Errorf("commonLabels of %s (-want +got):\n%s", describe(t, obj), diff)
		}
		if accessor.GetLabels()["app.kubernetes.io/part-of"] != "provfleet" {
			t.Errorf("%s lost the chart's own labels: %v", describe(t, obj), accessor.GetLabels())
		}
	}
}

// The manager's and the agents' Pods get commonLabels and their own
// podLabels (which win) on top of their selector's labels, their own
// podAnnotations and the imagePullSecrets; the manager mounts the
// extraVolumes where extraVolumeMounts say, and the agents only their
// hostPathRoot.
func TestCommonValuesOnPods(t *testing.T) {
	objects := render(t, readValues(t, commonValues))
	manager := one[*appsv1.Deployment](t, objects)
	agent := one[*appsv1.DaemonSet](t, objects)
	type pod struct {
		Labels, Annotations map[string]string
		PullSecrets         []corev1.LocalObjectReference
		Volumes             []string
		Mounts              []corev1.VolumeMount
	}
	fields := func(template corev1.PodTemplateSpec) pod {
		var volumes []string
		for _, volume := range template.Spec.Volumes {
			volumes = append(volumes, volume.Name)
		}
		return pod{
			Labels: template.Labels, Annotations: template.Annotations, PullSecrets: template.Spec.ImagePullSecrets,
			Volumes: volumes, Mounts: template.Spec.Containers[0].VolumeMounts,
		}
	}
	got := map[string]pod{"manager": fields(manager.Spec.Template), "agent": fields(agent.Spec.Template)}
	want := map[string]pod{
		"manager": {
			Labels: map[string]string{
				"app.kubernetes.io/name": "provfleet-storage", "app.kubernetes.io/instance": charttest.ReleaseName,
				"example.com/cost-center": "storage", "example.com/tier": "manager",
			},
			Annotations: map[string]string{"example.com/scrape": "false"},
			PullSecrets: pullSecrets,
			Volumes:     []string{"nfs-1"},
			Mounts:      []corev1.VolumeMount{{Name: "nfs-1", MountPath: "/mnt/nfs-1"}},
		},
		"agent": {
			Labels: map[string]string{
				"app.kubernetes.io/name": "provfleet-storage-node", "app.kubernetes.io/instance": charttest.ReleaseName,
				"example.com/cost-center": "storage", "example.com/tier": "node-agent",
			},
			Annotations: map[string]string{"example.com/scrape": "true"},
			PullSecrets: pullSecrets,
			Volumes:     []string{"host-path-root"},
			Mounts:      []corev1.VolumeMount{{Name: "host-path-root", MountPath: "/var/lib/provfleet"}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Pods (-want +got):\n%s", diff)
	}
	if claim := manager.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim; claim == nil || claim.ClaimName != "provfleet-nfs-1" {
		t.Errorf("want the manager's extra volume of claim provfleet-nfs-1, got %+v", manager.Spec.Template.Spec.Volumes[0])
	}
}

// nameOverride and fullnameOverride name the objects as in the charts of
// nfs-subdir-external-provisioner and local-path-provisioner, and the
// bindings grant the ServiceAccounts so named.
func TestNameOverrides(t *testing.T) {
	cases := map[string]struct {
		values map[string]any
		// want are the manager's and the agents' Deployment, DaemonSet and
		// the subjects their ClusterRoleBindings grant.
		want []string
	}{
		"defaults: the release's name holds the chart's": {want: []string{
			"ClusterRoleBinding provfleet-node: provfleet-node/provfleet-node", "ClusterRoleBinding provfleet: provfleet-system/provfleet",
			"DaemonSet provfleet-node/provfleet-node", "Deployment provfleet-system/provfleet",
		}},
		"nameOverride follows the release's name": {values: map[string]any{"nameOverride": "storage"}, want: []string{
			"ClusterRoleBinding provfleet-storage-node: provfleet-node/provfleet-storage-node",
			"ClusterRoleBinding provfleet-storage: provfleet-system/provfleet-storage",
			"DaemonSet provfleet-node/provfleet-storage-node", "Deployment provfleet-system/provfleet-storage",
		}},
		"fullnameOverride wins over nameOverride": {values: map[string]any{"nameOverride": "storage", "fullnameOverride": "volumes"}, want: []string{
			"ClusterRoleBinding volumes-node: provfleet-node/volumes-node", "ClusterRoleBinding volumes: provfleet-system/volumes",
			"DaemonSet provfleet-node/volumes-node", "Deployment provfleet-system/volumes",
		}},
		"fullnameOverride cut to leave room for -node": {values: map[string]any{"fullnameOverride": strings.Repeat("v", 60)}, want: []string{
			"ClusterRoleBinding " + strings.Repeat("v", 58) + "-node: provfleet-node/" + strings.Repeat("v", 58) + "-node",
			"ClusterRoleBinding " + strings.Repeat("v", 58) + ": provfleet-system/" + strings.Repeat("v", 58),
			"DaemonSet provfleet-node/" + strings.Repeat("v", 58) + "-node", "Deployment provfleet-system/" + strings.Repeat("v", 58),
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, obj := range render(t, tc.values) {
				switch o := obj.(type) {
				case *appsv1.Deployment, *appsv1.DaemonSet:
					got = append(got, describe(t, o))
				case *rbacv1.ClusterRoleBinding:
					got = append(got, describe(t, o)+": "+o.Subjects[0].Namespace+"/"+o.Subjects[0].Name)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
}

// A value that would break what the chart renders fails the render with a
// message naming it, rather than install something else than asked.
func TestRefusedCommonValues(t *testing.T) {
	cases := map[string]struct {
		values map[string]any
		want   string
	}{
		"image.pullSecrets of earlier charts, which would be dropped": {
			values: map[string]any{"image": map[string]any{"pullSecrets": []any{"registry-credentials"}}},
			want:   "image.pullSecrets is now imagePullSecrets, a list of {name: <Secret>}",
		},
		"imagePullSecrets as names": {
			values: map[string]any{"imagePullSecrets": []any{"registry-credentials"}},
			want:   "imagePullSecrets: want {name: <Secret>}, got registry-credentials",
		},
		"commonLabels changing the selector": {
			values: map[string]any{"commonLabels": map[string]any{"app.kubernetes.io/name": "storage"}},
			want:   "commonLabels: app.kubernetes.io/name is a label the chart sets itself",
		},
		"podLabels changing the selector": {
			values: map[string]any{"podLabels": map[string]any{"app.kubernetes.io/instance": "storage"}},
			want:   "commonLabels and podLabels: app.kubernetes.io/instance is a label the chart sets itself",
		},
		"agents' podLabels changing the chart's label": {
			values: map[string]any{"nodeAgent": map[string]any{"podLabels": map[string]any{"helm.sh/chart": "storage"}}},
			want:   "commonLabels and podLabels: helm.sh/chart is a label the chart sets itself",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := charttest.Render(t.Context(), charttest.ChartDir(repoRoot(t)), tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
