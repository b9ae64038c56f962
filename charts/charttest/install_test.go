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
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
	"github.com/provfleet/provfleet/pkg/generated/clientset/versioned"

	"github.com/provfleet/provfleet/internal/polltest"
)

// waitTimeout bounds each wait for the control plane or the manager.
const waitTimeout = 2 * time.Minute

// The chart installs on a real control plane, and the manager and a node
// agent, run with the arguments of the rendered Deployment and DaemonSet as
// the chart's ServiceAccounts (so with exactly the chart's RBAC), make the
// ProvisionerConfig of the chart's provisionerConfigs Ready and bind a claim
// of its StorageClass. The dashboard's ConfigMap installs with them; the
// ServiceMonitor, the agents' PodMonitor and the PrometheusRule stay off, as
// by default, since the control plane has no Prometheus Operator CRDs.
func TestInstall(t *testing.T) {
	env := testenv.Env(t)
	ctx := t.Context()
	root := t.TempDir()
	objects := install(t, env, map[string]any{
		"hostPathRoot": root,
		"provisionerConfigs": []any{map[string]any{"name": "chart-local", "spec": map[string]any{
			"provisionerName": "provfleet.io/chart-local",
			"backend":         map[string]any{"hostPath": map[string]any{"path": filepath.Join(root, "chart-local"), "volumeType": "Local"}},
		}}},
		"storageClasses": []any{map[string]any{
			"name": "chart-local", "provisioner": "provfleet.io/chart-local", "volumeBindingMode": "Immediate",
		}},
		"metrics": map[string]any{"dashboard": map[string]any{"enabled": true}},
	})
	admin := kubernetes.NewForConfigOrDie(env.Config())
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "chart-node", Labels: map[string]string{corev1.LabelHostname: "chart-node"}}}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binary, err := managerproc.Build(ctx, repoRoot(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	agent := podOf(t, one[*appsv1.DaemonSet](t, objects))
	agent.Spec.NodeName = node.Name
	for _, workload := range []*corev1.Pod{podOf(t, one[*appsv1.Deployment](t, objects)), agent} {
		runAs(t, env, binary, root, workload)
	}
	pcfg := versioned.NewForConfigOrDie(env.Config())
	eventually(t, "ProvisionerConfig chart-local Ready", func(ctx context.Context) (bool, error) {
		pc, err := pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(ctx, "chart-local", metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionTrue(pc.Status.Conditions, v1alpha1.ConditionReady), nil
	})
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "chart-claim", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To("chart-local"),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if _, err := admin.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "claim chart-claim Bound", func(ctx context.Context) (bool, error) {
		claim, err = admin.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		return err == nil && claim.Status.Phase == corev1.ClaimBound, nil
	})
	// The node agent made the volume's directory on its node.
	pv, err := admin.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.Local == nil {
		t.Fatalf("want a local volume, got %+v", pv.Spec.PersistentVolumeSource)
	}
	if info, err := os.Stat(pv.Spec.Local.Path); err != nil || !info.IsDir() || !strings.HasPrefix(pv.Spec.Local.Path, root) {
		t.Errorf("want the volume's directory under %s, got %s: %v", root, pv.Spec.Local.Path, err)
	}
}

// runAs runs the manager binary as the Pod would: with its container's
// arguments (the ports aside, which the test picks), in its namespace, as
// its ServiceAccount, on the test's Node, until the test ends.
func runAs(t *testing.T, env *testenv.Environment, binary, root string, pod *corev1.Pod) {
	t.Helper()
	config, err := env.ServiceAccountConfig(t.Context(), pod.Namespace, pod.Spec.ServiceAccountName)
	if pod.Spec.NodeName != "" {
		// A node agent's token is bound to its Pod on its node, or the
		// chart's node restriction policies refuse its every write.
		config, err = env.PodBoundConfig(t.Context(), pod.Namespace, pod.Spec.ServiceAccountName, pod.Spec.NodeName)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, config); err != nil {
		t.Fatal(err)
	}
	var args []string
	// The kubelet expands the downward API's limits.memory, in bytes, into
	// the arguments.
	limit := strconv.FormatInt(pod.Spec.Containers[0].Resources.Limits.Memory().Value(), 10)
	for _, arg := range pod.Spec.Containers[0].Args {
		if !strings.HasPrefix(arg, "--metrics-bind-address=") && !strings.HasPrefix(arg, "--health-probe-bind-address=") {
			args = append(args, strings.ReplaceAll(arg, "$(MEMORY_LIMIT)", limit))
		}
	}
	name := pod.Spec.Containers[0].Name
	p, err := managerproc.Start(managerproc.Options{
		Binary: binary, Kubeconfig: kubeconfig, Namespace: pod.Namespace, Identity: "chart-" + name,
		HostPathRoot: root, NodeName: "chart-node", Args: args, LogPath: filepath.Join(dir, name+".log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Terminate(10 * time.Second); err != nil {
			t.Errorf("%s on SIGTERM: %v", name, err)
		}
		if t.Failed() {
			log, _ := os.ReadFile(p.LogPath())
			t.Logf("log of the %s:\n%s", name, log)
		}
	})
	if err := p.WaitReady(t.Context(), waitTimeout); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it holds, failing the test after waitTimeout.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	polltest.Until(t.Context(), t, what, 200*time.Millisecond, waitTimeout, cond)
}
