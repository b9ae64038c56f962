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

package provisioning

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fateBackend records the fate its volume's class names, and
// remembers what Delete was handed.
type fateBackend struct {
	*fakeBackend
	recordErr error
	// deletedWith are the annotations of the volume Delete was handed.
	deletedWith map[string]string
}

func (b *fateBackend) Record(_ context.Context, _ *corev1.PersistentVolume, class *storagev1.StorageClass) (map[string]string, error) {
	if class == nil {
		return nil, b.recordErr
	}
	return map[string]string{"example.com/fate": class.Parameters["fate"]}, b.recordErr
}

func (b *fateBackend) Delete(ctx context.Context, volume *corev1.PersistentVolume) error {
	b.deletedWith = volume.Annotations
	return b.fakeBackend.Delete(ctx, volume)
}

// TestRecordBeforeDelete: what a VolumeRecorder decides is written on the
// PersistentVolume before the backend is asked to delete it, from the
// volume's class as it is at that first sync.
func TestRecordBeforeDelete(t *testing.T) {
	tests := map[string]struct {
		class     *storagev1.StorageClass
		recordErr error
		want      map[string]string
	}{
		"recorded from its class": {
			class: &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Parameters: map[string]string{"fate": "keep"}},
			want:  map[string]string{AnnDynamicallyProvisioned: testProvisioner, "example.com/fate": "keep"},
		},
		"no class: nothing recorded": {
			want: map[string]string{AnnDynamicallyProvisioned: testProvisioner},
		},
		"an error: nothing recorded, the backend decides": {
			class:     &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}},
			recordErr: errBackend,
			want:      map[string]string{AnnDynamicallyProvisioned: testProvisioner},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			volume := newVolume("pv", testProvisioner, corev1.VolumeReleased, corev1.PersistentVolumeReclaimDelete)
			f := newFixture(t, volume)
			f.fill(volume)
			if tc.class != nil {
				f.fill(tc.class)
			}
			backend := &fateBackend{fakeBackend: newFakeBackend(), recordErr: tc.recordErr}
			cfg := testConfig(testProvisioner)
			cfg.Finalizer = false
			c := f.newController(cfg, backend, &testRecorder{})
			if _, err := c.syncVolume(context.Background(), "pv"); err != nil {
				t.Fatalf("syncVolume: %v", err)
			}
			if diff := cmp.Diff(tc.want, backend.deletedWith); diff != "" {
				t.Errorf("annotations of the volume Delete was handed (-want +got):\n%s", diff)
			}
		})
	}
}
