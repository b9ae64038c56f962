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

package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/provfleet/provfleet/internal/testenv"
)

// enforceLabel is the label of a Namespace that names the Pod Security level
// its Pods must meet.
const enforceLabel = "pod-security.kubernetes.io/enforce"

// A Pod of each shipped template, dry-run in each namespace, is admitted or
// refused by the Pod Security admission of the API server: the manager meets
// the restricted level, the node agent needs the privileged level for its
// hostPath volume and for nothing else, and the shipped namespaces enforce
// the levels those need, without warnings.
func TestPodSecurity(t *testing.T) {
	env := testenv.Env(t)
	ctx := t.Context()
	root := repoRoot(t)
	// The shipped Namespaces, with the ServiceAccounts their Pods run as.
	if err := env.Apply(ctx, testenv.DeployManifests(root, "namespace.yaml", "rbac.yaml", "node-rbac.yaml")...); err != nil {
		t.Fatal(err)
	}
	manager := shippedPod(t, testenv.DeployManifests(root, "deployment.yaml")[0])
	agent := shippedPod(t, testenv.DeployManifests(root, "daemonset.yaml")[0])
	agentWithoutHostPath := withoutHostPath(agent)
	admin := kubernetes.NewForConfigOrDie(env.Config())
	baseline := levelNamespace(t, admin, "baseline", manager, agent)
	restricted := levelNamespace(t, admin, "restricted", manager, agent)
	cases := map[string]struct {
		pod       *corev1.Pod
		namespace string
		// refused is what the refusal says; empty: admitted.
		refused []string
	}{
		"manager in its namespace":        {pod: manager, namespace: testenv.ManagerNamespace},
		"node agent in its namespace":     {pod: agent, namespace: testenv.NodeAgentNamespace},
		"manager at the restricted level": {pod: manager, namespace: restricted},
		"node agent at the baseline level": {
			pod: agent, namespace: baseline,
			refused: []string{`violates PodSecurity "baseline:latest"`, `hostPath volumes (volume "host-path-root")`},
		},
		"node agent without its hostPath volume at the baseline level": {pod: agentWithoutHostPath, namespace: baseline},
		"node agent in the manager's namespace": {
			pod: runningAs(agent, manager.Spec.ServiceAccountName), namespace: testenv.ManagerNamespace,
			refused: []string{`violates PodSecurity "restricted:latest"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			warnings, err := dryRunPod(t.Context(), env.Config(), tc.namespace, tc.pod)
			if tc.refused == nil && err != nil {
				t.Fatalf("want admitted, got %v", err)
			}
			if tc.refused != nil && !refusedWith(err, tc.refused) {
				t.Fatalf("want Forbidden with %q, got %v", tc.refused, err)
			}
			if diff := cmp.Diff([]string(nil), warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// The shipped Deployment and DaemonSet are valid, and their namespaces warn
// of nothing in them: Pod Security warns of workloads too, at the levels the
// namespace's warn label names.
func TestWorkloadsAreAdmitted(t *testing.T) {
	env := testenv.Env(t)
	root := repoRoot(t)
	if err := env.Apply(t.Context(), testenv.DeployManifests(root, "namespace.yaml")...); err != nil {
		t.Fatal(err)
	}
	for _, manifest := range testenv.DeployManifests(root, "deployment.yaml", "daemonset.yaml") {
		t.Run(filepath.Base(manifest), func(t *testing.T) {
			warnings, err := dryRunWorkload(t.Context(), env.Config(), shippedWorkload(t, manifest))
			if err != nil {
				t.Fatalf("want admitted, got %v", err)
			}
			if diff := cmp.Diff([]string(nil), warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// shippedPod is a Pod of the template of the Deployment or the DaemonSet in
// the manifest, in that object's namespace.
func shippedPod(t *testing.T, manifest string) *corev1.Pod {
	t.Helper()
	var template corev1.PodTemplateSpec
	var namespace string
	switch workload := shippedWorkload(t, manifest).(type) {
	case *appsv1.Deployment:
		template, namespace = workload.Spec.Template, workload.Namespace
	case *appsv1.DaemonSet:
		template, namespace = workload.Spec.Template, workload.Namespace
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-security", Namespace: namespace, Labels: template.Labels},
		Spec:       template.Spec,
	}
}

// shippedWorkload is the Deployment or the DaemonSet of the manifest.
func shippedWorkload(t *testing.T, manifest string) runtime.Object {
	t.Helper()
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("cannot decode %s: %v", manifest, err)
	}
	switch obj.(type) {
	case *appsv1.Deployment, *appsv1.DaemonSet:
		return obj
	}
	t.Fatalf("%s holds a %T, not a Deployment or a DaemonSet", manifest, obj)
	return nil
}

// withoutHostPath is pod without its hostPath volumes and their mounts.
func withoutHostPath(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	var removed []string
	pod.Spec.Volumes = slices.DeleteFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
		if v.HostPath != nil {
			removed = append(removed, v.Name)
		}
		return v.HostPath != nil
	})
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return slices.Contains(removed, m.Name)
		})
	}
	return pod
}

// runningAs is pod run as another ServiceAccount of its namespace, one that
// exists there.
func runningAs(pod *corev1.Pod, account string) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.Spec.ServiceAccountName = account
	return pod
}

// levelNamespace creates a Namespace that enforces the Pod Security level,
// with the ServiceAccounts the pods run as, and returns its name.
func levelNamespace(t *testing.T, client kubernetes.Interface, level string, pods ...*corev1.Pod) string {
	t.Helper()
	ctx := t.Context()
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "e2e-" + level + "-",
		Labels:       map[string]string{enforceLabel: level},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	for _, pod := range pods {
		account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: pod.Spec.ServiceAccountName}}
		if _, err := client.CoreV1().ServiceAccounts(ns.Name).Create(ctx, account, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return ns.Name
}

// dryRunPod asks the API server to create pod in namespace without storing
// it, and returns the warnings it answered with.
func dryRunPod(ctx context.Context, admin *rest.Config, namespace string, pod *corev1.Pod) ([]string, error) {
	client, recorder, err := testenv.WarningClient(admin)
	if err != nil {
		return nil, err
	}
	pod = pod.DeepCopy()
	pod.Namespace = namespace
	_, err = client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return recorder.List(), err
}

// dryRunWorkload asks the API server to create the Deployment or the
// DaemonSet without storing it, and returns the warnings it answered with.
func dryRunWorkload(ctx context.Context, admin *rest.Config, workload runtime.Object) ([]string, error) {
	client, recorder, err := testenv.WarningClient(admin)
	if err != nil {
		return nil, err
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	switch w := workload.(type) {
	case *appsv1.Deployment:
		_, err = client.AppsV1().Deployments(w.Namespace).Create(ctx, w, dryRun)
	case *appsv1.DaemonSet:
		_, err = client.AppsV1().DaemonSets(w.Namespace).Create(ctx, w, dryRun)
	default:
		err = fmt.Errorf("cannot dry-run a %T", workload)
	}
	return recorder.List(), err
}

// refusedWith tells whether err is a refusal whose message says all of parts.
func refusedWith(err error, parts []string) bool {
	if !apierrors.IsForbidden(err) {
		return false
	}
	for _, part := range parts {
		if !strings.Contains(err.Error(), part) {
			return false
		}
	}
	return true
}
