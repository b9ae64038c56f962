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
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// TestManagerCachesOnlyWhatItServes: a manager next to the claims and
// PersistentVolumes of another provisioner does not cache them; a claim
// made before its ProvisionerConfig exists is fetched and provisioned once
// it does; and a PersistentVolume of no provisioner inside a served base,
// cached although the fleet did not make it, still keeps a new volume out
// of its directory.
func TestManagerCachesOnlyWhatItServes(t *testing.T) {
	f := newFixture(t)
	other := f.prefix + "-other"
	f.class(other, "example.com/"+other, nil)
	for i := range 3 {
		f.claim(fmt.Sprintf("other-%d", i), other)
		f.staticPV(fmt.Sprintf("%s-%d", other, i), "example.com/"+other, filepath.Join("/srv", other, strconv.Itoa(i)))
	}
	late := f.prefix + "-late"
	f.class(late, "e2e.provfleet.io/"+late, nil)
	f.claim("early", late)
	f.eventually("the binder hands claim early to its provisioner", func(ctx context.Context) (bool, error) {
		claim, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Get(ctx, "early", metav1.GetOptions{})
		return err == nil && provisioning.StorageProvisioner(claim) != "", nil
	})

	p := f.startManager("cachescope")
	served := f.provisioner(f.prefix+"-served", func(pc *v1alpha1.ProvisionerConfig) {
		pc.Spec.Backend.HostPath.PathPattern = "{{.PVC.Namespace}}/{{.PVC.Name}}"
	})
	f.waitReady(served.Name, 1, v1alpha1.ReasonRunning)
	f.claim("served", served.Name)
	f.waitBound("served")
	f.waitCached(p, 1, 1)

	f.provisioner(late)
	f.waitBound("early")
	f.waitCached(p, 2, 2)

	base := string(served.Spec.Backend.HostPath.Path)
	f.staticPV(f.prefix+"-static", "", filepath.Join(base, f.namespace, "blocked"))
	f.claim("blocked", served.Name)
	f.waitEvent(f.namespace, "blocked", corev1.EventTypeWarning, provisioning.EventProvisioningFailed, "the directory of another volume")
	f.waitCached(p, 3, 3)
}

// staticPV creates a hostPath PersistentVolume at dir that no claim binds
// (its class does not exist), made by provisioner ("": by none), and
// deletes it when the test ends.
func (f *fixture) staticPV(name, provisioner, dir string) {
	f.t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              f.prefix + "-no-such-class",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		},
	}
	if provisioner != "" {
		pv.Annotations = map[string]string{provisioning.AnnDynamicallyProvisioned: provisioner}
	}
	if _, err := f.kube.CoreV1().PersistentVolumes().Create(f.ctx, pv, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("cannot create PersistentVolume %s: %v", name, err)
	}
	f.t.Cleanup(func() {
		_ = f.kube.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// waitCached waits until the manager p caches claims claims and volumes
// PersistentVolumes (provfleet_cached_objects),
// and fails the test with what it caches if it does not soon.
func (f *fixture) waitCached(p *managerproc.Process, claims, volumes int) {
	f.t.Helper()
	want := map[string]int{"persistentvolumeclaims": claims, "persistentvolumes": volumes}
	f.eventually(fmt.Sprintf("the manager caches %v", want), func(ctx context.Context) (bool, error) {
		text, err := p.Metrics(ctx)
		if err != nil {
			return false, err
		}
		if diff := cmp.Diff(want, cachedObjects(text)); diff != "" {
			return false, fmt.Errorf("cached objects (-want +got):\n%s", diff)
		}
		return true, nil
	})
}

// cachedObjects reads the series of provfleet_cached_objects of claims and
// volumes in a scrape; classes are cached whole.
func cachedObjects(text string) map[string]int {
	counts := map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		series, value, ok := strings.Cut(line, " ")
		resource, found := strings.CutPrefix(series, `provfleet_cached_objects{resource="`)
		if !ok || !found {
			continue
		}
		if n, err := strconv.ParseFloat(value, 64); err == nil && !strings.HasPrefix(resource, "storageclasses") {
			counts[strings.TrimSuffix(resource, `"}`)] = int(n)
		}
	}
	return counts
}
