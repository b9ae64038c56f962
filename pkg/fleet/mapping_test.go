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
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

func duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func TestProvisioningConfig(t *testing.T) {
	lease := instanceSettings{leaseEnabled: true, namespace: "provfleet-system", identity: "replica-1", legacyLockNamespace: "kube-system"}
	withLease := func(cfg provisioning.Config) provisioning.Config {
		cfg.LeaderElection.Namespace, cfg.LeaderElection.Identity = lease.namespace, lease.identity
		cfg.LeaderElection.LegacyLockNamespace = lease.legacyLockNamespace
		return cfg
	}
	probing := lease
	probing.probeInterval = time.Second
	tests := map[string]struct {
		spec    v1alpha1.ProvisionerConfigSpec
		lease   instanceSettings
		want    provisioning.Config
		wantErr bool
	}{
		"empty fields keep the defaults": {
			spec:  v1alpha1.ProvisionerConfigSpec{ProvisionerName: "provfleet.io/a"},
			lease: lease,
			want:  withLease(provisioning.DefaultConfig("provfleet.io/a")),
		},
		"every field is mapped": {
			spec: v1alpha1.ProvisionerConfigSpec{
				ProvisionerName:            "provfleet.io/a",
				AdditionalProvisionerNames: []v1alpha1.ProvisionerName{"example.com/old"},
				Paused:                     true,
				Workers:                    9,
				ResyncPeriod:               duration(time.Minute),
				Finalizer:                  ptr.To(false),
				Retry: v1alpha1.RetrySpec{
					ProvisionFailureThreshold: ptr.To[int32](0),
					DeleteFailureThreshold:    ptr.To[int32](3),
					ExponentialBackoff:        ptr.To(false),
					InitialDelay:              duration(time.Second),
					MaxDelay:                  duration(time.Minute),
					QPS:                       7,
					Burst:                     8,
				},
				VolumeSave: v1alpha1.VolumeSaveSpec{Mode: v1alpha1.VolumeSaveRetryForever, Retries: 2, Interval: duration(time.Second)},
				Timeouts:   v1alpha1.TimeoutsSpec{Provision: duration(3 * time.Second), Delete: duration(4 * time.Second), Drain: duration(5 * time.Second)},
				LeaderElection: v1alpha1.LeaderElectionSpec{
					LeaseDuration: duration(30 * time.Second),
					RenewDeadline: duration(20 * time.Second),
					RetryPeriod:   duration(5 * time.Second),
				},
			},
			lease: probing,
			want: provisioning.Config{
				ProvisionerName:            "provfleet.io/a",
				AdditionalProvisionerNames: []string{"example.com/old"},
				Paused:                     true,
				Workers:                    9,
				ResyncPeriod:               time.Minute,
				Finalizer:                  false,
				Retry: provisioning.RetryConfig{
					ProvisionFailureThreshold: 0,
					DeleteFailureThreshold:    3,
					ExponentialBackoff:        false,
					InitialDelay:              time.Second,
					MaxDelay:                  time.Minute,
					QPS:                       7,
					Burst:                     8,
				},
				VolumeSave: provisioning.VolumeSaveConfig{Mode: provisioning.VolumeSaveRetryForever, Retries: 2, Interval: time.Second},
				Timeouts:   provisioning.TimeoutConfig{Provision: 3 * time.Second, Delete: 4 * time.Second, Drain: 5 * time.Second},
				LeaderElection: provisioning.LeaderElectionConfig{
					Enabled: true, Namespace: "provfleet-system", Identity: "replica-1",
					LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 5 * time.Second,
					LegacyLockNamespace: "kube-system",
				},
				ProbeInterval: time.Second,
			},
		},
		"leader election off": {
			spec: v1alpha1.ProvisionerConfigSpec{ProvisionerName: "provfleet.io/a"},
			want: func() provisioning.Config {
				cfg := provisioning.DefaultConfig("provfleet.io/a")
				cfg.LeaderElection.Enabled = false
				return cfg
			}(),
		},
		"renewDeadline not below leaseDuration": {
			spec: v1alpha1.ProvisionerConfigSpec{
				ProvisionerName: "provfleet.io/a",
				LeaderElection:  v1alpha1.LeaderElectionSpec{LeaseDuration: duration(10 * time.Second)},
			},
			lease:   lease,
			wantErr: true,
		},
		"maxDelay below initialDelay": {
			spec: v1alpha1.ProvisionerConfigSpec{
				ProvisionerName: "provfleet.io/a",
				Retry:           v1alpha1.RetrySpec{InitialDelay: duration(time.Minute), MaxDelay: duration(time.Second)},
			},
			lease:   lease,
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := provisioningConfig(&tc.spec, tc.lease)
			if (err != nil) != tc.wantErr {
				t.Fatalf("provisioningConfig() error = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("provisioningConfig() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOlderHolder(t *testing.T) {
	at := func(sec int64) metav1.Time { return metav1.Unix(sec, 0) }
	pcfg := func(name string, created metav1.Time, names ...v1alpha1.ProvisionerName) *v1alpha1.ProvisionerConfig {
		pc := &v1alpha1.ProvisionerConfig{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created}}
		pc.Spec.ProvisionerName = names[0]
		pc.Spec.AdditionalProvisionerNames = names[1:]
		return pc
	}
	tests := map[string]struct {
		pc         *v1alpha1.ProvisionerConfig
		others     []*v1alpha1.ProvisionerConfig
		wantHolder string
		wantName   string
	}{
		"alone": {
			pc: pcfg("a", at(1), "x.io/a"),
		},
		"different names": {
			pc:     pcfg("b", at(2), "x.io/b"),
			others: []*v1alpha1.ProvisionerConfig{pcfg("a", at(1), "x.io/a")},
		},
		"the older keeps the name": {
			pc:     pcfg("old", at(1), "x.io/a"),
			others: []*v1alpha1.ProvisionerConfig{pcfg("new", at(2), "x.io/a")},
		},
		"the newer conflicts": {
			pc:         pcfg("new", at(2), "x.io/a"),
			others:     []*v1alpha1.ProvisionerConfig{pcfg("old", at(1), "x.io/a")},
			wantHolder: "old", wantName: "x.io/a",
		},
		"same creation time: the first name wins": {
			pc:         pcfg("b", at(1), "x.io/a"),
			others:     []*v1alpha1.ProvisionerConfig{pcfg("a", at(1), "x.io/a")},
			wantHolder: "a", wantName: "x.io/a",
		},
		"additional names count, with their case": {
			pc:         pcfg("new", at(5), "x.io/new", "x.io/Legacy"),
			others:     []*v1alpha1.ProvisionerConfig{pcfg("old", at(1), "x.io/old", "x.io/legacy", "x.io/Legacy")},
			wantHolder: "old", wantName: "x.io/Legacy",
		},
		"names that differ by case are different names": {
			pc:     pcfg("new", at(5), "X.io/a", "x.io/Legacy"),
			others: []*v1alpha1.ProvisionerConfig{pcfg("old", at(1), "x.io/a", "x.io/legacy")},
		},
		"the oldest of several is named": {
			pc: pcfg("c", at(3), "x.io/a"),
			others: []*v1alpha1.ProvisionerConfig{
				pcfg("b", at(2), "x.io/a"), pcfg("a", at(1), "x.io/a"), pcfg("d", at(4), "x.io/a"),
			},
			wantHolder: "a", wantName: "x.io/a",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			holder, shared := olderHolder(tc.pc, append(tc.others, tc.pc), sharedName)
			got, want := "", ""
			if holder != nil {
				got = holder.Name
			}
			if tc.wantName != "" {
				want = fmt.Sprintf("provisioner name %q", tc.wantName)
			}
			if got != tc.wantHolder || shared != want {
				t.Errorf("olderHolder() = %q, %q; want %q, %q", got, shared, tc.wantHolder, want)
			}
		})
	}
}
