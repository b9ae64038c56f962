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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/provfleet/provfleet/internal/eventrouter"
	"github.com/provfleet/provfleet/internal/leaderelection"
)

// Router hands the events of the shared claim, volume and Lease informers to
// the controllers they concern, with an eventrouter.Router per informer: a
// claim goes to the provisioner it asks for and to those whose intent
// finalizer it carries, a volume to the provisioner that provisioned it, a
// Lease to its elector. It has one event handler on each informer, only
// while some controller subscribes: a fleet of hundreds of controllers costs
// one handler (two goroutines and a buffer) per informer instead of one per
// controller, and an event is seen only by the controllers it names.
//
// The owner of the informers makes one Router for them and hands it to every
// controller in SharedInformers.Router.
type Router struct {
	claims, volumes *eventrouter.Router[routeKey]
	leases          *eventrouter.Router[types.NamespacedName] // nil without a Lease informer
	// sightings are those of FollowLeases; nil until then.
	sightings *leaderelection.Sightings
}

// FollowLeases makes r note when each Lease's record was first seen, from
// now on, so that a controller started later judges the expiry of its
// Lease from then (leaderelection.Sightings): a fleet that starts the
// controller of a provisioner only when it takes it over from a replica
// that died waits out the rest of its Lease, not a whole duration more. Call
// it once, before the Lease informer starts; its handler stays as long as
// the informer.
func (r *Router) FollowLeases() error {
	if r.leases == nil {
		return errors.New("cannot follow Leases without a Lease informer")
	}
	sightings, err := leaderelection.NewSightings(r.leases.Informer(), nil)
	if err != nil {
		return err
	}
	r.sightings = sightings
	return nil
}

// NewRouter returns the Router of the given informers; leases may be nil. It
// adds no handler before a controller subscribes.
func NewRouter(claims, volumes, leases cache.SharedIndexInformer) *Router {
	r := &Router{claims: eventrouter.New(claims, claimKeys), volumes: eventrouter.New(volumes, volumeKeys)}
	if leases != nil {
		r.leases = leaderelection.NewLeaseRouter(leases)
	}
	return r
}

// serves reports whether r routes the events of inf.
func (r *Router) serves(inf SharedInformers) bool {
	leases := r.leases == nil && inf.Leases == nil || r.leases != nil && r.leases.Informer() == inf.Leases
	return r.claims.Informer() == inf.Claims && r.volumes.Informer() == inf.Volumes && leases
}

// routeKey is something a claim or volume names: a provisioner or a claim
// finalizer.
type routeKey struct {
	finalizer bool
	name      string
}

func provisionerKey(name string) routeKey { return routeKey{name: name} }
func finalizerKey(name string) routeKey   { return routeKey{finalizer: true, name: name} }

// claimKeys names the provisioner a claim asks for and its finalizers, among
// which is the intent finalizer of any provisioner that may be creating a
// volume for it.
func claimKeys(obj any, yield func(routeKey)) {
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if name := StorageProvisioner(claim); name != "" {
		yield(provisionerKey(name))
	}
	for _, f := range claim.Finalizers {
		yield(finalizerKey(f))
	}
}

// volumeKeys names the provisioner that provisioned a volume.
func volumeKeys(obj any, yield func(routeKey)) {
	volume, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return
	}
	if name := volume.Annotations[AnnDynamicallyProvisioned]; name != "" {
		yield(provisionerKey(name))
	}
}
