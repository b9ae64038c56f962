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

package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// annStorageProvisioner is what the PV binder sets on a claim it hands to an
// external provisioner; the beta key is still honoured.
const (
	annStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
)

// claimTimes are when the harness first saw a claim reach each stage.
type claimTimes struct {
	uid              string
	annotated, bound time.Time
}

// volumeTimes are when the harness saw a PV appear and go.
type volumeTimes struct {
	created, gone time.Time
}

// tracker timestamps claims and volumes from the harness's own watches.
type tracker struct {
	mu      sync.Mutex
	claims  map[string]*claimTimes // by namespace/name
	volumes map[string]*volumeTimes
	now     func() time.Time
	// cancel and factory end the watches.
	cancel  context.CancelFunc
	factory informers.SharedInformerFactory
}

func newTracker() *tracker {
	return &tracker{claims: map[string]*claimTimes{}, volumes: map[string]*volumeTimes{}, now: time.Now}
}

// start runs the informers until ctx ends or stop, and returns once they
// synced.
func (t *tracker) start(ctx context.Context, client kubernetes.Interface) error {
	ctx, t.cancel = context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	t.factory = factory
	claims := factory.Core().V1().PersistentVolumeClaims().Informer()
	volumes := factory.Core().V1().PersistentVolumes().Informer()
	if _, err := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observeClaim(obj) },
		UpdateFunc: func(_, obj any) { t.observeClaim(obj) },
	}); err != nil {
		return fmt.Errorf("cannot watch claims: %w", err)
	}
	if _, err := volumes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.observeVolume,
		UpdateFunc: func(_, obj any) { t.observeVolume(obj) },
		DeleteFunc: t.observeVolumeDeleted,
	}); err != nil {
		return fmt.Errorf("cannot watch volumes: %w", err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cannot sync the informer of %v", typ)
		}
	}
	return nil
}

// stop ends the informers and waits for them: the apiserver's graceful
// shutdown waits for open watches until its grace period ends.
func (t *tracker) stop() {
	if t.cancel != nil {
		t.cancel()
		t.factory.Shutdown()
	}
}

func (t *tracker) observeClaim(obj any) {
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	key := claim.Namespace + "/" + claim.Name
	c := t.claims[key]
	if c == nil || c.uid != string(claim.UID) {
		c = &claimTimes{uid: string(claim.UID)}
		t.claims[key] = c
	}
	if c.annotated.IsZero() && (claim.Annotations[annStorageProvisioner] != "" || claim.Annotations[annBetaStorageProvisioner] != "") {
		c.annotated = now
		// The two watches deliver independently: a PV seen first proves the
		// claim carried the annotation by then.
		if v := t.volumes["pvc-"+c.uid]; v != nil && v.created.Before(now) {
			c.annotated = v.created
		}
	}
	if c.bound.IsZero() && claim.Status.Phase == corev1.ClaimBound {
		c.bound = now
	}
}

// observeVolume records when a PV was first seen; a PV seen again after
// its deletion is a new one of the same name.
func (t *tracker) observeVolume(obj any) {
	t.withVolume(obj, func(name string, now time.Time) {
		if v := t.volumes[name]; v == nil || !v.gone.IsZero() {
			t.volumes[name] = &volumeTimes{created: now}
		}
	})
}

// observeVolumeDeleted records when a PV went; one never seen before counts
// as created then too.
func (t *tracker) observeVolumeDeleted(obj any) {
	t.withVolume(obj, func(name string, now time.Time) {
		v := t.volumes[name]
		if v == nil {
			v = &volumeTimes{created: now}
			t.volumes[name] = v
		}
		v.gone = now
	})
}

// withVolume calls observe under the lock with the name of the PV obj, or
// of the PV a deletion tombstone holds, and the time it is observed.
func (t *tracker) withVolume(obj any, observe func(name string, now time.Time)) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	observe(pv.Name, now)
}

// claimVolume returns the timestamps of a claim and of its PV, named
// pvc-<claim UID> by both provisioners; ok is false for an unseen claim.
func (t *tracker) claimVolume(namespace, name string) (claimTimes, volumeTimes, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.claims[namespace+"/"+name]
	if c == nil {
		return claimTimes{}, volumeTimes{}, false
	}
	var v volumeTimes
	if pv := t.volumes["pvc-"+c.uid]; pv != nil {
		v = *pv
	}
	return *c, v, true
}

// volume returns the timestamps of a PV by name.
func (t *tracker) volume(name string) volumeTimes {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v := t.volumes[name]; v != nil {
		return *v
	}
	return volumeTimes{}
}
