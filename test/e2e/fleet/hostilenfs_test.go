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
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
)

// One provisioner's NFS server sending the worst replies hurts that
// provisioner only: the manager running it, beside a hostPath provisioner
// and one of a well-behaved NFS server, keeps provisioning their claims
// while the hostile server is called again and again, its own claim stays
// Pending, and the manager's peak resident memory stays far below what one
// allocation of an announced length would take.
func TestHostileNFSServerHurtsOnlyItsProvisioner(t *testing.T) {
	f := newFixture(t)
	p := f.startManager("hostilenfs", "--backend-probe-interval=1s")
	upstream := f.serveNFS(nfsserver.Options{})
	var worst nfsserver.WorstReplies
	hostile, err := nfsserver.StartHostile(f.ctx, nfsserver.HostileOptions{Upstream: upstream.server.Addr(), Answer: worst.Answer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := hostile.Stop(); err != nil {
			t.Error(err)
		}
	})
	hostileName := f.prefix + "-hostile"
	f.provisioner(hostileName, func(pc *v1alpha1.ProvisionerConfig) {
		pc.Spec.Backend = v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{
			Server: nfsAddress, Port: int32(hostile.Port()), Path: exportPath, //nolint:gosec // a TCP port
		}}
	})
	f.claim("hostile", hostileName)
	f.eventually("every attack sent", func(context.Context) (bool, error) {
		return worst.Rounds() >= 1, nil
	})

	healthyName := f.prefix + "-healthy"
	f.nfsProvisioner(healthyName, f.serveNFS(nfsserver.Options{}))
	localName := f.prefix + "-local"
	f.provisioner(localName)
	// Rounds of claims, each bound while the hostile server is still called.
	for round := range 3 {
		var claims []string
		for _, class := range []string{healthyName, localName} {
			name := fmt.Sprintf("%s-%d", strings.TrimPrefix(class, f.prefix+"-"), round)
			f.claim(name, class)
			claims = append(claims, name)
		}
		f.waitBound(claims...)
	}
	f.waitEvent(f.namespace, "hostile", corev1.EventTypeWarning, "ProvisioningFailed")
	c, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Get(f.ctx, "hostile", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status.Phase != corev1.ClaimPending {
		t.Errorf("the hostile server's claim is %s, want Pending", c.Status.Phase)
	}
	if exited, err := p.Exited(); exited {
		t.Fatalf("the manager exited: %v", err)
	}
	// Far above what the manager needs, far below one 4 GiB allocation.
	const peakBound = 512 << 20
	peak := peakResident(t, p.Pid())
	t.Logf("the manager's peak resident memory: %d MiB, after %d rounds of the worst replies", peak>>20, worst.Rounds())
	if peak > peakBound {
		t.Errorf("the manager's peak resident memory is %d MiB, more than %d MiB", peak>>20, peakBound>>20)
	}
}

// peakResident is the peak resident memory of process pid (VmHWM).
func peakResident(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = status.Close() }()
	lines := bufio.NewScanner(status)
	for lines.Scan() {
		if value, ok := strings.CutPrefix(lines.Text(), "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib << 10
		}
	}
	t.Fatalf("no VmHWM in the status of process %d", pid)
	return 0
}
