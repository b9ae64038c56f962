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
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// EventCloneSourceNotServed is the reason of the Event of a clone that no
// served node can make: only the agent of its source's node reads the
// source.
const EventCloneSourceNotServed = "CloneSourceNotServed"

// cloneSourceNode returns the node of the volume of the claim that claim
// clones, found with claimOf and volumeOf, and whether it clones one. A
// source in another namespace is no clone here: the controller refuses it.
func cloneSourceNode(claim *corev1.PersistentVolumeClaim, claimOf func(namespace, name string) *corev1.PersistentVolumeClaim,
	volumeOf func(name string) *corev1.PersistentVolume) (string, bool, error) {
	name := provisioning.CloneSourceName(claim)
	if name == "" {
		return "", false, nil
	}
	source := claimOf(claim.Namespace, name)
	if source == nil || source.Spec.VolumeName == "" {
		return "", true, fmt.Errorf("the claim to clone, %s, is not bound to a volume yet", name)
	}
	volume := volumeOf(source.Spec.VolumeName)
	if volume == nil {
		return "", true, fmt.Errorf("the volume of the claim to clone, %s, is not known yet", name)
	}
	node := backend.VolumeNode(volume)
	if node == "" {
		return "", true, fmt.Errorf("the volume of the claim to clone, %s, is on no node", name)
	}
	return node, true, nil
}

// clonePlaces narrows allowed, the nodes claim may go to, to the node of
// its source's volume when it is a clone: only that node's agent reads the
// source. A clone that no node allowed can make waits, with a Warning
// Event saying why, and false.
func (c *Coordinator) clonePlaces(t *coordTerm, claim *corev1.PersistentVolumeClaim, allowed map[string]*nodeCandidate) (map[string]*nodeCandidate, bool) {
	node, clones, err := cloneSourceNode(claim, c.claimOf, c.volumeOf)
	if !clones {
		return allowed, true
	}
	n, ok := allowed[node]
	if err == nil && !ok {
		err = fmt.Errorf("the volume of the claim to clone is on node %s, which this provisioner does not serve now", node)
	}
	if err != nil {
		c.warnOnce(t, claim, EventCloneSourceNotServed, errors.Join(err, errors.New("a clone is made on its source's node")).Error())
		return nil, false
	}
	return map[string]*nodeCandidate{node: n}, true
}

func (c *Coordinator) claimOf(namespace, name string) *corev1.PersistentVolumeClaim {
	obj, exists, err := c.informers.Claims.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil
	}
	claim, _ := obj.(*corev1.PersistentVolumeClaim)
	return claim
}

func (c *Coordinator) volumeOf(name string) *corev1.PersistentVolume {
	obj, exists, err := c.informers.Volumes.GetStore().GetByKey(name)
	if err != nil || !exists {
		return nil
	}
	volume, _ := obj.(*corev1.PersistentVolume)
	return volume
}
