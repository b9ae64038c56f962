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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/pkg/provisioning"
)

// cluster is a fixture cluster: the objects an old provisioner left,
// which a test changes before it plans.
type cluster struct {
	deployment *appsv1.Deployment
	configMap  *corev1.ConfigMap
	pods       []*corev1.Pod
	classes    map[string]*storagev1.StorageClass
	volumes    map[string]*corev1.PersistentVolume
}

func (c *cluster) objects() []runtime.Object {
	objects := []runtime.Object{c.deployment}
	if c.configMap != nil {
		objects = append(objects, c.configMap)
	}
	for _, pod := range c.pods {
		objects = append(objects, pod)
	}
	for _, class := range c.classes {
		objects = append(objects, class)
	}
	for _, pv := range c.volumes {
		objects = append(objects, pv)
	}
	return objects
}

func deployment(namespace, name, image string, container func(*corev1.Container)) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	c := corev1.Container{Name: name, Image: image}
	container(&c)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
			},
		},
	}
}

func class(name, provisioner string, params, annotations map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:    metav1.ObjectMeta{Name: name, Annotations: annotations},
		Provisioner:   provisioner,
		Parameters:    params,
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete),
	}
}

// oldVolume is a PersistentVolume as an old provisioner saves it: bound to
// claim, of class, with source.
func oldVolume(name, provisioner, class string, source corev1.PersistentVolumeSource) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{provisioning.AnnDynamicallyProvisioned: provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              class,
			PersistentVolumeSource:        source,
		},
	}
}

// The nfs-subdir-external-provisioner of the fixture, as its
// deploy/deployment.yaml installs it.
const (
	subdirName   = "cluster.local/nfs-subdir-external-provisioner"
	subdirServer = "nfs.example.com"
	subdirExport = "/exported/path"
)

// nfsSubdirCluster is an nfs-subdir-external-provisioner v4.0.3 scaled to
// zero, with a class for each fate its Delete decides
// (cmd/nfs-subdir-external-provisioner/provisioner.go), a volume of each,
// a volume whose fate an administrator recorded, and a class and volume
// of another provisioner.
func nfsSubdirCluster() *cluster {
	c := &cluster{
		deployment: deployment("storage", "nfs-client-provisioner", "registry.k8s.io/sig-storage/nfs-subdir-external-provisioner:v4.0.3", func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{
				{Name: envProvisionerName, Value: subdirName},
				{Name: envNFSServer, Value: subdirServer},
				{Name: envNFSPath, Value: subdirExport},
				{Name: envNFSDefaultMode, Value: "770"},
			}
		}),
		classes: map[string]*storagev1.StorageClass{},
		volumes: map[string]*corev1.PersistentVolume{},
	}
	for _, cl := range []*storagev1.StorageClass{
		class("nfs-client", subdirName, nil, nil),
		class("nfs-delete", subdirName, map[string]string{"onDelete": "delete"}, nil),
		class("nfs-capitalised", subdirName, map[string]string{"onDelete": "Delete"}, nil),
		class("nfs-noarchive", subdirName, map[string]string{"archiveOnDelete": "false"}, nil),
		class("nfs-retain", subdirName, map[string]string{"onDelete": "retain"}, nil),
		class("nfs-pattern", subdirName, map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.name}"}, nil),
		class("nfs-fixed", subdirName, map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.name}", "onDelete": "retain"}, nil),
		class("other", "example.com/other", nil, nil),
	} {
		c.classes[cl.Name] = cl
	}
	add := func(name, class, dir string) *corev1.PersistentVolume {
		pv := oldVolume(name, subdirName, class, corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: subdirServer, Path: subdirExport + "/" + dir}})
		c.volumes[name] = pv
		return pv
	}
	add("pvc-1", "nfs-client", "team-data-pvc-1")
	add("pvc-2", "nfs-delete", "team-logs-pvc-2")
	add("pvc-3", "nfs-capitalised", "team-cache-pvc-3")
	add("pvc-4", "nfs-noarchive", "team-tmp-pvc-4")
	add("pvc-5", "nfs-retain", "team-keep-pvc-5").Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	add("pvc-6", "nfs-pattern", "team/web")
	add("pvc-7", "nfs-client", "team-hand-pvc-7").Annotations["provfleet.io/on-delete"] = "Retain"
	// Retained, and named again for the same claim: adoptable.
	add("pvc-8", "nfs-fixed", "team/db").Spec.ClaimRef = &corev1.ObjectReference{Namespace: "team", Name: "db"}
	kept := add("pvc-9", "nfs-fixed", "team/queue")
	kept.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "team", Name: "queue"}
	kept.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	c.volumes["pvc-other"] = oldVolume("pvc-other", "example.com/other", "other", corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "other.example.com", Path: "/x/y"}})
	return c
}

// The local-path-provisioner of the fixture, as its Helm chart installs
// it.
const localPathName = "cluster.local/local-path-provisioner"

// localPathCluster is a local-path-provisioner v0.0.37 of the Helm chart,
// scaled to zero, with a default path and two nodes of their own, the
// setup script of its documentation that applies the class patterns, the
// default teardown script, a class that sets a user and a mode, and
// volumes: hostPath on an unlisted node, local on a listed one whose
// hostname label is not its name, one pinned by the rack label with its
// recorded node, one in the second path of its node, one of reclaim policy
// Retain, and one from before v0.0.25 that records no node.
func localPathCluster() *cluster {
	c := &cluster{
		deployment: deployment("local-path-storage", "local-path-provisioner", "docker.io/rancher/local-path-provisioner:v0.0.37", func(c *corev1.Container) {
			c.Command = []string{"local-path-provisioner", "--debug", "start", "--config", "/etc/config/config.json",
				"--service-account-name", "local-path-provisioner", "--provisioner-name", localPathName,
				"--helper-image", "busybox:latest", "--configmap-name", "local-path-config"}
		}),
		configMap: &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "local-path-storage", Name: "local-path-config"},
			Data: map[string]string{
				"config.json": `{"nodePathMap": [
					{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/local-path-provisioner"]},
					{"node": "big-1", "paths": ["/data/local-path"]},
					{"node": "big-2", "paths": ["/data/local-path/", "/data/more"]}]}`,
				"setup": "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n" +
					"chown \"${VOL_USER}:${VOL_GROUP}\" \"$VOL_DIR\"\nchmod \"${VOL_PERM}\" \"$VOL_DIR\"",
				"teardown": "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"",
			},
		},
		classes: map[string]*storagev1.StorageClass{
			"local-path": class("local-path", localPathName, map[string]string{"userPattern": "{{.PVC.Annotations.uid}}", "permPattern": "0750"}, nil),
		},
		volumes: map[string]*corev1.PersistentVolume{},
	}
	add := func(name, node, key, value string, source corev1.PersistentVolumeSource) *corev1.PersistentVolume {
		pv := oldVolume(name, localPathName, "local-path", source)
		if node != "" {
			pv.Annotations[localPathAnnSelectedNode] = node
		}
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}},
		}}}}
		c.volumes[name] = pv
		return pv
	}
	hostPath := func(p string) corev1.PersistentVolumeSource {
		return corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}
	}
	add("pvc-a", "node-1", corev1.LabelHostname, "node-1", hostPath("/opt/local-path-provisioner/pvc-a_default_data"))
	add("pvc-b", "big-1", corev1.LabelHostname, "big-1.example.com", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/data/local-path/pvc-b_team_db"}})
	add("pvc-c", "big-2", "topology.example.com/rack", "rack-7", hostPath("/data/local-path/pvc-c_team_cache"))
	add("pvc-f", "big-2", "topology.example.com/rack", "rack-7", hostPath("/data/more/pvc-f_team_more"))
	add("pvc-d", "node-1", corev1.LabelHostname, "node-1", hostPath("/opt/local-path-provisioner/pvc-d_team_keep")).Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	add("pvc-e", "", corev1.LabelHostname, "node-2", hostPath("/opt/local-path-provisioner/pvc-e_team_old"))
	return c
}

// sharedVolume is a volume of local-path's sharedFileSystemPath at
// volumePath: a hostPath volume pinned to no node.
func sharedVolume(name, volumePath string) *corev1.PersistentVolume {
	pv := oldVolume(name, localPathName, "local-path", corev1.PersistentVolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: volumePath, Type: ptr.To(corev1.HostPathDirectoryOrCreate)},
	})
	pv.Annotations[localPathAnnSelectedNode] = ""
	return pv
}
