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

package migrate

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/generated/clientset/versioned"
	provfleetfake "github.com/provfleet/provfleet/pkg/generated/clientset/versioned/fake"
)

// fates returns the recorded annotations of every PersistentVolume.
func fates(ctx context.Context, t *testing.T, kube kubernetes.Interface) map[string]map[string]string {
	t.Helper()
	list, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, pv := range list.Items {
		recorded := map[string]string{}
		for key, value := range pv.Annotations {
			if strings.HasPrefix(key, "provfleet.io/") || strings.HasPrefix(key, "hostpath.provfleet.io/") {
				recorded[key] = value
			}
		}
		got[pv.Name] = recorded
	}
	return got
}

func makeAndApply(ctx context.Context, kube kubernetes.Interface, provfleet versioned.Interface, from Source) (*Plan, error) {
	plan, err := Make(ctx, kube, Options{From: from})
	if err != nil {
		return nil, err
	}
	return plan, Apply(ctx, kube.CoreV1().PersistentVolumes(), provfleet.ProvfleetV1alpha1().ProvisionerConfigs(), plan)
}

// TestApplyNFSSubdir: applied, the plan records on each old volume the fate
// nfs-subdir-external-provisioner gives it, keeps what an administrator
// recorded, leaves other provisioners' volumes alone and creates the
// ProvisionerConfig; applied again, it changes nothing.
func TestApplyNFSSubdir(t *testing.T) {
	ctx := t.Context()
	kube := kubefake.NewClientset(nfsSubdirCluster().objects()...)
	provfleet := provfleetfake.NewSimpleClientset()
	if _, err := makeAndApply(ctx, kube, provfleet, FromNFSSubdir); err != nil {
		t.Fatalf("Apply() error = %v", err)
	}
	unmarked := func(fate string) map[string]string {
		return map[string]string{"provfleet.io/on-delete": fate, "provfleet.io/delete-unmarked": "true"}
	}
	want := map[string]map[string]string{
		"pvc-1":     unmarked("ArchiveAsNFSSubdir"),
		"pvc-2":     unmarked("Delete"),
		"pvc-3":     unmarked("ArchiveAsNFSSubdir"), // onDelete: Delete is no match for nfs-subdir
		"pvc-4":     unmarked("Delete"),
		"pvc-5":     unmarked("Retain"),
		"pvc-6":     unmarked("ArchiveAsNFSSubdir"),
		"pvc-7":     {"provfleet.io/on-delete": "Retain"},
		"pvc-8":     unmarked("Retain"),
		"pvc-9":     unmarked("Retain"),
		"pvc-other": {},
	}
	if diff := cmp.Diff(want, fates(ctx, t, kube)); diff != "" {
		t.Errorf("recorded on the volumes (-want +got):\n%s", diff)
	}
	config, err := provfleet.ProvfleetV1alpha1().ProvisionerConfigs().Get(ctx, "nfs-client-provisioner", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ProvisionerConfig: %v", err)
	}
	wantSpec := v1alpha1.ProvisionerConfigSpec{
		ProvisionerName:            "provfleet.io/nfs-client-provisioner",
		AdditionalProvisionerNames: []v1alpha1.ProvisionerName{subdirName},
		Backend: v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{
			Server:          subdirServer,
			Path:            subdirExport,
			VolumeDirectory: v1alpha1.VolumeDirectory{Mode: "0770"},
			NFSSubdir:       &v1alpha1.NFSSubdirOrigin{ProvisionerName: subdirName, Version: "v4.0.3"},
		}},
	}
	if diff := cmp.Diff(wantSpec, config.Spec); diff != "" {
		t.Errorf("ProvisionerConfig spec (-want +got):\n%s", diff)
	}

	again, err := makeAndApply(ctx, kube, provfleet, FromNFSSubdir)
	if err != nil {
		t.Fatalf("Apply() again: %v", err)
	}
	for _, v := range again.Volumes {
		if v.Record != nil {
			t.Errorf("a second plan records %v on %s, want nothing", v.Record, v.PV.Name)
		}
	}
	if diff := cmp.Diff(want, fates(ctx, t, kube)); diff != "" {
		t.Errorf("recorded on the volumes after a second run (-want +got):\n%s", diff)
	}
}

// TestApplyLocalPath: applied, the plan records on each old volume Delete,
// leave to release its unmarked directory, and its node: the one
// local-path recorded, over a hostname label that differs or another
// label's pin, else the one its affinity names.
func TestApplyLocalPath(t *testing.T) {
	ctx := t.Context()
	kube := kubefake.NewClientset(localPathCluster().objects()...)
	provfleet := provfleetfake.NewSimpleClientset()
	if _, err := makeAndApply(ctx, kube, provfleet, FromLocalPath); err != nil {
		t.Fatalf("Apply() error = %v", err)
	}
	onNode := func(node string) map[string]string {
		return map[string]string{"provfleet.io/on-delete": "Delete", "provfleet.io/delete-unmarked": "true", "hostpath.provfleet.io/node": node}
	}
	want := map[string]map[string]string{
		"pvc-a": onNode("node-1"),
		"pvc-b": onNode("big-1"),
		"pvc-c": onNode("big-2"),
		"pvc-d": onNode("node-1"),
		"pvc-e": onNode("node-2"),
		"pvc-f": onNode("big-2"),
	}
	if diff := cmp.Diff(want, fates(ctx, t, kube)); diff != "" {
		t.Errorf("recorded on the volumes (-want +got):\n%s", diff)
	}
	config, err := provfleet.ProvfleetV1alpha1().ProvisionerConfigs().Get(ctx, "local-path-provisioner", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ProvisionerConfig: %v", err)
	}
	wantBackend := &v1alpha1.HostPathBackend{
		Path:       "/opt/local-path-provisioner",
		VolumeType: v1alpha1.HostPathVolumeHostPath,
		NodePaths: []v1alpha1.NodePath{
			{Nodes: []string{"big-1"}, Path: "/data/local-path"},
			{Nodes: []string{"big-2"}, Path: "/data/local-path", AdditionalPaths: []v1alpha1.AbsolutePath{"/data/more"}},
		},
		PathPattern:       "{{.PVName}}_{{.PVC.Namespace}}_{{.PVC.Name}}",
		OnDelete:          v1alpha1.OnDeleteDelete,
		LocalPathPatterns: []v1alpha1.LocalPathPattern{v1alpha1.LocalPathPatternOwner, v1alpha1.LocalPathPatternMode},
	}
	if diff := cmp.Diff(wantBackend, config.Spec.Backend.HostPath); diff != "" {
		t.Errorf("hostPath backend (-want +got):\n%s", diff)
	}
}

// TestApplyRefused: a plan whose old provisioner still runs, that refuses
// something, or whose ProvisionerConfig's name is taken by one that
// answers to another provisioner, changes nothing.
func TestApplyRefused(t *testing.T) {
	tests := map[string]struct {
		change   func(c *cluster)
		existing *v1alpha1.ProvisionerConfig
		wantErr  string
	}{
		"still runs": {
			change:  func(c *cluster) { c.deployment.Spec.Replicas = ptr.To[int32](1) },
			wantErr: "scale it to zero",
		},
		"a refusal": {
			change:  func(c *cluster) { c.classes["nfs-client"].Parameters = map[string]string{"archiveOnDelete": "perhaps"} },
			wantErr: "1 refusals",
		},
		"a ProvisionerConfig of that name serves another": {
			change: func(*cluster) {},
			existing: &v1alpha1.ProvisionerConfig{
				ObjectMeta: metav1.ObjectMeta{Name: "nfs-client-provisioner"},
				Spec:       v1alpha1.ProvisionerConfigSpec{ProvisionerName: "example.com/else"},
			},
			wantErr: "--name",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			c := nfsSubdirCluster()
			tc.change(c)
			kube := kubefake.NewClientset(c.objects()...)
			provfleet := provfleetfake.NewSimpleClientset()
			if tc.existing != nil {
				provfleet = provfleetfake.NewSimpleClientset(tc.existing)
			}
			before := fates(ctx, t, kube)
			_, err := makeAndApply(ctx, kube, provfleet, FromNFSSubdir)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Apply() error = %v, want one naming %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(before, fates(ctx, t, kube)); diff != "" {
				t.Errorf("a refused plan changed the volumes (-before +after):\n%s", diff)
			}
			list, err := provfleet.ProvfleetV1alpha1().ProvisionerConfigs().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantItems := 0
			if tc.existing != nil {
				wantItems = 1
			}
			if len(list.Items) != wantItems {
				t.Errorf("a refused plan left %d ProvisionerConfigs, want %d", len(list.Items), wantItems)
			}
		})
	}
}
