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
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// A stuck instance is reported in its status and by Manager.Stuck; once it
// is stopped for a restart, its replacement starts only after the old
// instance's Lease expired, and Manager.Stuck reports the old instance until
// its hung work ended.
func TestManagerReportsAStuckInstanceAndDelaysItsReplacement(t *testing.T) {
	const leaseDuration = 4 * time.Second
	f := newFixture(t)
	f.mu.Lock()
	f.restartOn = func(old, new provisioning.Config) bool { return old.Workers != new.Workers }
	f.mu.Unlock()
	pc := f.hostPath("a", "x.io/a", 1)
	pc.Spec.LeaderElection = v1alpha1.LeaderElectionSpec{
		LeaseDuration: &metav1.Duration{Duration: leaseDuration},
		RenewDeadline: &metav1.Duration{Duration: time.Second},
		RetryPeriod:   &metav1.Duration{Duration: 100 * time.Millisecond},
	}
	f.create(pc)
	f.eventually("a is Running", func() bool { return f.readyReason("a", 1) == v1alpha1.ReasonRunning })
	if err := f.manager.Stuck(); err != nil {
		t.Errorf("Stuck() before any hung call = %v", err)
	}

	old := f.started("x.io/a")[0]
	old.setStuck(errors.New("1 backend call(s) running past their deadline"))
	f.eventually("a is BackendStuck", func() bool { return f.readyReason("a", 1) == v1alpha1.ReasonBackendStuck })
	if err := f.manager.Stuck(); err == nil || !strings.Contains(err.Error(), "ProvisionerConfig a") {
		t.Errorf("Stuck() = %v, want an error naming ProvisionerConfig a", err)
	}

	f.edit("a", func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Workers = 9 })
	f.eventually("a reports its stuck predecessor", func() bool { return f.readyReason("a", 2) == v1alpha1.ReasonBackendStuck })
	if !isStopped(old) {
		t.Errorf("the stuck instance was not stopped")
	}
	if n := len(f.started("x.io/a")); n != 1 {
		t.Errorf("%d instances started before the old Lease expired, want 1", n)
	}
	f.eventually("the replacement runs", func() bool { return f.readyReason("a", 2) == v1alpha1.ReasonRunning })
	if n := len(f.started("x.io/a")); n != 2 {
		t.Errorf("%d instances started, want 2", n)
	}
	if err := f.manager.Stuck(); err == nil || !strings.Contains(err.Error(), "stopped instance of ProvisionerConfig a") {
		t.Errorf("Stuck() while the stopped instance's call hangs = %v, want an error naming it", err)
	}
	old.setStuck(nil)
	if err := f.manager.Stuck(); err != nil {
		t.Errorf("Stuck() once the hung call returned = %v", err)
	}
}
