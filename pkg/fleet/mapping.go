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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// instanceSettings are the manager-wide parts of every instance's Config:
// its leader election and the interval of its backend's probes (zero: the
// default).
type instanceSettings struct {
	leaseEnabled        bool
	namespace           string
	identity            string
	legacyLockNamespace string
	probeInterval       time.Duration
}

// provisioningConfig maps the spec of a ProvisionerConfig to the Config of its
// instance. Fields left empty (objects that bypassed the CRD defaults) keep
// provisioning.DefaultConfig's values. The result is validated.
func provisioningConfig(spec *v1alpha1.ProvisionerConfigSpec, settings instanceSettings) (provisioning.Config, error) {
	cfg := provisioning.DefaultConfig(string(spec.ProvisionerName))
	for _, name := range spec.AdditionalProvisionerNames {
		cfg.AdditionalProvisionerNames = append(cfg.AdditionalProvisionerNames, string(name))
	}
	cfg.Paused = spec.Paused
	setInt(&cfg.Workers, spec.Workers)
	setDuration(&cfg.ResyncPeriod, spec.ResyncPeriod)
	setBool(&cfg.Finalizer, spec.Finalizer)

	retry := &cfg.Retry
	if spec.Retry.ProvisionFailureThreshold != nil {
		retry.ProvisionFailureThreshold = int(*spec.Retry.ProvisionFailureThreshold)
	}
	if spec.Retry.DeleteFailureThreshold != nil {
		retry.DeleteFailureThreshold = int(*spec.Retry.DeleteFailureThreshold)
	}
	setBool(&retry.ExponentialBackoff, spec.Retry.ExponentialBackoff)
	setDuration(&retry.InitialDelay, spec.Retry.InitialDelay)
	setDuration(&retry.MaxDelay, spec.Retry.MaxDelay)
	if spec.Retry.QPS != 0 {
		retry.QPS = float64(spec.Retry.QPS)
	}
	setInt(&retry.Burst, spec.Retry.Burst)

	if spec.VolumeSave.Mode != "" {
		cfg.VolumeSave.Mode = provisioning.VolumeSaveMode(spec.VolumeSave.Mode)
	}
	setInt(&cfg.VolumeSave.Retries, spec.VolumeSave.Retries)
	setDuration(&cfg.VolumeSave.Interval, spec.VolumeSave.Interval)

	setDuration(&cfg.Timeouts.Provision, spec.Timeouts.Provision)
	setDuration(&cfg.Timeouts.Delete, spec.Timeouts.Delete)
	setDuration(&cfg.Timeouts.Drain, spec.Timeouts.Drain)

	le := &cfg.LeaderElection
	le.Enabled = settings.leaseEnabled
	le.Namespace = settings.namespace
	le.Identity = settings.identity
	le.LegacyLockNamespace = settings.legacyLockNamespace
	setDuration(&le.LeaseDuration, spec.LeaderElection.LeaseDuration)
	setDuration(&le.RenewDeadline, spec.LeaderElection.RenewDeadline)
	setDuration(&le.RetryPeriod, spec.LeaderElection.RetryPeriod)
	if settings.probeInterval != 0 {
		cfg.ProbeInterval = settings.probeInterval
	}

	if err := cfg.Validate(); err != nil {
		return provisioning.Config{}, fmt.Errorf("cannot use spec: %w", err)
	}
	return cfg, nil
}

func setInt(dst *int, v int32) {
	if v != 0 {
		*dst = int(v)
	}
}

func setBool(dst *bool, v *bool) {
	if v != nil {
		*dst = *v
	}
}

func setDuration(dst *time.Duration, v *metav1.Duration) {
	if v != nil {
		*dst = v.Duration
	}
}
