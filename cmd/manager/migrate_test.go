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

package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	provfleetfake "github.com/provfleet/provfleet/pkg/generated/clientset/versioned/fake"
	"github.com/provfleet/provfleet/pkg/migrate"
)

func TestParseMigrateOptions(t *testing.T) {
	tests := map[string]struct {
		args    []string
		want    migrate.Options
		dryRun  bool
		wantErr string
	}{
		"nfs-subdir, dry run": {args: []string{"--from", "nfs-subdir", "--dry-run"}, want: migrate.Options{From: migrate.FromNFSSubdir}, dryRun: true},
		"local-path, named": {
			args: []string{"--from=local-path", "--deployment", "kube-system/local-path", "--name", "local", "--version", "v0.0.31"},
			want: migrate.Options{From: migrate.FromLocalPath, Deployment: types.NamespacedName{Namespace: "kube-system", Name: "local-path"}, Name: "local", Version: "v0.0.31"},
		},
		"no --from":                  {args: []string{"--dry-run"}, wantErr: "--from must be one of nfs-subdir or local-path"},
		"an unknown --from":          {args: []string{"--from", "openebs"}, wantErr: `not "openebs"`},
		"a deployment, no namespace": {args: []string{"--from", "nfs-subdir", "--deployment", "nfs"}, wantErr: "<namespace>/<name>"},
		"an argument":                {args: []string{"--from", "nfs-subdir", "now"}, wantErr: "unexpected arguments"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := parseMigrateOptions(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseMigrateOptions() error = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseMigrateOptions() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, o.plan); diff != "" {
				t.Errorf("plan options (-want +got):\n%s", diff)
			}
			if o.dryRun != tc.dryRun {
				t.Errorf("dryRun = %v, want %v", o.dryRun, tc.dryRun)
			}
		})
	}
}

func TestMigrateHelp(t *testing.T) {
	if _, err := parseMigrateOptions([]string{"--help"}); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("parseMigrateOptions(--help) error = %v, want pflag.ErrHelp, which main does not report as a failure", err)
	}
}

// TestMigrateDryRunChangesNothing: with --dry-run the plan is printed and
// nothing is created or recorded; without it, the same plan is applied.
func TestMigrateDryRunChangesNothing(t *testing.T) {
	labels := map[string]string{"app": "nfs"}
	kube := kubefake.NewClientset(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "storage", Name: "nfs"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "nfs",
					Image: "registry.k8s.io/sig-storage/nfs-subdir-external-provisioner:v4.0.2",
					Env:   []corev1.EnvVar{{Name: "PROVISIONER_NAME", Value: "example.com/nfs"}, {Name: "NFS_SERVER", Value: "nfs.example.com"}, {Name: "NFS_PATH", Value: "/export"}},
				}}},
			},
		},
	})
	provfleet := provfleetfake.NewSimpleClientset()
	clients := migrateClients{kube: kube, configs: provfleet.ProvfleetV1alpha1().ProvisionerConfigs()}
	for _, dryRun := range []bool{true, false} {
		var out bytes.Buffer
		o := &migrateOptions{dryRun: dryRun, plan: migrate.Options{From: migrate.FromNFSSubdir}}
		if err := migrateWith(t.Context(), o, clients, &out); err != nil {
			t.Fatalf("migrateWith(dryRun %v) error = %v", dryRun, err)
		}
		if !strings.Contains(out.String(), "kind: ProvisionerConfig") {
			t.Errorf("output of dryRun %v holds no ProvisionerConfig:\n%s", dryRun, out.String())
		}
		list, err := clients.configs.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if dryRun {
			want = 0
		}
		if len(list.Items) != want {
			t.Errorf("after dryRun %v: %d ProvisionerConfigs, want %d", dryRun, len(list.Items), want)
		}
	}
}
