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
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// servedConfigs are a hostPath provisioner with an additional name and an
// NFS one.
func servedConfigs() []*v1alpha1.ProvisionerConfig {
	host := hostPathConfig("host", "x.io/host", 1)
	host.Spec.AdditionalProvisionerNames = []v1alpha1.ProvisionerName{"legacy.io/host"}
	host.Spec.Backend.HostPath = &v1alpha1.HostPathBackend{Path: "/srv/host", AdditionalPaths: []v1alpha1.AbsolutePath{"/mnt/more/"}}
	nfs := hostPathConfig("nfs", "x.io/nfs", 1)
	nfs.Spec.Backend = v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{Server: "nfs.example", Path: "/exports/nfs"}}
	return []*v1alpha1.ProvisionerConfig{host, nfs}
}

func claimWith(annotations map[string]string, finalizers ...string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Annotations: annotations, Finalizers: finalizers}}
}

func hostPathVolume(dir string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: dir},
	}}}
}

func localVolume(dir, node string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{backend.AnnNode: node}},
		Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}}},
	}
}

func nfsVolume(server, dir string, mountOptions ...string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: server, Path: dir}},
		MountOptions:           mountOptions,
	}}
}

func provisionedBy(name string, pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	pv.Annotations = map[string]string{provisioning.AnnDynamicallyProvisioned: name}
	return pv
}

func TestCacheScopeKeepsClaims(t *testing.T) {
	ga, beta := provisioning.AnnStorageProvisioner, provisioning.AnnBetaStorageProvisioner
	tests := map[string]struct {
		claim *corev1.PersistentVolumeClaim
		want  bool
	}{
		"asks for a served provisioner":               {claimWith(map[string]string{ga: "x.io/nfs"}), true},
		"asks for one in the beta annotation":         {claimWith(map[string]string{beta: "x.io/host"}), true},
		"asks for an additional name":                 {claimWith(map[string]string{ga: "legacy.io/host"}), true},
		"asks for another provisioner":                {claimWith(map[string]string{ga: "example.com/other"}), false},
		"names another, and a served one in the beta": {claimWith(map[string]string{ga: "example.com/other", beta: "x.io/host"}), true},
		"names no provisioner":                        {claimWith(nil), false},
		"carries a served provisioner's intent finalizer": {
			claimWith(map[string]string{ga: "example.com/other"}, "kubernetes.io/pvc-protection", provisioning.IntentFinalizer("x.io/host")), true,
		},
		"carries the intent finalizer of an additional name": {claimWith(nil, provisioning.IntentFinalizer("legacy.io/host")), true},
		"carries another provisioner's intent finalizer":     {claimWith(nil, provisioning.IntentFinalizer("example.com/other")), false},
		"names a served provisioner as its class's name":     {&corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("x.io/host")}}, false},
	}
	s := &cacheScope{}
	s.Update(servedConfigs())
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, s.keepClaim(tc.claim)); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCacheScopeKeepsVolumes(t *testing.T) {
	other := func(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
		return provisionedBy("example.com/other", pv)
	}
	tests := map[string]struct {
		volume *corev1.PersistentVolume
		want   bool
	}{
		"provisioned by a served provisioner":           {provisionedBy("x.io/nfs", nfsVolume("elsewhere.example", "/x")), true},
		"provisioned under an additional name":          {provisionedBy("legacy.io/host", &corev1.PersistentVolume{}), true},
		"of another, outside every base":                {other(hostPathVolume("/var/other/pv-1")), false},
		"of another, at a base":                         {other(hostPathVolume("/srv/host")), true},
		"of another, deep inside an additional path":    {other(hostPathVolume("/mnt/more/a/b")), true},
		"of another, local inside a base on any node":   {other(localVolume("/srv/host/x", "node-9")), true},
		"of another, local outside every base":          {other(localVolume("/srv/hostile/x", "node-1")), false},
		"of another, around a base":                     {other(hostPathVolume("/srv")), false},
		"of another, written uncleanly inside a base":   {other(hostPathVolume("/srv/other/../host//x/")), true},
		"of another, relative":                          {other(hostPathVolume("srv/host/x")), false},
		"of another, inside the served NFS export":      {other(nfsVolume("nfs.example", "/exports/nfs/pvc-1")), true},
		"of another, outside the served NFS export":     {other(nfsVolume("nfs.example", "/exports/other")), false},
		"of another, on another NFS server":             {other(nfsVolume("other.example", "/exports/nfs/pvc-1")), false},
		"of another, on the NFS server at another port": {other(nfsVolume("nfs.example", "/exports/nfs/pvc-1", "vers=3,port=2050")), false},
		"of another, a host path where an export is":    {other(hostPathVolume("/exports/nfs/pvc-1")), false},
		"of another, of another source":                 {other(&corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d"}}}}), false},
		"of none, inside a base":                        {hostPathVolume("/srv/host/a"), true},
		"of none, outside every base":                   {hostPathVolume("/var/static/pv-1"), true},
		"of none, local on another node":                {localVolume("/data/x", "node-9"), true},
		"of none, on another NFS server":                {nfsVolume("other.example", "/exports/x"), true},
		"of none, relative":                             {hostPathVolume("srv/host/x"), false},
		"of none, of another source":                    {&corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d"}}}}, false},
	}
	s := &cacheScope{}
	s.Update(servedConfigs())
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, s.keepVolume(tc.volume)); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCacheScopeRefreshesWhenItChanges(t *testing.T) {
	configs := servedConfigs()
	withStatus := slices.Clone(configs)
	withStatus[0] = configs[0].DeepCopy()
	withStatus[0].Status.Leader = "replica-2"
	moved := slices.Clone(configs)
	moved[1] = configs[1].DeepCopy()
	moved[1].Spec.Backend.NFS.Server = "other.example"
	tests := map[string]struct {
		updates [][]*v1alpha1.ProvisionerConfig
		want    int
	}{
		"the first scope":                {[][]*v1alpha1.ProvisionerConfig{configs}, 0},
		"the same ProvisionerConfigs":    {[][]*v1alpha1.ProvisionerConfig{configs, configs}, 0},
		"a change of status only":        {[][]*v1alpha1.ProvisionerConfig{configs, withStatus}, 0},
		"one more ProvisionerConfig":     {[][]*v1alpha1.ProvisionerConfig{configs[:1], configs}, 1},
		"one less ProvisionerConfig":     {[][]*v1alpha1.ProvisionerConfig{configs, configs[:1]}, 1},
		"a base on another server":       {[][]*v1alpha1.ProvisionerConfig{configs, moved}, 1},
		"none, then some, then none":     {[][]*v1alpha1.ProvisionerConfig{nil, configs, nil}, 2},
		"the same ones in another order": {[][]*v1alpha1.ProvisionerConfig{configs, {configs[1], configs[0]}}, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			refreshes := 0
			s := &cacheScope{refresh: func() { refreshes++ }}
			for _, update := range tc.updates {
				s.Update(update)
			}
			if diff := cmp.Diff(tc.want, refreshes); diff != "" {
				t.Errorf("refreshes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCacheScopeCovers(t *testing.T) {
	configs := servedConfigs()
	moved := configs[1].DeepCopy()
	moved.Spec.Backend.NFS.Server = "other.example"
	renamed := configs[1].DeepCopy()
	renamed.Spec.ProvisionerName = "x.io/renamed"
	tests := map[string]struct {
		scope []*v1alpha1.ProvisionerConfig
		pc    *v1alpha1.ProvisionerConfig
		want  bool
	}{
		"no scope yet":             {nil, configs[0], false},
		"in the scope":             {configs, configs[1], true},
		"not in the scope":         {configs[:1], configs[1], false},
		"a base on another server": {configs, moved, false},
		"another name":             {configs, renamed, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &cacheScope{}
			if tc.scope != nil {
				s.Update(tc.scope)
			}
			if diff := cmp.Diff(tc.want, s.covers(tc.pc)); diff != "" {
				t.Errorf("covers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestManagerCachesTheClaimsOfWhatItServes: the manager's cache holds no
// claim of a provisioner it does not serve, fetches the claims of a
// ProvisionerConfig created after them, and drops them once it is gone.
func TestManagerCachesTheClaimsOfWhatItServes(t *testing.T) {
	f := newFixture(t)
	for name, provisioner := range map[string]string{"other": "example.com/other", "late": "x.io/late"} {
		claim := claimWith(map[string]string{provisioning.AnnStorageProvisioner: provisioner})
		claim.Name = name
		if _, err := f.kube.CoreV1().PersistentVolumeClaims("ns").Create(f.ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cached := func(name string) bool {
		_, exists, err := f.manager.shared.Claims.GetStore().GetByKey("ns/" + name)
		return err == nil && exists
	}
	f.create(managed())
	f.eventually("a is Running", func() bool { return f.readyReason("a", 1) == v1alpha1.ReasonRunning })
	if cached("other") || cached("late") {
		t.Errorf("claims of provisioners not served are cached: other %v, late %v", cached("other"), cached("late"))
	}

	late := managed()
	late.Name, late.Spec.ProvisionerName = "late", "x.io/late"
	f.create(late)
	f.eventually("the claim of x.io/late is cached", func() bool { return cached("late") })
	if cached("other") {
		t.Error("the claim of a provisioner not served is cached")
	}

	f.delete("late")
	f.eventually("the claim of x.io/late is dropped", func() bool { return f.gone("late") && !cached("late") })
}

// TestCachedObjectsMetric: provfleet_cached_objects counts what the caches
// hold, without the claims of a provisioner not served.
func TestCachedObjectsMetric(t *testing.T) {
	f := newFixture(t)
	for name, provisioner := range map[string]string{"mine": "x.io/a", "other": "example.com/other"} {
		claim := claimWith(map[string]string{provisioning.AnnStorageProvisioner: provisioner})
		claim.Name = name
		if _, err := f.kube.CoreV1().PersistentVolumeClaims("ns").Create(f.ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.create(managed())
	want := `
# HELP provfleet_cached_objects Objects in this process's cache of claims, PersistentVolumes and StorageClasses, by resource.
# TYPE provfleet_cached_objects gauge
provfleet_cached_objects{resource="persistentvolumeclaims"} 1
provfleet_cached_objects{resource="persistentvolumes"} 0
provfleet_cached_objects{resource="storageclasses"} 0
`
	var err error
	f.eventually("the series as wanted", func() bool {
		err = testutil.CollectAndCompare(newCachedObjects(f.manager), strings.NewReader(want), "provfleet_cached_objects")
		return err == nil
	})
	if err != nil {
		t.Error(err)
	}
}
