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
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// One hung NFS server holds up its own provisioners only: applied first, with
// more provisioners than the manager has reconcile workers and claims waiting
// on each, it does not keep a provisioner of a healthy server from starting
// and binding its claims; its own provisioners turn BackendUnavailable and
// their claims stay Pending.
func TestHungNFSServerHoldsUpOnlyItsProvisioners(t *testing.T) {
	f := newFixture(t)
	f.startManager("hungnfs", "--backend-probe-interval=1s")
	hung, err := nfsserver.StartSilent(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := hung.Stop(); err != nil {
			t.Error(err)
		}
	})
	// More than the manager's four reconcile workers.
	const hungProvisioners = 5
	var hungClaims []string
	for i := range hungProvisioners {
		name := f.prefix + "-hung-" + string(rune('a'+i))
		f.provisioner(name, func(pc *v1alpha1.ProvisionerConfig) {
			pc.Spec.Backend = v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{
				Server: hung.Host(), Port: int32(hung.Port()), Path: v1alpha1.AbsolutePath("/export/" + name), //nolint:gosec // a TCP port
			}}
		})
		claim := "hung-" + string(rune('a'+i))
		f.claim(claim, name)
		hungClaims = append(hungClaims, claim)
	}

	dir := filepath.Join(f.root, "healthy-export")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	healthy, err := nfsserver.Start(f.ctx, nfsserver.Options{Dir: dir, Path: "/export"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := healthy.Stop(); err != nil {
			t.Error(err)
		}
	})
	healthyName := f.prefix + "-healthy"
	f.provisioner(healthyName, func(pc *v1alpha1.ProvisionerConfig) {
		pc.Spec.Backend = v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{
			Server: "127.0.0.1", Port: int32(healthy.Port()), Path: "/export", //nolint:gosec // a TCP port
		}}
	})
	f.claim("healthy", healthyName)
	f.waitBound("healthy")
	pv := f.boundVolume("healthy")
	if info, err := os.Stat(filepath.Join(dir, pv.Name)); err != nil || !info.IsDir() {
		t.Errorf("no directory on the healthy export for %s: %v", pv.Name, err)
	}

	for i := range hungProvisioners {
		name := f.prefix + "-hung-" + string(rune('a'+i))
		pc := f.waitReady(name, 1, v1alpha1.ReasonBackendUnavailable)
		if c := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, hung.Host()) {
			t.Errorf("%s: Ready message %q does not name the server", name, c.Message)
		}
	}
	for _, claim := range hungClaims {
		c, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Get(f.ctx, claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Status.Phase != corev1.ClaimPending {
			t.Errorf("claim %s of the hung server is %s, want Pending", claim, c.Status.Phase)
		}
	}
	f.waitEvent(f.namespace, hungClaims[0], corev1.EventTypeWarning, provisioning.EventProvisioningFailed)
}
