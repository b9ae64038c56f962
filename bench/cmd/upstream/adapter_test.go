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

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/hostpath"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// fakeBackend records what it was asked and answers with state and err.
type fakeBackend struct {
	got   provisioning.ProvisionOptions
	state provisioning.ProvisioningState
	err   error
}

func (f *fakeBackend) Provision(_ context.Context, o provisioning.ProvisionOptions) (*corev1.PersistentVolume, provisioning.ProvisioningState, error) {
	f.got = o
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: o.PVName}}, f.state, f.err
}

func (f *fakeBackend) Delete(context.Context, *corev1.PersistentVolume) error { return f.err }

func TestAdapterTranslates(t *testing.T) {
	ignored := &provisioning.IgnoredError{Reason: "not mine"}
	plain := errors.New("disk full")
	tests := map[string]struct {
		state       provisioning.ProvisioningState
		err         error
		node        string
		wantState   controller.ProvisioningState
		wantIgnored bool
		wantErr     error
		wantNode    string
	}{
		"finished":          {state: provisioning.ProvisioningFinished, wantState: controller.ProvisioningFinished},
		"in background":     {state: provisioning.ProvisioningInBackground, err: plain, wantState: controller.ProvisioningInBackground, wantErr: plain},
		"no change":         {state: provisioning.ProvisioningNoChange, wantState: controller.ProvisioningNoChange},
		"reschedule":        {state: provisioning.ProvisioningReschedule, node: "n1", wantState: controller.ProvisioningReschedule, wantNode: "n1"},
		"ignored is mapped": {state: provisioning.ProvisioningFinished, err: ignored, wantState: controller.ProvisioningFinished, wantIgnored: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := &fakeBackend{state: tc.state, err: tc.err}
			pv, state, err := adapter{fake}.Provision(context.Background(), controller.ProvisionOptions{PVName: "pvc-1", SelectedNodeName: tc.node})
			if diff := cmp.Diff(tc.wantState, state); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
			var upstreamIgnored *controller.IgnoredError
			if got := errors.As(err, &upstreamIgnored); got != tc.wantIgnored {
				t.Errorf("error %v is the library's IgnoredError: %v, want %v", err, got, tc.wantIgnored)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if pv.Name != "pvc-1" || fake.got.PVName != "pvc-1" {
				t.Errorf("PV name %q, backend asked for %q, want pvc-1", pv.Name, fake.got.PVName)
			}
			gotNode := ""
			if fake.got.SelectedNode != nil {
				gotNode = fake.got.SelectedNode.Name
			}
			if gotNode != tc.wantNode {
				t.Errorf("selected node %q, want %q", gotNode, tc.wantNode)
			}
			deleteErr := adapter{fake}.Delete(context.Background(), pv)
			if got := errors.As(deleteErr, &upstreamIgnored); got != tc.wantIgnored {
				t.Errorf("delete error %v is the library's IgnoredError: %v, want %v", deleteErr, got, tc.wantIgnored)
			}
		})
	}
}

func TestAdapterDrivesTheHostPathBackend(t *testing.T) {
	root := t.TempDir()
	// The backend the peer builds without --node-name.
	dirs, err := hostpath.New(backendConfig(options{path: filepath.Join(root, "peer"), hostPathRoot: root}),
		hostpath.Options{ProvisionerNames: []string{"bench.provfleet.io/peer"}})
	if err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u1"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "peer"}, ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete)}
	a := adapter{dirs}
	pv, state, err := a.Provision(context.Background(), controller.ProvisionOptions{StorageClass: class, PVName: "pvc-u1", PVC: claim})
	if err != nil || state != controller.ProvisioningFinished {
		t.Fatalf("provision: state %q, error %v", state, err)
	}
	if pv.Spec.HostPath == nil {
		t.Fatalf("PV %+v has no hostPath source", pv.Spec)
	}
	if _, err := os.Stat(pv.Spec.HostPath.Path); err != nil {
		t.Fatalf("the volume directory is missing: %v", err)
	}
	if err := a.Delete(context.Background(), pv); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := os.Stat(pv.Spec.HostPath.Path); !os.IsNotExist(err) {
		t.Errorf("the volume directory is still there after Delete: %v", err)
	}
}

// TestNodeAdapterKeepsToItsNode proves that a per-node process qualifies
// only the claims placed on its node and leaves other nodes' volumes alone.
func TestNodeAdapterKeepsToItsNode(t *testing.T) {
	a := nodeAdapter{adapter: adapter{&fakeBackend{}}, node: "node-1"}
	tests := map[string]struct {
		selected, volumeNode string
		wantProvision        bool
		wantIgnored          bool
	}{
		"its node":       {selected: "node-1", volumeNode: "node-1", wantProvision: true},
		"another node":   {selected: "node-2", volumeNode: "node-2", wantIgnored: true},
		"not placed yet": {volumeNode: "", wantIgnored: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
			if tc.selected != "" {
				claim.Annotations[annSelectedNode] = tc.selected
			}
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{backend.AnnNode: tc.volumeNode}}}
			var ignored *controller.IgnoredError
			got := struct{ Provision, Ignored bool }{
				a.ShouldProvision(context.Background(), claim),
				errors.As(a.Delete(context.Background(), pv), &ignored),
			}
			want := struct{ Provision, Ignored bool }{tc.wantProvision, tc.wantIgnored}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
