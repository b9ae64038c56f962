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

package backend

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// VolumePathIndex names the index of IndexVolumePaths. The process that owns
// the PersistentVolume informer adds it once, before the informer starts.
const VolumePathIndex = "provfleet.io/volume-path"

// Key spaces of VolumePathIndex: each node's file system, which hostPath and
// local volumes of that node share, and each NFS server's.
const (
	hostKey      = "host="
	hostUnderKey = "host-under="
	nfsKey       = "nfs="
	nfsUnderKey  = "nfs-under="
)

// AnnNode records on a PersistentVolume the node whose file system holds its
// directory: the index keys its path by that node, and the hostPath backend
// of another node refuses to delete it rather than remove a directory of its
// own.
const AnnNode = "hostpath.provfleet.io/node"

// hostNodePrefix starts the server name of a node's file system: no NFS
// server the index knows holds a "/".
const hostNodePrefix = "node/"

// HostNode returns the server under which Overlapping knows the file system
// of node, for the hostPath and local volumes of that node.
func HostNode(node string) string {
	return hostNodePrefix + node
}

// VolumeNode returns the node whose file system holds a hostPath or local
// PersistentVolume: its AnnNode annotation, else, for volumes of other
// provisioners, the one value of its required node affinity on
// kubernetes.io/hostname. It is "" when neither names exactly one node.
func VolumeNode(pv *corev1.PersistentVolume) string {
	if node, ok := pv.Annotations[AnnNode]; ok {
		return node
	}
	affinity := pv.Spec.NodeAffinity
	if affinity == nil || affinity.Required == nil || len(affinity.Required.NodeSelectorTerms) != 1 {
		return ""
	}
	// Two terms would be either node: a volume that may be on several.
	for _, req := range affinity.Required.NodeSelectorTerms[0].MatchExpressions {
		if req.Key == corev1.LabelHostname && req.Operator == corev1.NodeSelectorOpIn && len(req.Values) == 1 {
			return req.Values[0]
		}
	}
	return ""
}

// NodeLabelValue is what a volume pinned to node by the node label key
// names: the node's value of that label, or its name when it has none, as
// the kubelet's hostname label and local-path-provisioner's nodeAffinityKey
// have it.
func NodeLabelValue(node *corev1.Node, key string) string {
	if value, ok := node.Labels[key]; ok {
		return value
	}
	return node.Name
}

// place is the file system a volume's path belongs to: an NFS server's, or
// a node's ("" for a volume pinned to no one node).
type place struct {
	nfs  bool
	name string
}

func (p place) keys() (is, under string) {
	// Neither a server nor a node name holds a "/", so the path after it,
	// which starts with one, keeps keys apart.
	if p.nfs {
		return nfsKey + p.name + ":", nfsUnderKey + p.name + ":"
	}
	return hostKey + p.name + ":", hostUnderKey + p.name + ":"
}

// location returns where a PersistentVolume's directory is, its path
// cleaned; ok is false for other sources, for relative paths and for NFS
// servers or nodes with a "/", which no backend accepts.
func location(pv *corev1.PersistentVolume) (p place, volumePath string, ok bool) {
	hostPath, onHost := HostVolumePath(pv)
	switch {
	case onHost:
		p = place{name: VolumeNode(pv)}
		volumePath = hostPath
	case pv.Spec.NFS != nil:
		p = place{nfs: true, name: NFSServerOf(pv.Spec.NFS, pv.Spec.MountOptions)}
		volumePath = pv.Spec.NFS.Path
	default:
		return place{}, "", false
	}
	if !path.IsAbs(volumePath) || strings.Contains(p.name, "/") {
		return place{}, "", false
	}
	return p, path.Clean(volumePath), true
}

// ancestors returns the proper ancestors of a clean absolute path, deepest
// first.
func ancestors(volumePath string) []string {
	var dirs []string
	for dir := volumePath; dir != "/"; {
		dir = path.Dir(dir)
		dirs = append(dirs, dir)
	}
	return dirs
}

// IndexVolumePaths is the cache.IndexFunc of VolumePathIndex: a hostPath,
// local or NFS PersistentVolume gets a key for its path and one for each
// proper ancestor of it, so Overlapping costs one lookup per path component.
func IndexVolumePaths(obj any) ([]string, error) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return nil, nil
	}
	p, volumePath, ok := location(pv)
	if !ok {
		return nil, nil
	}
	is, under := p.keys()
	keys := []string{is + volumePath}
	for _, dir := range ancestors(volumePath) {
		keys = append(keys, under+dir)
	}
	return keys, nil
}

// target returns the places and clean path of an Overlapping call: a
// node's file system comes with that of the volumes pinned to no node, which
// may be on any.
func target(server, volumePath string) ([]place, string, error) {
	if !path.IsAbs(volumePath) {
		return nil, "", fmt.Errorf("cannot look for volumes overlapping %q: the path is not absolute", volumePath)
	}
	node, onNode := strings.CutPrefix(server, hostNodePrefix)
	switch {
	case onNode && strings.Contains(node, "/"):
		return nil, "", fmt.Errorf("cannot look for volumes on node %q: a node name holds no \"/\"", node)
	case onNode && node != "":
		return []place{{name: node}, {}}, path.Clean(volumePath), nil
	case onNode, server == "":
		return []place{{}}, path.Clean(volumePath), nil
	case strings.Contains(server, "/"):
		return nil, "", fmt.Errorf("cannot look for volumes on server %q: a server name holds no \"/\"", server)
	}
	return []place{{nfs: true, name: server}}, path.Clean(volumePath), nil
}

// overlapKeys are the keys of VolumePathIndex that find the volumes
// overlapping volumePath: the path itself, what lies inside it, and each of
// its ancestors.
func (p place) overlapKeys(volumePath string) []string {
	is, under := p.keys()
	keys := []string{is + volumePath, under + volumePath}
	for _, dir := range ancestors(volumePath) {
		keys = append(keys, is+dir)
	}
	return keys
}

// PathIndex finds PersistentVolumes by the paths they name through a
// PersistentVolume informer's indexer. It is safe for concurrent use.
type PathIndex struct {
	indexer cache.Indexer
}

// NewPathIndex returns the PathIndex of an indexer, which must have
// VolumePathIndex.
func NewPathIndex(indexer cache.Indexer) *PathIndex {
	return &PathIndex{indexer: indexer}
}

// List returns every PersistentVolume.
func (v *PathIndex) List() ([]*corev1.PersistentVolume, error) {
	return volumesOf(v.indexer.List()), nil
}

// Exists reports whether the PersistentVolume name exists.
func (v *PathIndex) Exists(name string) (bool, error) {
	// PersistentVolumes are cluster-scoped: the name is the key.
	_, exists, err := v.indexer.GetByKey(name)
	if err != nil {
		return false, fmt.Errorf("cannot get PersistentVolume %s: %w", name, err)
	}
	return exists, nil
}

// Overlapping returns the hostPath, local or NFS PersistentVolumes whose path
// is volumePath, lies inside it or contains it: on NFS server server (as
// NFSServer names it), or on the file system of a node when server is
// HostNode(node), which holds that node's volumes and those pinned to no
// node. The server "" stands for the volumes pinned to no node alone.
// volumePath is absolute, in slash form.
func (v *PathIndex) Overlapping(server, volumePath string) ([]*corev1.PersistentVolume, error) {
	places, volumePath, err := target(server, volumePath)
	if err != nil {
		return nil, err
	}
	// A volume has one place and one path, so no two keys find the same
	// volume.
	var pvs []*corev1.PersistentVolume
	for _, p := range places {
		for _, key := range p.overlapKeys(volumePath) {
			objs, err := v.indexer.ByIndex(VolumePathIndex, key)
			if err != nil {
				return nil, fmt.Errorf("cannot look up PersistentVolumes by path: %w", err)
			}
			pvs = append(pvs, volumesOf(objs)...)
		}
	}
	return pvs, nil
}

func volumesOf(objs []any) []*corev1.PersistentVolume {
	pvs := make([]*corev1.PersistentVolume, 0, len(objs))
	for _, obj := range objs {
		if pv, ok := obj.(*corev1.PersistentVolume); ok {
			pvs = append(pvs, pv)
		}
	}
	return pvs
}

// ListedVolumes finds PersistentVolumes like a PathIndex, in what a function
// lists. Each call scans the whole list: it is for tests and for callers
// without an informer.
type ListedVolumes func() ([]*corev1.PersistentVolume, error)

// NewListedVolumes returns the ListedVolumes of a function that lists every
// PersistentVolume.
func NewListedVolumes(list func() ([]*corev1.PersistentVolume, error)) ListedVolumes {
	return ListedVolumes(list)
}

// List returns every PersistentVolume.
func (v ListedVolumes) List() ([]*corev1.PersistentVolume, error) {
	pvs, err := v()
	if err != nil {
		return nil, fmt.Errorf("cannot list PersistentVolumes: %w", err)
	}
	return pvs, nil
}

// Exists reports whether the PersistentVolume name exists.
func (v ListedVolumes) Exists(name string) (bool, error) {
	pvs, err := v.List()
	if err != nil {
		return false, err
	}
	for _, pv := range pvs {
		if pv.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// Overlapping is PathIndex.Overlapping over the listed volumes.
func (v ListedVolumes) Overlapping(server, volumePath string) ([]*corev1.PersistentVolume, error) {
	want, volumePath, err := target(server, volumePath)
	if err != nil {
		return nil, err
	}
	pvs, err := v.List()
	if err != nil {
		return nil, err
	}
	var found []*corev1.PersistentVolume
	for _, pv := range pvs {
		if p, other, ok := location(pv); ok && slices.Contains(want, p) && Overlaps(volumePath, other) {
			found = append(found, pv)
		}
	}
	return found, nil
}
