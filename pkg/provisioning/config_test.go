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
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidate(t *testing.T) {
	valid := func() Config {
		cfg := DefaultConfig("provfleet.io/fast")
		cfg.LeaderElection.Namespace = "kube-system"
		return cfg
	}
	tests := map[string]struct {
		change func(*Config)
		want   []string // the fields reported
	}{
		"defaults": {change: func(*Config) {}},
		"leader election off needs no namespace": {change: func(c *Config) {
			c.LeaderElection = LeaderElectionConfig{}
		}},
		"retry forever needs no retries": {change: func(c *Config) {
			c.VolumeSave = VolumeSaveConfig{Mode: VolumeSaveRetryForever, Interval: time.Second}
		}},
		"every problem at once": {
			change: func(c *Config) {
				c.ProvisionerName = ""
				c.AdditionalProvisionerNames = []string{"bad name!", "ok.io/x", "ok.io/x"}
				c.Workers = 0
				c.ResyncPeriod = -time.Second
				c.Retry = RetryConfig{ProvisionFailureThreshold: -1, DeleteFailureThreshold: -1, InitialDelay: 0, MaxDelay: -1, QPS: 0, Burst: 0}
				c.VolumeSave = VolumeSaveConfig{Mode: "Sometimes"}
				c.LeaderElection.Namespace = ""
				c.LeaderElection.RetryPeriod = 0
				c.LeaderElection.RenewDeadline = 0
			},
			want: []string{
				"provisionerName", "additionalProvisionerNames[0]", "additionalProvisionerNames[2]",
				"workers", "resyncPeriod",
				"retry.provisionFailureThreshold", "retry.deleteFailureThreshold", "retry.initialDelay",
				"retry.maxDelay", "retry.qps", "retry.burst",
				"volumeSave.mode", "volumeSave.interval",
				"leaderElection.namespace", "leaderElection.retryPeriod", "leaderElection.renewDeadline",
			},
		},
		"retry needs retries": {
			change: func(c *Config) { c.VolumeSave.Retries = 0 },
			want:   []string{"volumeSave.retries"},
		},
		"timeouts must be positive": {
			change: func(c *Config) { c.Timeouts = TimeoutConfig{Provision: -time.Second} },
			want:   []string{"timeouts.provision", "timeouts.delete", "timeouts.drain"},
		},
		"lease shorter than renewal": {
			change: func(c *Config) { c.LeaderElection.LeaseDuration = c.LeaderElection.RenewDeadline },
			want:   []string{"leaderElection.leaseDuration"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := valid()
			tc.change(&cfg)
			err := cfg.Validate()
			var got []string
			var agg utilerrors.Aggregate
			if errors.As(err, &agg) {
				for _, e := range agg.Errors() {
					got = append(got, fieldOf(e))
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reported fields (-want +got):\n%s\n%v", diff, err)
			}
		})
	}
}

func fieldOf(err error) string {
	var fe *field.Error
	if errors.As(err, &fe) {
		return fe.Field
	}
	return err.Error()
}

func TestNewMetricsOncePerRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("a second NewMetrics on one registry succeeded")
	}
}

// TestLeaseNameOfEveryValidProvisionerName: every provisioner name that
// passes validation has a Lease the apiserver accepts; names that already made
// one keep it, the upstream library's.
func TestLeaseNameOfEveryValidProvisionerName(t *testing.T) {
	longPrefix := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + "." + strings.Repeat("d", 60)
	tests := map[string]struct{ name, want string }{
		"upstream name kept":         {name: "provfleet.io/fast-local", want: "provfleet.io-fast-local"},
		"without a prefix":           {name: "example", want: "example"},
		"dots kept":                  {name: "a.b/c", want: "a.b-c"},
		"upper case and underscore":  {name: "example.com/Fast_One", want: "example.com-fast-one-253a03a2"},
		"differs only by case":       {name: "example.com/fast_one", want: "example.com-fast-one-b8295fe6"},
		"upper-case prefix":          {name: "Example.COM/fast", want: "example.com-fast-4e25e0f3"},
		"dots next to each other":    {name: "a.b/c..d", want: "a.b-c--d-02cd8706"},
		"dot before an underscore":   {name: "x.io/a._b", want: "x.io-a--b-5db757c4"},
		"longer than an object name": {name: longPrefix + "/" + strings.Repeat("E", 63), want: longPrefix + "-fabaf41b"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if errs := validateProvisionerName(field.NewPath("provisionerName"), tc.name); len(errs) > 0 {
				t.Fatalf("the test's provisioner name is invalid: %v", errs)
			}
			got := LeaseName(tc.name)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("LeaseName(%q) (-want +got):\n%s", tc.name, diff)
			}
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Errorf("LeaseName(%q) = %q is not a valid Lease name: %v", tc.name, got, errs)
			}
		})
	}
}
