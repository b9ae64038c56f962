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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// TestOverlappingBaseRefusedUntilTheOlderGoes: of two hostPath bases where one
// contains the other, the later object is refused with a reason naming the
// older one, and runs once the older is deleted.
func TestOverlappingBaseRefusedUntilTheOlderGoes(t *testing.T) {
	f := newFixture(t)
	f.startManager("overlap")
	older := f.provisioner(f.prefix + "-outer")
	f.waitReady(older.Name, 1, v1alpha1.ReasonRunning)
	// creationTimestamp has a resolution of one second.
	time.Sleep(time.Second)
	newer := f.provisioner(f.prefix+"-inner", func(pc *v1alpha1.ProvisionerConfig) {
		pc.Spec.Backend.HostPath.Path = older.Spec.Backend.HostPath.Path + "/inner"
	})
	refused := f.waitReady(newer.Name, 1, v1alpha1.ReasonBackendOverlap)
	for _, c := range refused.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady && !strings.Contains(c.Message, older.Name) {
			t.Errorf("the refusal %q does not name the older object %s", c.Message, older.Name)
		}
	}
	f.eventually("a Warning Event on the newer object", func(ctx context.Context) (bool, error) {
		events, err := f.kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == newer.Name && e.Type == corev1.EventTypeWarning && e.Reason == v1alpha1.ReasonBackendOverlap {
				return true, nil
			}
		}
		return false, nil
	})

	f.deleteConfig(older.Name)
	f.waitReady(newer.Name, 1, v1alpha1.ReasonRunning)
	f.claim("after-takeover", newer.Name)
	f.waitBound("after-takeover")
}
