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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/hostpathnodes"
)

// TestMixedCaseProvisionerNameLeadsAndCountsItsVolumes: a provisioner name
// with upper case and "_" is valid for StorageClasses, so its Lease must be
// accepted too, and its saved volumes, annotated with the name as written,
// must count against its capacity.
func TestMixedCaseProvisionerNameLeadsAndCountsItsVolumes(t *testing.T) {
	f := newFixture(t)
	f.startManager("mixed")
	const provisionerName = "example.com/Fast_One"
	name := f.prefix + "-mixed"
	f.provisioner(name, func(pc *v1alpha1.ProvisionerConfig) {
		pc.Spec.ProvisionerName = provisionerName
		pc.Spec.Backend.HostPath.Capacity = &v1alpha1.CapacitySpec{MaxVolumes: 1}
		pc.Spec.Retry.InitialDelay = &metav1.Duration{Duration: time.Second}
		pc.Spec.Retry.MaxDelay = &metav1.Duration{Duration: 2 * time.Second}
	})
	f.waitReady(name, 1, v1alpha1.ReasonRunning)
	if holder := f.leaseHolder(provisionerName); holder != "mixed" {
		t.Errorf("the Lease of %s is held by %q, want mixed", provisionerName, holder)
	}
	f.claim("first", name)
	f.waitBound("first")

	f.claim("second", name)
	// Its only node has no room: the manager places it nowhere.
	f.eventually("the second claim refused for capacity", func(ctx context.Context) (bool, error) {
		if volumes := f.volumesOf(); len(volumes["second"]) != 0 {
			return false, fmt.Errorf("the second claim got a volume beyond maxVolumes 1: %v", volumes)
		}
		events, err := f.kube.CoreV1().Events(f.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "second" && e.Type == corev1.EventTypeWarning && e.Reason == hostpathnodes.EventNoNodeWithRoom {
				return true, nil
			}
		}
		return false, nil
	})
	if volumes := f.volumesOf(); len(volumes["second"]) != 0 {
		t.Fatalf("the second claim got a volume beyond maxVolumes 1: %v", volumes)
	}
	if err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Delete(f.ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitBound("second")
}
