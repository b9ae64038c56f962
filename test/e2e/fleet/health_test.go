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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// A hostPath provisioner whose base directory goes away turns Ready=False,
// BackendUnavailable, with the error and a Warning Event, and keeps leading;
// a claim made meanwhile is retried past its failure threshold with
// ProvisioningFailed Events and not given up; once the directory is back,
// the provisioner turns Running and the claim binds, with no restart.
func TestBackendOutageAndRecovery(t *testing.T) {
	f := newFixture(t)
	manager := f.startManager("health", "--backend-probe-interval=1s")
	pcName := f.prefix + "-health"
	base := filepath.Join(f.root, pcName)
	pc := f.provisioner(pcName, func(pc *v1alpha1.ProvisionerConfig) {
		// Without the outage the claim would be given up after two tries.
		pc.Spec.Retry.ProvisionFailureThreshold = ptr.To[int32](1)
		pc.Spec.Retry.InitialDelay = &metav1.Duration{Duration: 100 * time.Millisecond}
	})
	f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
	f.eventually("status.storage", func(ctx context.Context) (bool, error) {
		st := f.config(pcName).Status.Storage
		return st != nil && st.Total.Sign() > 0 && st.Available.Cmp(st.Total) <= 0, nil
	})

	if err := os.Rename(base, base+".away"); err != nil {
		t.Fatal(err)
	}
	down := f.waitReady(pcName, 1, v1alpha1.ReasonBackendUnavailable)
	if c := meta.FindStatusCondition(down.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "no such file or directory") {
		t.Errorf("Ready message %q does not give the error of the missing directory", c.Message)
	}
	if c := meta.FindStatusCondition(down.Status.Conditions, v1alpha1.ConditionLeading); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Leading = %+v while the backend is unavailable, want True", c)
	}
	f.waitEvent(metav1.NamespaceDefault, pcName, corev1.EventTypeWarning, v1alpha1.ReasonBackendUnavailable)
	f.eventually("provisioner_backend_up 0", func(ctx context.Context) (bool, error) {
		metrics, err := manager.Metrics(ctx)
		return err == nil && strings.Contains(metrics, fmt.Sprintf("provisioner_backend_up{provisioner=%q} 0", pc.Spec.ProvisionerName)), nil
	})

	// Selected to the node, as the scheduler selects a WaitForFirstConsumer
	// claim: its agent retries it. The manager would place an Immediate claim
	// on no node while none is served.
	f.claimOn("waiting", pcName, "node-health")
	f.eventually("the claim retried past its threshold", func(ctx context.Context) (bool, error) {
		return f.eventCount(ctx, "waiting", "ProvisioningFailed") >= 4, nil
	})
	if claim, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Get(f.ctx, "waiting", metav1.GetOptions{}); err != nil || claim.Status.Phase != corev1.ClaimPending {
		t.Fatalf("claim during the outage: %v, %v; want it Pending", claim.Status.Phase, err)
	}

	if err := os.Rename(base+".away", base); err != nil {
		t.Fatal(err)
	}
	f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
	f.waitEvent(metav1.NamespaceDefault, pcName, corev1.EventTypeNormal, "BackendAvailable")
	f.waitBound("waiting")
	if _, err := os.Stat(filepath.Join(base, f.boundVolume("waiting").Name)); err != nil {
		t.Errorf("no directory for the claim: %v", err)
	}
	if exited, err := manager.Exited(); exited {
		t.Errorf("the manager exited: %v", err)
	}
}

// A claim larger than the free space status.storage reports is refused with
// a ProvisioningFailed Event saying so, and nothing is made for it.
func TestClaimLargerThanTheFreeSpace(t *testing.T) {
	f := newFixture(t)
	f.startManager("space")
	pcName := f.prefix + "-space"
	f.provisioner(pcName)
	f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
	var total resource.Quantity
	f.eventually("status.storage", func(ctx context.Context) (bool, error) {
		st := f.config(pcName).Status.Storage
		if st != nil {
			total = st.Total
		}
		return st != nil, nil
	})
	total.Add(resource.MustParse("1Gi"))
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "too-large", Namespace: f.namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(pcName),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: total}},
		},
	}
	if _, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Create(f.ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("a ProvisioningFailed Event about the free space", func(ctx context.Context) (bool, error) {
		events, err := f.kube.CoreV1().Events(f.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "too-large" && e.Reason == "ProvisioningFailed" && strings.Contains(e.Message, "not enough free space") {
				return true, nil
			}
		}
		return false, nil
	})
	entries, err := os.ReadDir(filepath.Join(f.root, pcName))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "pvc-") {
			t.Errorf("%s made for a claim that does not fit", e.Name())
		}
	}
}

// eventCount is how many times an Event of reason was recorded about the
// object name of the test's namespace, repeats included.
func (f *fixture) eventCount(ctx context.Context, name, reason string) int32 {
	events, err := f.kube.CoreV1().Events(f.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	var n int32
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			n += max(e.Count, 1)
		}
	}
	return n
}
