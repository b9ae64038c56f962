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

package migrate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

var update = flag.Bool("update", false, "rewrite the golden files of the plans' dry-run output")

// TestWriteGolden: the dry-run output of the plan of each fixture cluster
// is the one checked in under testdata.
func TestWriteGolden(t *testing.T) {
	tests := map[string]struct {
		cluster *cluster
		from    Source
	}{
		"nfs-subdir": {cluster: nfsSubdirCluster(), from: FromNFSSubdir},
		"local-path": {cluster: localPathCluster(), from: FromLocalPath},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			plan, err := Make(t.Context(), kubefake.NewClientset(tc.cluster.objects()...), Options{From: tc.from})
			if err != nil {
				t.Fatalf("Make() error = %v", err)
			}
			var out bytes.Buffer
			if err := Write(&out, plan); err != nil {
				t.Fatalf("Write() error = %v", err)
			}
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("cannot read the golden file (run with -update to write it): %v", err)
			}
			if diff := cmp.Diff(string(want), out.String()); diff != "" {
				t.Errorf("dry-run output (-%s +got):\n%s", golden, diff)
			}
		})
	}
}

// refusals returns the plan's refusals as object: reason.
func refusals(p *Plan) map[string]string {
	got := map[string]string{}
	for _, r := range p.Refusals {
		got[r.Object] += r.Reason
	}
	return got
}

// checkRefusals compares the refused objects with want's, and checks that
// each reason names what want lists for it.
func checkRefusals(t *testing.T, p *Plan, want map[string][]string) {
	t.Helper()
	got := refusals(p)
	gotObjects, wantObjects := map[string]bool{}, map[string]bool{}
	for object := range got {
		gotObjects[object] = true
	}
	for object := range want {
		wantObjects[object] = true
	}
	if diff := cmp.Diff(wantObjects, gotObjects); diff != "" {
		t.Fatalf("refused objects (-want +got):\n%s\nrefusals: %v", diff, got)
	}
	for object, parts := range want {
		for _, part := range parts {
			if !strings.Contains(got[object], part) {
				t.Errorf("refusal of %s = %q, want it to name %q", object, got[object], part)
			}
		}
	}
	if len(want) > 0 && p.Applicable() == nil {
		t.Errorf("Applicable() = nil for a plan with refusals")
	}
}

// TestLocalPathRefusals: every local-path-provisioner feature with no
// mapping yet is refused, naming the feature and the release that brought
// it, before anything changes; a feature the old release did not have yet
// is no refusal, since that release ignored it too.
func TestLocalPathRefusals(t *testing.T) {
	tests := map[string]struct {
		change func(c *cluster)
		want   map[string][]string
	}{
		"the fixture": {change: func(*cluster) {}},
		"a volume pinned by another label that records no node": {
			change: func(c *cluster) { delete(c.volumes["pvc-c"].Annotations, localPathAnnSelectedNode) },
			want:   map[string][]string{"PersistentVolume pvc-c": {"records no node", "v0.0.25", corev1.LabelHostname}},
		},
		"classes of two nodeAffinityKeys": {
			change: func(c *cluster) {
				c.classes["local-path"].Parameters = map[string]string{"nodeAffinityKey": "topology.example.com/rack"}
				c.classes["by-zone"] = class("by-zone", localPathName, map[string]string{"nodeAffinityKey": "topology.kubernetes.io/zone"}, nil)
				c.classes["by-zone-too"] = class("by-zone-too", localPathName, map[string]string{"nodeAffinityKey": "topology.kubernetes.io/zone"}, nil)
			},
			want: map[string][]string{"StorageClasses of " + localPathName: {
				"nodeAffinityKey", "v0.0.35", "topology.example.com/rack by StorageClasses local-path",
				"topology.kubernetes.io/zone by StorageClasses by-zone, by-zone-too", "hostPath.nodeAffinityKey",
			}},
		},
		"a class of a nodeAffinityKey beside one of none": {
			change: func(c *cluster) {
				c.classes["racked"] = class("racked", localPathName, map[string]string{"nodeAffinityKey": "topology.example.com/rack"}, nil)
			},
			want: map[string][]string{"StorageClasses of " + localPathName: {
				"nodeAffinityKey", "v0.0.35", "topology.example.com/rack by StorageClasses racked",
				"kubernetes.io/hostname by StorageClasses local-path, which set none", "another node than its directory's",
			}},
		},
		"classes of two nodeAffinityKeys before v0.0.35": {
			change: func(c *cluster) {
				c.classes["local-path"].Parameters = map[string]string{"nodeAffinityKey": "topology.example.com/rack"}
				c.classes["by-zone"] = class("by-zone", localPathName, map[string]string{"nodeAffinityKey": "topology.kubernetes.io/zone"}, nil)
				c.configMap.Data["setup"] = "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\""
				c.deployment.Spec.Template.Spec.Containers[0].Image = "rancher/local-path-provisioner:v0.0.34"
			},
		},
		"permPattern as a class annotation, which the stock setup script ignores": {
			change: func(c *cluster) {
				c.configMap.Data["setup"] = "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\""
				c.classes["local-path"].Annotations = map[string]string{"permPattern": "0750"}
			},
		},
		"a setup script of its own": {
			change: func(c *cluster) { c.configMap.Data["setup"] += "\nchown 1000 \"$VOL_DIR\"" },
			want:   map[string][]string{"ConfigMap local-path-storage/local-path-config": {"setup script", `chown 1000 \"$VOL_DIR\"`}},
		},
		"a setupCommand": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = strings.Replace(c.configMap.Data["config.json"], "{", `{"setupCommand": "/setup", `, 1)
			},
			want: map[string][]string{"ConfigMap local-path-storage/local-path-config": {"setupCommand", "/setup"}},
		},
		"no setup script": {
			change: func(c *cluster) { delete(c.configMap.Data, "setup") },
			want:   map[string][]string{"ConfigMap local-path-storage/local-path-config": {"no setup script"}},
		},
		"the pattern lines before v0.0.37": {
			change: func(c *cluster) {
				c.deployment.Spec.Template.Spec.Containers[0].Image = "rancher/local-path-provisioner:v0.0.36"
			},
			want: map[string][]string{"ConfigMap local-path-storage/local-path-config": {"VOL_PERM", "v0.0.37"}},
		},
		"patterns before v0.0.37, which that release ignored": {
			change: func(c *cluster) {
				c.configMap.Data["setup"] = "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\""
				c.deployment.Spec.Template.Spec.Containers[0].Image = "rancher/local-path-provisioner:v0.0.36"
			},
		},
		"an unknown release has every feature": {
			change: func(c *cluster) {
				c.classes["local-path"].Parameters = map[string]string{"nodeAffinityKey": "rack"}
				c.classes["by-zone"] = class("by-zone", localPathName, map[string]string{"nodeAffinityKey": "zone"}, nil)
				c.deployment.Spec.Template.Spec.Containers[0].Image = "rancher/local-path-provisioner:latest"
			},
			want: map[string][]string{"StorageClasses of " + localPathName: {"nodeAffinityKey", "v0.0.35"}},
		},
		// provisioner.go, isSharedFilesystem: both set fail every call.
		"sharedFileSystemPath beside nodePathMap": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = `{"sharedFileSystemPath": "/mnt/shared", "nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/a"]}]}`
			},
			want: map[string][]string{"ConfigMap local-path-storage/local-path-config": {"both nodePathMap and sharedFileSystemPath"}},
		},
		"sharedFileSystemPath of the root": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = `{"sharedFileSystemPath": "/"}`
				c.volumes = nil
			},
			want: map[string][]string{"ConfigMap local-path-storage/local-path-config": {"sharedFileSystemPath", "below /"}},
		},
		// provisioner.go, getPathAndNodeForPV: with sharedFileSystemPath the
		// node affinity is not read, and the helper pod runs anywhere.
		"a volume pinned to a node, with sharedFileSystemPath": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = `{"sharedFileSystemPath": "/opt/local-path-provisioner"}`
				for name := range c.volumes {
					if name != "pvc-a" {
						delete(c.volumes, name)
					}
				}
			},
			want: map[string][]string{"PersistentVolume pvc-a": {"pinned to a node", "by hand"}},
		},
		"a volume outside the shared file system": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = `{"sharedFileSystemPath": "/mnt/shared"}`
				c.volumes = map[string]*corev1.PersistentVolume{"pvc-s": sharedVolume("pvc-s", "/mnt/other/pvc-s_team_data")}
			},
			want: map[string][]string{"PersistentVolume pvc-s": {"/mnt/shared", "not below"}},
		},
		// provisioner.go, isSharedFilesystem: each class is one or the other.
		"storageClassConfigs of a shared file system and of node paths": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = `{"storageClassConfigs": {"local-path": {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/a"]}]},
					"shared": {"sharedFileSystemPath": "/mnt/shared"}}}`
			},
			want: map[string][]string{"ConfigMap local-path-storage/local-path-config": {"shared a sharedFileSystemPath and local-path a nodePathMap", "not both"}},
		},
		"storageClassConfigs of a class with both": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = `{"storageClassConfigs": {"local-path": {"sharedFileSystemPath": "/mnt/shared",
					"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/a"]}]}}}`
			},
			want: map[string][]string{"ConfigMap local-path-storage/local-path-config, storageClassConfigs of local-path": {"both nodePathMap and sharedFileSystemPath"}},
		},
		"storageClassConfigs naming no class": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = `{"storageClassConfigs": {"Local_Path": {"sharedFileSystemPath": "/mnt/shared"}}}`
			},
			want: map[string][]string{"ConfigMap local-path-storage/local-path-config": {`"Local_Path"`, "names no StorageClass"}},
		},
		"storageClassConfigs whose paths overlap on a node": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = `{"storageClassConfigs": {"local-path": {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/a"]}]},
					"fast": {"nodePathMap": [{"node": "big-1", "paths": ["/opt/a/fast"]}]}}}`
			},
			want: map[string][]string{"ConfigMap local-path-storage/local-path-config": {"give node big-1 paths that /opt/a/fast and /opt/a overlap"}},
		},
		"storageClassConfigs whose shared paths overlap": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = `{"storageClassConfigs": {"local-path": {"sharedFileSystemPath": "/mnt/shared"}, "fast": {"sharedFileSystemPath": "/mnt/shared/fast"}}}`
			},
			want: map[string][]string{"ConfigMap local-path-storage/local-path-config": {"/mnt/shared and /mnt/shared/fast overlap"}},
		},
		"a volume of storageClassConfigs outside its node's paths": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = `{"storageClassConfigs": {"local-path": {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/a"]}]}}}`
				c.volumes = map[string]*corev1.PersistentVolume{"pvc-a": localPathVolume("pvc-a", "local-path", "node-1", "/opt/local-path-provisioner/pvc-a_team_a")}
			},
			want: map[string][]string{"PersistentVolume pvc-a": {"would not release it", "not below"}},
		},
		"paths of a node that overlap": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = `{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/a", "/opt/a/b"]}]}`
			},
			want: map[string][]string{"ConfigMap local-path-storage/local-path-config": {"DEFAULT_PATH_FOR_NON_LISTED_NODES", "/opt/a and /opt/a/b overlap"}},
		},
		"a node with no path": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = `{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": []}]}`
			},
			want: map[string][]string{"ConfigMap local-path-storage/local-path-config": {"DEFAULT_PATH_FOR_NON_LISTED_NODES", "at least one path"}},
		},
		"a teardown script of its own": {
			change: func(c *cluster) { c.configMap.Data["teardown"] = "#!/bin/sh\nmv \"$VOL_DIR\" /archive/" },
			want:   map[string][]string{"ConfigMap local-path-storage/local-path-config": {"teardown script", `rm -rf "$VOL_DIR"`}},
		},
		"a teardownCommand": {
			change: func(c *cluster) {
				c.configMap.Data["config.json"] = strings.Replace(c.configMap.Data["config.json"], "{", `{"teardownCommand": "/teardown", `, 1)
			},
			want: map[string][]string{"ConfigMap local-path-storage/local-path-config": {"teardownCommand", "/teardown"}},
		},
		"a volume with no node affinity": {
			change: func(c *cluster) {
				c.volumes["pvc-a"].Spec.NodeAffinity = nil
				c.volumes["pvc-a"].Annotations[localPathAnnSelectedNode] = ""
			},
			want: map[string][]string{
				"PersistentVolume pvc-a": {"no node affinity", "nodePathMap", "fails its delete"},
			},
		},
		"a volume outside its node's path": {
			change: func(c *cluster) { c.volumes["pvc-b"].Spec.Local.Path = "/opt/local-path-provisioner/pvc-b_team_db" },
			want: map[string][]string{
				"PersistentVolume pvc-b": {"big-1", "/data/local-path", "not below"},
			},
		},
		"classes of both volume types": {
			change: func(c *cluster) {
				c.classes["local-fast"] = class("local-fast", localPathName, nil, map[string]string{"defaultVolumeType": "local"})
			},
			want: map[string][]string{
				"StorageClasses local-fast": {"defaultVolumeType local", "local-path"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := localPathCluster()
			tc.change(c)
			plan, err := Make(t.Context(), kubefake.NewClientset(c.objects()...), Options{From: FromLocalPath})
			if err != nil {
				t.Fatalf("Make() error = %v", err)
			}
			checkRefusals(t, plan, tc.want)
		})
	}
}

// TestNFSSubdirRefusals: a volume whose fate nfs-subdir-external-provisioner
// itself could not decide, or that the backend would not release, and a
// Deployment that cannot be read into a backend, are refused and name why.
func TestNFSSubdirRefusals(t *testing.T) {
	tests := map[string]struct {
		change  func(c *cluster)
		version string
		want    map[string][]string
	}{
		"the fixture": {change: func(*cluster) {}},
		"archiveOnDelete that is no boolean": {
			change: func(c *cluster) { c.classes["nfs-client"].Parameters = map[string]string{"archiveOnDelete": "yes"} },
			want:   map[string][]string{"PersistentVolume pvc-1": {"archiveOnDelete", "provfleet.io/on-delete"}},
		},
		"a class that is gone": {
			change: func(c *cluster) { delete(c.classes, "nfs-delete") },
			want:   map[string][]string{"PersistentVolume pvc-2": {"nfs-delete", "does not exist"}},
		},
		"a volume of another server": {
			change: func(c *cluster) { c.volumes["pvc-2"].Spec.NFS.Server = "10.0.0.9" },
			want:   map[string][]string{"PersistentVolume pvc-2": {"10.0.0.9", subdirServer}},
		},
		"a volume outside the export": {
			change: func(c *cluster) { c.volumes["pvc-2"].Spec.NFS.Path = "/elsewhere/x" },
			want:   map[string][]string{"PersistentVolume pvc-2": {"/elsewhere/x", "not below"}},
		},
		"an image with no release": {
			change: func(c *cluster) {
				c.deployment.Spec.Template.Spec.Containers[0].Image = "example.com/nfs-subdir-external-provisioner:latest"
			},
			want: map[string][]string{"Deployment storage/nfs-client-provisioner": {"latest", "--version"}},
		},
		"an image with no release, given": {
			change: func(c *cluster) {
				c.deployment.Spec.Template.Spec.Containers[0].Image = "example.com/nfs-subdir-external-provisioner:latest"
			},
			version: "v4.0.3",
		},
		"a server from elsewhere": {
			change: func(c *cluster) {
				c.deployment.Spec.Template.Spec.Containers[0].Env[1] = corev1.EnvVar{Name: envNFSServer, ValueFrom: &corev1.EnvVarSource{}}
			},
			want: map[string][]string{"Deployment storage/nfs-client-provisioner": {envNFSServer, "valueFrom"}},
		},
		"no export": {
			change: func(c *cluster) { c.deployment.Spec.Template.Spec.Containers[0].Env[2].Value = "" },
			want:   map[string][]string{"Deployment storage/nfs-client-provisioner": {envNFSPath, "not set"}},
		},
		"an owner nfs-subdir does not start with": {
			change: func(c *cluster) {
				container := &c.deployment.Spec.Template.Spec.Containers[0]
				container.Env = append(container.Env, corev1.EnvVar{Name: envNFSDefaultUID, Value: "70000"})
			},
			want: map[string][]string{"Deployment storage/nfs-client-provisioner": {envNFSDefaultUID, "70000", "65535"}},
		},
		"a mode nfs-subdir does not start with": {
			change: func(c *cluster) { c.deployment.Spec.Template.Spec.Containers[0].Env[3].Value = "u+rwx" },
			want:   map[string][]string{"Deployment storage/nfs-client-provisioner": {envNFSDefaultMode, "u+rwx"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := nfsSubdirCluster()
			tc.change(c)
			plan, err := Make(t.Context(), kubefake.NewClientset(c.objects()...), Options{From: FromNFSSubdir, Version: tc.version})
			if err != nil {
				t.Fatalf("Make() error = %v", err)
			}
			checkRefusals(t, plan, tc.want)
		})
	}
}

// TestOldProvisionerStillRuns: a Deployment with replicas, or a pod of it
// that has not ended, terminating ones included, keeps the plan from being
// applied; ended pods do not.
func TestOldProvisionerStillRuns(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase, deleting bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "storage", Name: name, Labels: map[string]string{"app": "nfs-client-provisioner"}},
			Status:     corev1.PodStatus{Phase: phase},
		}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	tests := map[string]struct {
		replicas *int32
		pods     []*corev1.Pod
		want     []string
	}{
		"scaled to zero, no pod":     {replicas: ptr.To[int32](0)},
		"scaled to zero, pods ended": {replicas: ptr.To[int32](0), pods: []*corev1.Pod{pod("done", corev1.PodSucceeded, false), pod("crashed", corev1.PodFailed, false)}},
		"replicas unset":             {want: []string{"spec.replicas is 1"}},
		"scaled to zero, a pod terminating": {
			replicas: ptr.To[int32](0),
			pods:     []*corev1.Pod{pod("old", corev1.PodRunning, true)},
			want:     []string{"pod old is terminating"},
		},
		"two replicas": {
			replicas: ptr.To[int32](2),
			pods:     []*corev1.Pod{pod("a", corev1.PodRunning, false), pod("b", "", false)},
			want:     []string{"spec.replicas is 2", "pod a is running", "pod b is pending"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := nfsSubdirCluster()
			c.deployment.Spec.Replicas = tc.replicas
			c.pods = tc.pods
			plan, err := Make(t.Context(), kubefake.NewClientset(c.objects()...), Options{From: FromNFSSubdir})
			if err != nil {
				t.Fatalf("Make() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, plan.Running); diff != "" {
				t.Errorf("Running (-want +got):\n%s", diff)
			}
			if gotErr := plan.Applicable() != nil; gotErr != (len(tc.want) > 0) {
				t.Errorf("Applicable() = %v, want an error: %v", plan.Applicable(), len(tc.want) > 0)
			}
		})
	}
}

// TestFindDeployment: the old provisioner's Deployment is found by its
// image, or named; none or several found is an error that says what to
// do.
func TestFindDeployment(t *testing.T) {
	other := deployment("elsewhere", "second", "registry.k8s.io/sig-storage/nfs-subdir-external-provisioner:v4.0.2", func(*corev1.Container) {})
	tests := map[string]struct {
		extra   bool
		named   types.NamespacedName
		from    Source
		want    string
		wantErr string
	}{
		"found by its image":     {from: FromNFSSubdir, want: "storage/nfs-client-provisioner"},
		"two found":              {from: FromNFSSubdir, extra: true, wantErr: "several Deployments"},
		"two found, one named":   {from: FromNFSSubdir, extra: true, named: types.NamespacedName{Namespace: "storage", Name: "nfs-client-provisioner"}, want: "storage/nfs-client-provisioner"},
		"none found":             {from: FromLocalPath, wantErr: "--deployment"},
		"named and missing":      {from: FromNFSSubdir, named: types.NamespacedName{Namespace: "x", Name: "y"}, wantErr: "x/y"},
		"an unknown provisioner": {from: "local-storage", wantErr: "local-storage"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objects := nfsSubdirCluster().objects()
			if tc.extra {
				objects = append(objects, other)
			}
			plan, err := Make(t.Context(), kubefake.NewClientset(objects...), Options{From: tc.from, Deployment: tc.named})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Make() error = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Make() error = %v", err)
			}
			if got := plan.Deployment.String(); got != tc.want {
				t.Errorf("Deployment = %s, want %s", got, tc.want)
			}
		})
	}
}
