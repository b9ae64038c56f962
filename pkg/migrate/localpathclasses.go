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
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend"
)

// The bounds of hostPath.storageClasses and of each entry's nodePaths.
const (
	maxClassConfigs   = 8
	maxClassNodePaths = 8
)

// planClassConfigs plans the takeover of local-path's storageClassConfigs:
// each StorageClass it lists has a nodePathMap or a sharedFileSystemPath
// of its own, and the top-level ones are ignored, as local-path ignores
// them there. They become one hostPath backend whose storageClasses lists
// every class with its paths. local-path fails every claim and every
// delete of a class it does not list: such volumes are retained.
func (p *Plan) planClassConfigs(object, name string, config localPathConfig, in *install, patterns []v1alpha1.LocalPathPattern) {
	if len(config.NodePathMap) > 0 || config.SharedFileSystemPath != "" {
		p.Notes = append(p.Notes, "nodePathMap and sharedFileSystemPath beside storageClassConfigs are ignored, as local-path-provisioner ignores them there")
	}
	listed := slices.Sorted(maps.Keys(config.StorageClassConfigs))
	if len(listed) > maxClassConfigs {
		p.refuse(object, "storageClassConfigs lists %d StorageClasses; a ProvisionerConfig gives at most %d their own paths", len(listed), maxClassConfigs)
		return
	}
	refused := len(p.Refusals)
	storages := map[string]localPathStorage{}
	var shared, onNodes []string
	for _, class := range listed {
		if errs := validation.IsDNS1123Subdomain(class); len(errs) > 0 {
			p.refuse(object, "storageClassConfigs lists %q, which names no StorageClass (%s)", class, strings.Join(errs, "; "))
			continue
		}
		var storage localPathStorage
		if err := json.Unmarshal(config.StorageClassConfigs[class], &storage); err != nil {
			p.refuse(object, "cannot read storageClassConfigs of %s: %v", class, err)
			continue
		}
		storages[class] = storage
		if storage.SharedFileSystemPath != "" && len(storage.NodePathMap) == 0 {
			shared = append(shared, class)
		} else {
			onNodes = append(onNodes, class)
		}
	}
	switch {
	case len(p.Refusals) > refused:
		return
	case len(shared) > 0 && len(onNodes) > 0:
		p.refuse(object, "storageClassConfigs gives StorageClasses %s a sharedFileSystemPath and %s a nodePathMap: "+
			"a ProvisionerConfig serves node paths or a shared file system, not both", strings.Join(shared, ", "), strings.Join(onNodes, ", "))
		return
	}
	p.noteUnlisted(in, listed)
	if len(onNodes) == 0 {
		paths := sharedPaths{fallback: storages[listed[0]].SharedFileSystemPath, classes: map[string]string{}}
		for _, class := range listed {
			paths.classes[class] = storages[class].SharedFileSystemPath
		}
		p.planSharedFileSystem(object, name, paths, in, patterns)
		return
	}
	p.planNodeClasses(object, name, listed, storages, in, patterns)
}

// planNodeClasses plans the StorageClasses of storageClassConfigs that each
// have a nodePathMap: the backend's own paths are those of the first class,
// for claims of any class not listed, which local-path failed.
func (p *Plan) planNodeClasses(object, name string, listed []string, storages map[string]localPathStorage, in *install, patterns []v1alpha1.LocalPathPattern) {
	refused := len(p.Refusals)
	bases := map[string]*nodeBases{}
	for _, class := range listed {
		bases[class] = p.nodePaths(fmt.Sprintf("%s, storageClassConfigs of %s", object, class), storages[class])
	}
	classes := in.classesOf(p.OldName)
	affinityKey := p.nodeAffinityKey(classes)
	volumeType := p.volumeType(classes)
	if len(p.Refusals) > refused {
		return
	}
	merged := mergeBases(listed, bases)
	if why := merged.check(); why != "" {
		p.refuse(object, "the nodePathMaps of storageClassConfigs %s", why)
		return
	}
	hp := bases[listed[0]].hostPath(volumeType)
	hp.NodeSelector = merged.selector()
	hp.NodeAffinityKey = affinityKey
	hp.LocalPathPatterns = patterns
	for _, class := range listed {
		own := bases[class].hostPath(volumeType)
		if len(own.NodePaths) > maxClassNodePaths {
			p.refuse(object, "storageClassConfigs of %s gives its nodes %d different sets of paths; a ProvisionerConfig gives a StorageClass at most %d",
				class, len(own.NodePaths), maxClassNodePaths)
			return
		}
		hp.StorageClasses = append(hp.StorageClasses, v1alpha1.HostPathStorageClass{
			StorageClassName: class, Path: own.Path, AdditionalPaths: own.AdditionalPaths, NodePaths: own.NodePaths,
		})
		if bases[class].fallback == nil && (merged.fallback != nil || len(merged.nodes) > len(bases[class].nodes)) {
			p.Notes = append(p.Notes, fmt.Sprintf("claims of StorageClass %s on nodes its nodePathMap does not list, which local-path-provisioner failed, get volumes in %s",
				class, strings.Join(v1alpha1.JoinPaths(own.Path, own.AdditionalPaths), ", ")))
		}
	}
	p.newConfig(name, p.OldName, v1alpha1.BackendSpec{HostPath: hp})
	p.planNodeVolumes(merged, in, listed)
}

// noteUnlisted notes the StorageClasses of the old provisioner that
// storageClassConfigs does not list: local-path failed their claims, and
// provfleet gives them volumes in the paths of the first class listed.
func (p *Plan) noteUnlisted(in *install, listed []string) {
	var unlisted []string
	for _, class := range in.classesOf(p.OldName) {
		if !slices.Contains(listed, class.Name) {
			unlisted = append(unlisted, class.Name)
		}
	}
	if len(unlisted) > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("storageClassConfigs does not list StorageClasses %s, whose claims local-path-provisioner failed: "+
			"provfleet gives them volumes in the paths of %s", strings.Join(unlisted, ", "), listed[0]))
	}
}

// planUnlistedVolume retains a volume of a StorageClass storageClassConfigs
// does not list: local-path's delete of it fails, and its directory stays.
// bases are the node paths served, nil on a shared file system.
func (p *Plan) planUnlistedVolume(bases *nodeBases, pv *corev1.PersistentVolume) {
	want := map[string]string{backend.AnnOnDelete: string(backend.OnDeleteRetain)}
	where := "on the shared file system"
	if bases != nil {
		node := localPathNode(pv)
		if node != "" {
			want[backend.AnnNode] = node
		}
		where = "on node " + node
	}
	volumePath, _ := backend.HostVolumePath(pv)
	what := fmt.Sprintf("retain %s: storageClassConfigs does not list its StorageClass %q, and local-path-provisioner fails its delete", volumePath, pv.Spec.StorageClassName)
	if recorded, ok := pv.Annotations[backend.AnnOnDelete]; ok {
		// An administrator's or an earlier run's decision stands.
		what = fate(pv, backend.OnDeletePolicy(recorded), "", volumePath) + " (recorded already)"
		delete(want, backend.AnnOnDelete)
	}
	p.Volumes = append(p.Volumes, Volume{PV: pv, Fate: where + ": " + what, Record: record(pv, want)})
}

// mergeBases returns the paths each node has of any class listed, as the
// node agents serve them all.
func mergeBases(listed []string, bases map[string]*nodeBases) *nodeBases {
	merged := &nodeBases{paths: map[string][]string{}}
	for _, class := range listed {
		for _, node := range bases[class].nodes {
			if !slices.Contains(merged.nodes, node) {
				merged.nodes = append(merged.nodes, node)
			}
		}
	}
	for _, class := range listed {
		merged.fallback = appendNew(merged.fallback, bases[class].fallback)
		for _, node := range merged.nodes {
			paths, _ := bases[class].of(node)
			merged.paths[node] = appendNew(merged.paths[node], paths)
		}
	}
	return merged
}

// check returns why a node agent could not serve the paths of one of
// the nodes: too many, or overlapping.
func (b *nodeBases) check() string {
	lists := map[string][]string{localPathDefaultNode: b.fallback}
	maps.Copy(lists, b.paths)
	for _, node := range slices.Sorted(maps.Keys(lists)) {
		paths := lists[node]
		if len(paths) > maxNodePaths {
			return fmt.Sprintf("give node %s %d paths; provfleet serves at most %d per node", node, len(paths), maxNodePaths)
		}
		if why := apart(paths); why != "" {
			return fmt.Sprintf("give node %s paths that %s", node, why)
		}
	}
	return ""
}

// selector returns the nodes served: every node when one class has a
// default path, else those listed.
func (b *nodeBases) selector() *v1alpha1.NodeLabelSelector {
	if b.fallback != nil {
		return nil
	}
	return &v1alpha1.NodeLabelSelector{MatchExpressions: []v1alpha1.NodeLabelRequirement{
		{Key: corev1.LabelHostname, Operator: metav1.LabelSelectorOpIn, Values: b.nodes},
	}}
}

// apart returns why distinct paths cannot be the bases of one node: two
// of them overlap, and a volume would lie in both.
func apart(paths []string) string {
	for i, p := range paths {
		for _, earlier := range paths[:i] {
			if backend.Overlaps(earlier, p) {
				return fmt.Sprintf("%s and %s overlap, and a volume would lie in two paths at once", earlier, p)
			}
		}
	}
	return ""
}

// appendNew appends to list the paths it lacks.
func appendNew(list, paths []string) []string {
	for _, p := range paths {
		if !slices.Contains(list, p) {
			list = append(list, p)
		}
	}
	return list
}
