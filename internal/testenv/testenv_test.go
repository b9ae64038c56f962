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

package testenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/provfleet/provfleet/internal/testenv"

	"github.com/provfleet/provfleet/internal/polltest"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMain(m, testenv.Options{CRDDir: "testdata/crds"}))
}

func TestServiceAccountConfigHasOnlyTheManifestPermissions(t *testing.T) {
	env := testenv.Env(t)
	ctx := t.Context()
	config, err := env.ServiceAccountConfig(ctx, "e2e-reader", "reader", "testdata/reader.yaml")
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(config)
	cases := map[string]struct {
		do        func(context.Context) error
		forbidden bool
	}{
		"list ConfigMaps of its namespace": {
			do: func(ctx context.Context) error {
				_, err := client.CoreV1().ConfigMaps("e2e-reader").List(ctx, metav1.ListOptions{})
				return err
			},
		},
		"list ConfigMaps of another namespace": {
			do: func(ctx context.Context) error {
				_, err := client.CoreV1().ConfigMaps(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
				return err
			},
			forbidden: true,
		},
		"create a ConfigMap": {
			do: func(ctx context.Context) error {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "nope"}}
				_, err := client.CoreV1().ConfigMaps("e2e-reader").Create(ctx, cm, metav1.CreateOptions{})
				return err
			},
			forbidden: true,
		},
		"list PersistentVolumes": {
			do: func(ctx context.Context) error {
				_, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
				return err
			},
			forbidden: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.do(t.Context())
			if tc.forbidden && !apierrors.IsForbidden(err) {
				t.Fatalf("want Forbidden, got %v", err)
			}
			if !tc.forbidden && err != nil {
				t.Fatalf("want success, got %v", err)
			}
		})
	}
}

func TestApplyIsIdempotent(t *testing.T) {
	env := testenv.Env(t)
	ctx := t.Context()
	for range 2 {
		if err := env.Apply(ctx, "testdata/reader.yaml"); err != nil {
			t.Fatal(err)
		}
	}
	client := kubernetes.NewForConfigOrDie(env.Config())
	binding, err := client.RbacV1().RoleBindings("e2e-reader").Get(ctx, "reader", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the RoleBinding inside the List document was not applied: %v", err)
	}
	if diff := cmp.Diff("configmap-reader", binding.RoleRef.Name); diff != "" {
		t.Errorf("roleRef (-want +got):\n%s", diff)
	}
}

func TestCRDsAreInstalled(t *testing.T) {
	env := testenv.Env(t)
	client := dynamic.NewForConfigOrDie(env.Config())
	widgets := schema.GroupVersionResource{Group: "e2e.provfleet.io", Version: "v1", Resource: "widgets"}
	widget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.provfleet.io/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "small"},
		"spec":       map[string]any{"size": int64(3)},
	}}
	got, err := client.Resource(widgets).Create(t.Context(), widget, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the CRD of Options.CRDDir is not served: %v", err)
	}
	size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size")
	if diff := cmp.Diff(int64(3), size); diff != "" {
		t.Errorf("spec.size (-want +got):\n%s", diff)
	}
}

// The binder of kube-controller-manager must bind a claim to a matching
// pre-created volume: without it no provisioner test means anything.
func TestControllerManagerBindsClaims(t *testing.T) {
	env := testenv.Env(t)
	ctx := t.Context()
	client := kubernetes.NewForConfigOrDie(env.Config())
	namespace := createNamespace(t, client)
	size := resource.MustParse("1Mi")
	volume := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "static-" + namespace},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "manual-" + namespace,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/nowhere"},
			},
		},
	}
	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, volume, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().PersistentVolumes().Delete(context.Background(), volume.Name, metav1.DeleteOptions{})
	})
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &volume.Spec.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if _, err := client.CoreV1().PersistentVolumeClaims(namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bound := claim
	polltest.Until(ctx, t, "the claim bound", 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, error) {
		got, err := client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		bound = got
		if got.Status.Phase != corev1.ClaimBound {
			return false, fmt.Errorf("its status is %+v", got.Status)
		}
		return true, nil
	})
	if diff := cmp.Diff(volume.Name, bound.Spec.VolumeName); diff != "" {
		t.Errorf("volumeName (-want +got):\n%s", diff)
	}
}

// The namespace controller must finish deleting a namespace, or tests that
// clean up by namespace would leave claims behind.
func TestNamespaceDeletionCompletes(t *testing.T) {
	env := testenv.Env(t)
	ctx := t.Context()
	client := kubernetes.NewForConfigOrDie(env.Config())
	namespace := createNamespace(t, client)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "content"}}
	if _, err := client.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	polltest.Until(ctx, t, "namespace "+namespace+" gone", 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// kubectl, built with the servers, talks to them through the admin kubeconfig
// and reports the same version as the server.
func TestAdminKubeconfigWorksWithKubectl(t *testing.T) {
	env := testenv.Env(t)
	config, err := clientcmd.BuildConfigFromFlags("", env.AdminKubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	server, err := kubernetes.NewForConfigOrDie(config).Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("admin kubeconfig does not reach the server: %v", err)
	}
	kubectl := filepath.Join(env.BinDir(), "kubectl")
	out, err := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", env.AdminKubeconfigPath(), "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("kubectl version: %v", err)
	}
	var versions struct {
		ClientVersion struct{ GitVersion string }
		ServerVersion struct{ GitVersion string }
	}
	if err := json.Unmarshal(out, &versions); err != nil {
		t.Fatalf("cannot read kubectl version output %q: %v", out, err)
	}
	want := struct{ Client, Server string }{server.GitVersion, server.GitVersion}
	got := struct{ Client, Server string }{versions.ClientVersion.GitVersion, versions.ServerVersion.GitVersion}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kubectl version (-want +got):\n%s", diff)
	}
}

func createNamespace(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	ns, err := client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}
