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
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// TestLocalPathNodePathMap: local-path's nodePathMap becomes the hostPath
// backend's path for the nodes it does not list and nodePaths for the
// others, nodes of the same paths together, the first path of each as path
// and the others as additionalPaths; without a default entry only the
// listed nodes are served.
func TestLocalPathNodePathMap(t *testing.T) {
	hostname := func(nodes ...string) *v1alpha1.NodeLabelSelector {
		return &v1alpha1.NodeLabelSelector{MatchExpressions: []v1alpha1.NodeLabelRequirement{{Key: "kubernetes.io/hostname", Operator: metav1.LabelSelectorOpIn, Values: nodes}}}
	}
	tests := map[string]struct {
		nodePathMap    string
		wantPath       v1alpha1.AbsolutePath
		wantAdditional []v1alpha1.AbsolutePath
		wantNodes      []v1alpha1.NodePath
		wantOnly       *v1alpha1.NodeLabelSelector
	}{
		"the default only": {
			nodePathMap: `[{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/local-path-provisioner"]}]`,
			wantPath:    "/opt/local-path-provisioner",
		},
		"listed nodes, one on the default's path": {
			nodePathMap: `[{"node": "a", "paths": ["/disk"]}, {"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/lp"]},
				{"node": "b", "paths": ["/opt/lp"]}, {"node": "c", "paths": ["/ssd"]}, {"node": "d", "paths": ["/disk/"]}]`,
			wantPath:  "/opt/lp",
			wantNodes: []v1alpha1.NodePath{{Nodes: []string{"a", "d"}, Path: "/disk"}, {Nodes: []string{"c"}, Path: "/ssd"}},
		},
		"several paths of a node": {
			nodePathMap: `[{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/lp", "/mnt/second/"]},
				{"node": "a", "paths": ["/opt/lp"]}, {"node": "b", "paths": ["/opt/lp", "/mnt/second"]},
				{"node": "c", "paths": ["/disk", "/ssd"]}, {"node": "d", "paths": ["/disk", "/ssd"]}, {"node": "e", "paths": ["/ssd", "/disk"]}]`,
			wantPath: "/opt/lp", wantAdditional: []v1alpha1.AbsolutePath{"/mnt/second"},
			wantNodes: []v1alpha1.NodePath{
				{Nodes: []string{"a"}, Path: "/opt/lp"},
				{Nodes: []string{"c", "d"}, Path: "/disk", AdditionalPaths: []v1alpha1.AbsolutePath{"/ssd"}},
				{Nodes: []string{"e"}, Path: "/ssd", AdditionalPaths: []v1alpha1.AbsolutePath{"/disk"}},
			},
		},
		"no default, several paths": {
			nodePathMap: `[{"node": "a", "paths": ["/disk", "/ssd"]}, {"node": "b", "paths": ["/ssd"]}]`,
			wantPath:    "/disk", wantAdditional: []v1alpha1.AbsolutePath{"/ssd"},
			wantNodes: []v1alpha1.NodePath{{Nodes: []string{"b"}, Path: "/ssd"}},
			wantOnly:  hostname("a", "b"),
		},
		"no default": {
			nodePathMap: `[{"node": "a", "paths": ["/disk"]}, {"node": "b", "paths": ["/ssd"]}]`,
			wantPath:    "/disk",
			wantNodes:   []v1alpha1.NodePath{{Nodes: []string{"b"}, Path: "/ssd"}},
			wantOnly:    hostname("a", "b"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := localPathCluster()
			c.configMap.Data["config.json"] = `{"nodePathMap": ` + tc.nodePathMap + `}`
			c.volumes = nil
			plan, err := Make(t.Context(), kubefake.NewClientset(c.objects()...), Options{From: FromLocalPath})
			if err != nil {
				t.Fatalf("Make() error = %v", err)
			}
			if plan.Config == nil {
				t.Fatalf("no ProvisionerConfig planned; refusals: %v", plan.Refusals)
			}
			got := plan.Config.Spec.Backend.HostPath
			if diff := cmp.Diff(tc.wantPath, got.Path); diff != "" {
				t.Errorf("path (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAdditional, got.AdditionalPaths); diff != "" {
				t.Errorf("additionalPaths (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNodes, got.NodePaths); diff != "" {
				t.Errorf("nodePaths (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOnly, got.NodeSelector); diff != "" {
				t.Errorf("nodeSelector (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLocalPathSharedFileSystem: local-path's sharedFileSystemPath becomes
// a hostPath backend the manager serves with sharedFileSystem, and each of
// its volumes, pinned to no node, is deleted there as local-path's teardown
// script deleted it (provisioner.go, deleteFor and getPathAndNodeForPV:
// with a shared file system the path alone, on any node). A release before
// the field ignored it, and so does the plan.
func TestLocalPathSharedFileSystem(t *testing.T) {
	tests := map[string]struct {
		image       string
		wantBackend *v1alpha1.HostPathBackend
		wantFates   map[string]string
	}{
		"v0.0.37": {
			wantBackend: &v1alpha1.HostPathBackend{
				Path: "/mnt/shared", SharedFileSystem: true, VolumeType: v1alpha1.HostPathVolumeHostPath,
				PathPattern: localPathPattern, OnDelete: v1alpha1.OnDeleteDelete,
				LocalPathPatterns: []v1alpha1.LocalPathPattern{v1alpha1.LocalPathPatternOwner, v1alpha1.LocalPathPatternMode},
			},
			wantFates: map[string]string{
				"pvc-s": "on the shared file system: delete /mnt/shared/pvc-s_team_data",
				"pvc-t": "on the shared file system: retain /mnt/shared/pvc-t_team_kept (recorded already); adoptable by claim team/kept made again once its reclaim policy is Retain",
			},
		},
		"a release before sharedFileSystemPath": {image: "rancher/local-path-provisioner:v0.0.22"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := localPathCluster()
			if tc.image != "" {
				c.deployment.Spec.Template.Spec.Containers[0].Image = tc.image
				c.configMap.Data["setup"] = "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\""
			}
			c.configMap.Data["config.json"] = `{"sharedFileSystemPath": "/mnt/shared/"}`
			kept := sharedVolume("pvc-t", "/mnt/shared/pvc-t_team_kept")
			kept.Annotations["provfleet.io/on-delete"] = "Retain"
			kept.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "team", Name: "kept"}
			// A fixed directory per claim: one made again names it.
			c.classes["local-path"].Parameters["pathPattern"] = "{{.PVC.Namespace}}_{{.PVC.Name}}"
			c.volumes = map[string]*corev1.PersistentVolume{"pvc-s": sharedVolume("pvc-s", "/mnt/shared/pvc-s_team_data"), "pvc-t": kept}
			plan, err := Make(t.Context(), kubefake.NewClientset(c.objects()...), Options{From: FromLocalPath})
			if err != nil {
				t.Fatalf("Make() error = %v", err)
			}
			if tc.wantBackend == nil {
				if plan.Config != nil || len(plan.Refusals) == 0 {
					t.Fatalf("plan = %+v, want refused: that release read nodePathMap only, which is empty", plan)
				}
				return
			}
			if plan.Config == nil || len(plan.Refusals) > 0 {
				t.Fatalf("plan refused: %v", plan.Refusals)
			}
			if diff := cmp.Diff(tc.wantBackend, plan.Config.Spec.Backend.HostPath); diff != "" {
				t.Errorf("backend (-want +got):\n%s", diff)
			}
			fates := map[string]string{}
			for _, v := range plan.Volumes {
				fates[v.PV.Name] = v.Fate
			}
			if diff := cmp.Diff(tc.wantFates, fates); diff != "" {
				t.Errorf("fates (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLocalPathNodeAffinityKey: the nodeAffinityKey the classes set becomes
// the backend's, where the release reads it; the host name, or none, is
// the default.
func TestLocalPathNodeAffinityKey(t *testing.T) {
	tests := map[string]struct {
		image   string
		classes map[string]string
		want    string
	}{
		"none":          {classes: map[string]string{"local-path": ""}},
		"the host name": {classes: map[string]string{"local-path": "kubernetes.io/hostname"}},
		"one key": {
			classes: map[string]string{"local-path": "topology.example.com/rack", "racked": "topology.example.com/rack"},
			want:    "topology.example.com/rack",
		},

		"a release before it": {
			image:   "rancher/local-path-provisioner:v0.0.34",
			classes: map[string]string{"local-path": "topology.example.com/rack"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := localPathCluster()
			if tc.image != "" {
				c.deployment.Spec.Template.Spec.Containers[0].Image = tc.image
				// That release sets no VOL_USER, VOL_GROUP, VOL_PERM.
				c.configMap.Data["setup"] = "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\""
			}
			c.classes = map[string]*storagev1.StorageClass{}
			for name, key := range tc.classes {
				c.classes[name] = class(name, localPathName, map[string]string{"nodeAffinityKey": key}, nil)
			}
			plan, err := Make(t.Context(), kubefake.NewClientset(c.objects()...), Options{From: FromLocalPath})
			if err != nil {
				t.Fatalf("Make() error = %v", err)
			}
			if plan.Config == nil || len(plan.Refusals) > 0 {
				t.Fatalf("plan refused: %v", plan.Refusals)
			}
			if diff := cmp.Diff(tc.want, plan.Config.Spec.Backend.HostPath.NodeAffinityKey); diff != "" {
				t.Errorf("nodeAffinityKey (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLocalPathSetup: local-path's setup script is read into the class
// patterns the hostPath backend applies: its stock mkdir applies none, and
// the chown and chmod lines of its documentation, in either spelling of
// the variables, apply Owner and Mode; any other script, or a line twice,
// is refused naming it. Classes that set patterns the script ignores are
// noted, not refused.
func TestLocalPathSetup(t *testing.T) {
	const (
		mkdir = "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n"
		chown = "chown \"${VOL_USER}:${VOL_GROUP}\" \"$VOL_DIR\"\n"
		chmod = "chmod \"${VOL_PERM}\" \"$VOL_DIR\"\n"
	)
	tests := map[string]struct {
		script      string
		classAnns   map[string]string
		want        []v1alpha1.LocalPathPattern
		wantNote    string
		wantRefused string
	}{
		"the stock script":                          {script: mkdir},
		"the stock script in braces, with comments": {script: "#!/bin/sh\n# make it\n\nset -e\nmkdir -m 0777 -p \"${VOL_DIR}\"\n"},
		"the stock script, patterns set": {
			script: mkdir, classAnns: map[string]string{"userPattern": "1000", "permPattern": "0700"},
			wantNote: "sets permPattern, userPattern, which the setup script does not apply: ignored",
		},
		"chown and chmod":      {script: mkdir + chown + chmod, classAnns: map[string]string{"groupPattern": "2000"}, want: []v1alpha1.LocalPathPattern{"Owner", "Mode"}},
		"chmod, then chown":    {script: mkdir + chmod + chown, classAnns: map[string]string{"groupPattern": "2000"}, want: []v1alpha1.LocalPathPattern{"Mode", "Owner"}},
		"chmod only, unbraced": {script: mkdir + "chmod \"$VOL_PERM\" \"${VOL_DIR}\"", want: []v1alpha1.LocalPathPattern{"Mode"}},
		"chown for a class with no owner pattern": {
			script: mkdir + chown, want: []v1alpha1.LocalPathPattern{"Owner"},
			wantNote: "sets neither userPattern nor groupPattern",
		},
		"chown before mkdir":      {script: "#!/bin/sh\n" + chown + "mkdir -m 0777 -p \"$VOL_DIR\"", wantRefused: `does not start with mkdir -m 0777 -p "$VOL_DIR"`},
		"another mode":            {script: "mkdir -m 0700 -p \"$VOL_DIR\"", wantRefused: "does not start with"},
		"an empty script":         {script: "#!/bin/sh\nset -eu\n", wantRefused: "does not start with"},
		"chown twice":             {script: mkdir + chown + chown, wantRefused: "once each"},
		"chown recursive":         {script: mkdir + "chown -R \"$VOL_USER:$VOL_GROUP\" \"$VOL_DIR\"", wantRefused: `runs "chown -R`},
		"chmod with a fixed mode": {script: mkdir + "chmod 700 \"$VOL_DIR\"", wantRefused: `runs "chmod 700`},
		"unquoted":                {script: mkdir + "chmod $VOL_PERM $VOL_DIR", wantRefused: "chmod $VOL_PERM $VOL_DIR"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := localPathCluster()
			c.configMap.Data["setup"] = tc.script
			c.classes["local-path"].Parameters, c.classes["local-path"].Annotations = nil, tc.classAnns
			plan, err := Make(t.Context(), kubefake.NewClientset(c.objects()...), Options{From: FromLocalPath})
			if err != nil {
				t.Fatalf("Make() error = %v", err)
			}
			if tc.wantRefused != "" {
				checkRefusals(t, plan, map[string][]string{"ConfigMap local-path-storage/local-path-config": {tc.wantRefused}})
				return
			}
			checkRefusals(t, plan, nil)
			if diff := cmp.Diff(tc.want, plan.Config.Spec.Backend.HostPath.LocalPathPatterns); diff != "" {
				t.Errorf("localPathPatterns (-want +got):\n%s", diff)
			}
			noted := tc.wantNote == ""
			for _, note := range plan.Notes {
				noted = noted || strings.Contains(note, tc.wantNote)
				if tc.wantNote == "" && strings.Contains(note, "StorageClass local-path ") {
					t.Errorf("unexpected note %q", note)
				}
			}
			if !noted {
				t.Errorf("notes %q, want one containing %q", plan.Notes, tc.wantNote)
			}
		})
	}
}

// TestLocalPathStorageClassConfigs: local-path's storageClassConfigs
// (provisioner.go, pickConfig and canonicalizeConfig) gives each class it
// lists a nodePathMap or a sharedFileSystemPath of its own and ignores the
// top-level ones; it becomes hostPath.storageClasses, the backend's own
// paths those of the first class. A volume of a class it does not list is
// retained, as local-path's delete of it fails; the others are released
// from whichever path of their node holds them, as its teardown script
// deletes the path a volume names.
func TestLocalPathStorageClassConfigs(t *testing.T) {
	tests := map[string]struct {
		config      string
		volumes     map[string]*corev1.PersistentVolume
		wantBackend *v1alpha1.HostPathBackend
		wantFates   map[string]string
		wantRecords map[string]map[string]string
		wantNotes   []string
	}{
		"node paths": {
			config: `{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/ignored"]}], "storageClassConfigs": {
				"local-path": {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/local-path-provisioner"]},
					{"node": "big-1", "paths": ["/data/local-path", "/nvme"]}]},
				"fast": {"nodePathMap": [{"node": "big-1", "paths": ["/nvme"]}, {"node": "big-2", "paths": ["/nvme"]}]}}}`,
			volumes: map[string]*corev1.PersistentVolume{
				"pvc-a": localPathVolume("pvc-a", "local-path", "node-1", "/opt/local-path-provisioner/pvc-a_team_a"),
				"pvc-b": localPathVolume("pvc-b", "local-path", "big-1", "/nvme/pvc-b_team_b"),
				"pvc-n": localPathVolume("pvc-n", "fast", "big-2", "/nvme/pvc-n_team_n"),
				"pvc-u": localPathVolume("pvc-u", "slow", "node-1", "/opt/local-path-provisioner/pvc-u_team_u"),
			},
			wantBackend: &v1alpha1.HostPathBackend{
				Path: "/nvme", VolumeType: v1alpha1.HostPathVolumeHostPath, PathPattern: localPathPattern, OnDelete: v1alpha1.OnDeleteDelete,
				LocalPathPatterns: []v1alpha1.LocalPathPattern{v1alpha1.LocalPathPatternOwner, v1alpha1.LocalPathPatternMode},
				StorageClasses: []v1alpha1.HostPathStorageClass{
					{StorageClassName: "fast", Path: "/nvme"},
					{StorageClassName: "local-path", Path: "/opt/local-path-provisioner", NodePaths: []v1alpha1.NodePath{
						{Nodes: []string{"big-1"}, Path: "/data/local-path", AdditionalPaths: []v1alpha1.AbsolutePath{"/nvme"}},
					}},
				},
			},
			wantFates: map[string]string{
				"pvc-a": "on node node-1: delete /opt/local-path-provisioner/pvc-a_team_a",
				"pvc-b": "on node big-1: delete /nvme/pvc-b_team_b",
				"pvc-n": "on node big-2: delete /nvme/pvc-n_team_n",
				"pvc-u": `on node node-1: retain /opt/local-path-provisioner/pvc-u_team_u: storageClassConfigs does not list its StorageClass "slow", and local-path-provisioner fails its delete`,
			},
			wantRecords: map[string]map[string]string{
				"pvc-u": {"provfleet.io/on-delete": "Retain", "hostpath.provfleet.io/node": "node-1"},
				"pvc-n": {"provfleet.io/on-delete": "Delete", "provfleet.io/delete-unmarked": "true", "hostpath.provfleet.io/node": "big-2"},
			},
			wantNotes: []string{
				"nodePathMap and sharedFileSystemPath beside storageClassConfigs are ignored",
				"storageClassConfigs does not list StorageClasses slow, whose claims local-path-provisioner failed: provfleet gives them volumes in the paths of fast",
				"claims of StorageClass fast on nodes its nodePathMap does not list, which local-path-provisioner failed, get volumes in /nvme",
			},
		},
		"shared file systems": {
			config: `{"storageClassConfigs": {"local-path": {"sharedFileSystemPath": "/mnt/shared/"}, "fast": {"sharedFileSystemPath": "/mnt/fast"}}}`,
			volumes: map[string]*corev1.PersistentVolume{
				"pvc-s": sharedVolume("pvc-s", "/mnt/shared/pvc-s_team_data"),
				"pvc-u": func() *corev1.PersistentVolume {
					pv := sharedVolume("pvc-u", "/mnt/shared/pvc-u_team_slow")
					pv.Spec.StorageClassName = "slow"
					return pv
				}(),
			},
			wantBackend: &v1alpha1.HostPathBackend{
				Path: "/mnt/fast", SharedFileSystem: true, VolumeType: v1alpha1.HostPathVolumeHostPath,
				PathPattern: localPathPattern, OnDelete: v1alpha1.OnDeleteDelete,
				LocalPathPatterns: []v1alpha1.LocalPathPattern{v1alpha1.LocalPathPatternOwner, v1alpha1.LocalPathPatternMode},
				StorageClasses: []v1alpha1.HostPathStorageClass{
					{StorageClassName: "fast", Path: "/mnt/fast"},
					{StorageClassName: "local-path", Path: "/mnt/shared"},
				},
			},
			wantFates: map[string]string{
				"pvc-s": "on the shared file system: delete /mnt/shared/pvc-s_team_data",
				"pvc-u": `on the shared file system: retain /mnt/shared/pvc-u_team_slow: storageClassConfigs does not list its StorageClass "slow", and local-path-provisioner fails its delete`,
			},
			wantRecords: map[string]map[string]string{"pvc-u": {"provfleet.io/on-delete": "Retain"}},
			wantNotes:   []string{"the manager makes and deletes the volumes of /mnt/fast, /mnt/shared itself"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := localPathCluster()
			c.configMap.Data["config.json"] = tc.config
			c.classes["fast"] = class("fast", localPathName, nil, nil)
			c.classes["slow"] = class("slow", localPathName, nil, nil)
			c.volumes = tc.volumes
			plan, err := Make(t.Context(), kubefake.NewClientset(c.objects()...), Options{From: FromLocalPath})
			if err != nil {
				t.Fatalf("Make() error = %v", err)
			}
			if plan.Config == nil || len(plan.Refusals) > 0 {
				t.Fatalf("plan refused: %v", plan.Refusals)
			}
			if diff := cmp.Diff(tc.wantBackend, plan.Config.Spec.Backend.HostPath); diff != "" {
				t.Errorf("backend (-want +got):\n%s", diff)
			}
			fates := map[string]string{}
			records := map[string]map[string]string{}
			for _, v := range plan.Volumes {
				fates[v.PV.Name] = v.Fate
				if _, ok := tc.wantRecords[v.PV.Name]; ok {
					records[v.PV.Name] = v.Record
				}
			}
			if diff := cmp.Diff(tc.wantFates, fates); diff != "" {
				t.Errorf("fates (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRecords, records); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			for _, want := range tc.wantNotes {
				if !slices.ContainsFunc(plan.Notes, func(note string) bool { return strings.Contains(note, want) }) {
					t.Errorf("notes %q, want one containing %q", plan.Notes, want)
				}
			}
		})
	}
}

// localPathVolume is a hostPath volume local-path made at volumePath on
// node, of class.
func localPathVolume(name, class, node, volumePath string) *corev1.PersistentVolume {
	pv := oldVolume(name, localPathName, class, corev1.PersistentVolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: volumePath, Type: ptr.To(corev1.HostPathDirectoryOrCreate)},
	})
	pv.Annotations[localPathAnnSelectedNode] = node
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}}
	return pv
}
