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

package provisioning_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/hostpath"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// A claim the hostPath backend refuses for its capacity budget stays Pending
// and is retried past provisionFailureThreshold, each refusal a
// ProvisioningFailed Event saying so, and is provisioned once another claim
// is deleted and its volume with it.
func TestClaimRefusedForCapacityWaitsForRoom(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	hostPath, err := hostpath.New(hostpath.Config{
		Path:         filepath.Join(root, "vols"),
		VolumeType:   hostpath.VolumeTypeHostPath,
		NodeName:     "node-1",
		HostPathRoot: root,
		Capacity:     backend.Capacity{MaxVolumes: 1},
	}, hostpath.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	cfg.Retry.ProvisionFailureThreshold = 1
	f.start(cfg, hostPath)
	f.createClass(f.class, nil)
	first := f.createClaim("first", f.class, nil)
	f.waitBound(first.Name)

	second := f.createClaim("second", f.class, nil)
	// More refusals than the threshold of one retry allows failures.
	f.eventually("three refusals for capacity", func(context.Context) (bool, error) {
		var count int32
		for _, e := range ours(f.events(second, provisioning.EventProvisioningFailed)) {
			if !strings.Contains(e.Message, "capacity exhausted: 1 of 1 volumes in use") {
				t.Fatalf("ProvisioningFailed Event %q, want the backend's refusal for capacity", e.Message)
			}
			count += max(e.Count, 1)
		}
		return count >= 3, nil
	})
	if got := dirsIn(t, root); len(got) != 1 {
		t.Fatalf("volume directories %v beyond maxVolumes 1", got)
	}

	f.deleteClaim(first.Name)
	f.waitBound(second.Name)
	f.waitVolumeGone(volumeName(first))
}
