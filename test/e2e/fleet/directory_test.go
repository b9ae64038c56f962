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

package fleet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// The mode of a volume directory through the manager: the ProvisionerConfig's
// for a claim of a class without parameters, the class's parameter for a
// claim of a class that sets one, and a ProvisioningFailed Event for a class
// whose mode does not parse.
func TestDirectoryModeOfSpecAndClass(t *testing.T) {
	f := newFixture(t)
	f.startManager("directory")
	pcName := f.prefix + "-directory"
	base := filepath.Join(f.root, pcName)
	pc := f.provisioner(pcName, func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Backend.HostPath.Mode = "0700" })
	f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
	f.class(pcName+"-0750", string(pc.Spec.ProvisionerName), map[string]string{"mode": "0750"})
	f.class(pcName+"-bad", string(pc.Spec.ProvisionerName), map[string]string{"mode": "u=rwx"})

	f.claim("spec-mode", pcName)
	f.claim("class-mode", pcName+"-0750")
	f.claim("bad-mode", pcName+"-bad")
	f.waitBound("spec-mode", "class-mode")

	got := map[string]string{}
	for _, claim := range []string{"spec-mode", "class-mode"} {
		pv := f.boundVolume(claim)
		info, err := os.Stat(filepath.Join(base, pv.Name))
		if err != nil {
			t.Fatalf("no directory for claim %s: %v", claim, err)
		}
		got[claim] = info.Mode().Perm().String()
	}
	want := map[string]string{"spec-mode": "-rwx------", "class-mode": "-rwxr-x---"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("modes of the volume directories (-want +got):\n%s", diff)
	}

	f.eventually("a ProvisioningFailed Event for the bad mode", func(ctx context.Context) (bool, error) {
		events, err := f.kube.CoreV1().Events(f.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "bad-mode" && e.Reason == "ProvisioningFailed" &&
				strings.Contains(e.Message, `parameter mode: mode "u=rwx" is not an octal mode`) {
				return true, nil
			}
		}
		return false, nil
	})
}

// class creates a StorageClass of provisioner with parameters, deleted when
// the test ends.
func (f *fixture) class(name, provisioner string, parameters map[string]string) {
	f.t.Helper()
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       provisioner,
		Parameters:        parameters,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if _, err := f.kube.StorageV1().StorageClasses().Create(f.ctx, class, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("cannot create StorageClass %s: %v", name, err)
	}
	f.t.Cleanup(func() {
		_ = f.kube.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}
