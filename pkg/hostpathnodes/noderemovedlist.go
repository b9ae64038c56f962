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

package hostpathnodes

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// The volumes the manager deleted while their node was removed are listed
// in a ConfigMap per node, in the agents' namespace, that only the manager
// writes: an agent may read its own, never write it, so no node can make
// another node's agent delete data. The agent says which it released in
// its own Lease (AnnReleasedVolumes); the manager then drops them.
const (
	// AnnRemovedListNode names, on a removal list, the node it is of.
	AnnRemovedListNode = "provfleet.io/node"
	// LabelRemovedList marks the removal lists, so that a ConfigMap of
	// someone else in the namespace is never taken for one.
	LabelRemovedList = "provfleet.io/removed-volumes"
	// AnnReleasedVolumes holds, on a node Lease, in JSON (a releasedVolumes),
	// the volumes of the node's removal list whose directories its agent
	// released. The agent writes it with its renewals.
	AnnReleasedVolumes = "provfleet.io/released-volumes"
)

// RemovedListName is the name of the ConfigMap that lists the removed
// volumes of node.
func RemovedListName(node string) string {
	return provisioning.LeaseName("provfleet-removed-" + node)
}

// removedVolume is one PersistentVolume the manager deleted while its node
// was removed, with the onDelete policy for its directory, decided from the
// volume when it was deleted (backend.RemovedOnDelete).
type removedVolume struct {
	Name string `json:"name"`
	// UID tells apart two volumes of one name; empty for one listed
	// before UIDs were.
	UID      types.UID              `json:"uid,omitempty"`
	OnDelete backend.OnDeletePolicy `json:"onDelete"`
}

// volumeID names one PersistentVolume, past or present, uniquely.
type volumeID struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid,omitempty"`
}

func (r removedVolume) id() volumeID { return volumeID{Name: r.Name, UID: r.UID} }

// removedList is a removal list: by ProvisionerConfig name, its removed
// volumes.
type removedList map[string][]removedVolume

// releasedVolumes are, by ProvisionerConfig name, the volumes whose
// directories a node agent released.
type releasedVolumes map[string][]volumeID

// readRemovedList returns what the removal list cm holds; nil holds nothing.
func readRemovedList(cm *corev1.ConfigMap) (removedList, error) {
	list := removedList{}
	if cm == nil {
		return list, nil
	}
	for name, data := range cm.Data {
		var volumes []removedVolume
		if err := json.Unmarshal([]byte(data), &volumes); err != nil {
			return nil, fmt.Errorf("cannot read the removed volumes of %s in ConfigMap %s/%s: %w", name, cm.Namespace, cm.Name, err)
		}
		list[name] = volumes
	}
	return list, nil
}

// encode returns the data of the ConfigMap of list, each entry sorted by
// name so that equal lists encode alike.
func (list removedList) encode() (map[string]string, error) {
	data := make(map[string]string, len(list))
	for name, volumes := range list {
		if len(volumes) == 0 {
			continue
		}
		sorted := slices.SortedFunc(slices.Values(volumes), func(a, b removedVolume) int {
			return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
		})
		encoded, err := json.Marshal(sorted)
		if err != nil {
			return nil, fmt.Errorf("cannot encode the removed volumes of %s: %w", name, err)
		}
		data[name] = string(encoded)
	}
	return data, nil
}

// add lists volumes as removed of the ProvisionerConfig name: a volume of a
// name listed already takes its place, as it may have changed since.
func (list removedList) add(name string, volumes []removedVolume) {
	kept := slices.DeleteFunc(slices.Clone(list[name]), func(listed removedVolume) bool {
		return slices.ContainsFunc(volumes, func(v removedVolume) bool { return v.Name == listed.Name })
	})
	list[name] = append(kept, volumes...)
}

// drop takes off list the volumes released lists, and reports whether that
// changed anything.
func (list removedList) drop(released releasedVolumes) bool {
	changed := false
	for name, ids := range released {
		volumes, ok := list[name]
		if !ok {
			continue
		}
		left := slices.DeleteFunc(slices.Clone(volumes), func(v removedVolume) bool { return slices.Contains(ids, v.id()) })
		if len(left) == len(volumes) {
			continue
		}
		changed = true
		if len(left) == 0 {
			delete(list, name)
		} else {
			list[name] = left
		}
	}
	return changed
}

// pending reports whether list still names one of released: the manager
// has not taken in all that the agent released.
func (list removedList) pending(released releasedVolumes) bool {
	for name, ids := range released {
		for _, v := range list[name] {
			if slices.Contains(ids, v.id()) {
				return true
			}
		}
	}
	return false
}

// newRemovedList returns the empty ConfigMap of the removal list of node in
// namespace.
func newRemovedList(namespace, node string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace:   namespace,
		Name:        RemovedListName(node),
		Labels:      map[string]string{LabelRemovedList: "true"},
		Annotations: map[string]string{AnnRemovedListNode: node},
	}}
}

// readReleased returns the volumes a node Lease says its agent released.
func readReleased(lease *coordinationv1.Lease) (releasedVolumes, error) {
	if lease == nil {
		return nil, nil
	}
	return readAnnotation[releasedVolumes](lease, AnnReleasedVolumes)
}

// readLegacyRemoved returns the removed volumes a node Lease lists in the
// annotation the manager wrote before the removal lists: by
// ProvisionerConfig, the names of the volumes and their policies.
func readLegacyRemoved(lease *coordinationv1.Lease) (removedList, error) {
	legacy, err := readAnnotation[map[string]map[string]backend.OnDeletePolicy](lease, AnnRemovedVolumes)
	if err != nil || len(legacy) == 0 {
		return nil, err
	}
	list := removedList{}
	for name, policies := range legacy {
		for _, pv := range slices.Sorted(maps.Keys(policies)) {
			list[name] = append(list[name], removedVolume{Name: pv, OnDelete: policies[pv]})
		}
	}
	return list, nil
}
