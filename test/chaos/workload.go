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

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// provisioner is one ProvisionerConfig of the run and its StorageClass,
// of the same name.
type provisioner struct {
	name string
	mode storagev1.VolumeBindingMode
	// base is the folder of a hostPath provisioner's volumes on each
	// node's disk; nfs is an NFS provisioner's server.
	base string
	nfs  *nfsServer
	// onDelete is what happens to a deleted volume's directory.
	onDelete v1alpha1.OnDeletePolicy
}

// local says whether the provisioner's volumes are on the nodes' disks.
func (p *provisioner) local() bool { return p.nfs == nil }

// provisioners are the run's: hostPath volumes on the three nodes, whose
// node the scheduler picks (WaitForFirstConsumer) or the manager places
// (Immediate), and NFS volumes of both binding modes, one archiving what
// it deletes.
func (c *cluster) provisioners(ctx context.Context) ([]*provisioner, error) {
	immediate, err := c.startNFS(ctx, "nfs-immediate", c.opts.Seed)
	if err != nil {
		return nil, err
	}
	wffc, err := c.startNFS(ctx, "nfs-wffc", c.opts.Seed+1)
	if err != nil {
		return nil, err
	}
	return []*provisioner{
		{name: "local-wffc", mode: storagev1.VolumeBindingWaitForFirstConsumer, base: "local", onDelete: v1alpha1.OnDeleteDelete},
		{name: "local-immediate", mode: storagev1.VolumeBindingImmediate, base: "placed", onDelete: v1alpha1.OnDeleteDelete},
		{name: "nfs-immediate", mode: storagev1.VolumeBindingImmediate, nfs: immediate, onDelete: v1alpha1.OnDeleteDelete},
		{name: "nfs-wffc", mode: storagev1.VolumeBindingWaitForFirstConsumer, nfs: wffc, onDelete: v1alpha1.OnDeleteArchive},
	}, nil
}

// spec is the ProvisionerConfig of p.
func (c *cluster) spec(p *provisioner) *v1alpha1.ProvisionerConfig {
	pc := &v1alpha1.ProvisionerConfig{ObjectMeta: metav1.ObjectMeta{Name: p.name}}
	pc.Spec.ProvisionerName = v1alpha1.ProvisionerName("chaos.provfleet.io/" + p.name)
	pc.Spec.Workers = 2
	pc.Spec.LeaderElection = v1alpha1.LeaderElectionSpec{
		LeaseDuration: &metav1.Duration{Duration: leaseDuration},
		RenewDeadline: &metav1.Duration{Duration: renewDeadline},
		RetryPeriod:   &metav1.Duration{Duration: retryPeriod},
	}
	// Every claim is retried until it is made, and every volume until it
	// is deleted, quickly: the run ends converged or failed.
	pc.Spec.Retry = v1alpha1.RetrySpec{
		ProvisionFailureThreshold: ptr.To[int32](0),
		DeleteFailureThreshold:    ptr.To[int32](0),
		InitialDelay:              &metav1.Duration{Duration: 500 * time.Millisecond},
		MaxDelay:                  &metav1.Duration{Duration: 5 * time.Second},
	}
	if p.local() {
		hp := &v1alpha1.HostPathBackend{
			// No node falls back on it: each has its own path.
			Path:       v1alpha1.AbsolutePath(filepath.Join(c.opts.WorkDir, "nowhere", p.name)),
			VolumeType: v1alpha1.HostPathVolumeHostPath,
			OnDelete:   p.onDelete,
		}
		for _, node := range nodeNames {
			hp.NodePaths = append(hp.NodePaths, v1alpha1.NodePath{Nodes: []string{node}, Path: v1alpha1.AbsolutePath(filepath.Join(c.disk(node), p.base))})
		}
		pc.Spec.Backend.HostPath = hp
		return pc
	}
	host, port := p.nfs.hostPort()
	pc.Spec.Backend.NFS = &v1alpha1.NFSBackend{Server: host, Port: port, Path: exportPath, OnDelete: p.onDelete}
	return pc
}

// create makes p's ProvisionerConfig and StorageClass.
func (c *cluster) create(ctx context.Context, p *provisioner) error {
	if _, err := c.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Create(ctx, c.spec(p), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cannot create ProvisionerConfig %s: %w", p.name, err)
	}
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: p.name},
		Provisioner:       "chaos.provfleet.io/" + p.name,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(p.mode),
	}
	if _, err := c.kube.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create StorageClass %s: %w", p.name, err)
	}
	return nil
}

// tenants are the namespaces claims are made in.
var tenants = []string{"tenant-a", "tenant-b"}

// claim is one claim the run made.
type claim struct {
	namespace, name string
	provisioner     *provisioner
	uid             types.UID
	// deleteAt is when the run deletes it; zero: it lives to the end.
	deleteAt time.Time
	deleted  bool
}

// workload makes claims and deletes about half of them again.
type workload struct {
	c            *cluster
	provisioners []*provisioner
	rng          *rand.Rand

	mu       sync.Mutex
	claims   []*claim
	failures int // creations and deletions the admin's client retried
}

func newWorkload(c *cluster, provisioners []*provisioner) (*workload, error) {
	w := &workload{c: c, provisioners: provisioners, rng: rand.New(rand.NewPCG(c.opts.Seed, 0x636c61696d73))} //nolint:gosec // a replayable workload, no secret
	for _, ns := range tenants {
		if _, err := c.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("cannot create namespace %s: %w", ns, err)
		}
	}
	return w, nil
}

// run makes claims at the run's rate and deletes those due, until ctx
// ends.
func (w *workload) run(ctx context.Context) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / w.c.opts.ClaimsPerSecond))
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.make(ctx, n)
		w.deleteDue(ctx)
	}
}

// make creates the n-th claim: of a provisioner and tenant drawn at
// random, on a node drawn among those present when its class waits for a
// consumer, as the scheduler would pick one for its Pod.
func (w *workload) make(ctx context.Context, n int) {
	w.mu.Lock()
	p := w.provisioners[w.rng.IntN(len(w.provisioners))]
	ns := tenants[w.rng.IntN(len(tenants))]
	cl := &claim{namespace: ns, name: fmt.Sprintf("claim-%05d", n), provisioner: p}
	if w.rng.IntN(2) == 0 {
		cl.deleteAt = time.Now().Add(time.Duration(5+w.rng.IntN(35)) * time.Second)
	}
	pick := w.rng.Float64()
	w.mu.Unlock()

	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: cl.name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(p.name),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}},
		},
	}
	if p.mode == storagev1.VolumeBindingWaitForFirstConsumer {
		nodes := w.c.presentNodes()
		pvc.Annotations = map[string]string{provisioning.AnnSelectedNode: nodes[int(pick*float64(len(nodes)))]}
	}
	created, err := w.retry(ctx, func(ctx context.Context) (*corev1.PersistentVolumeClaim, error) {
		created, err := w.c.kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// An earlier try was carried out and its answer lost.
			return w.c.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, cl.name, metav1.GetOptions{})
		}
		return created, err
	})
	if err != nil {
		return
	}
	cl.uid = created.UID
	w.mu.Lock()
	w.claims = append(w.claims, cl)
	w.mu.Unlock()
}

// deleteDue deletes the claims whose time has come.
func (w *workload) deleteDue(ctx context.Context) {
	now := time.Now()
	w.mu.Lock()
	var due []*claim
	for _, cl := range w.claims {
		if !cl.deleted && !cl.deleteAt.IsZero() && cl.deleteAt.Before(now) {
			due = append(due, cl)
		}
	}
	w.mu.Unlock()
	for _, cl := range due {
		_, err := w.retry(ctx, func(ctx context.Context) (*corev1.PersistentVolumeClaim, error) {
			err := w.c.kube.CoreV1().PersistentVolumeClaims(cl.namespace).Delete(ctx, cl.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cl.uid}})
			if apierrors.IsNotFound(err) {
				err = nil
			}
			return nil, err
		})
		if err == nil {
			w.mu.Lock()
			cl.deleted = true
			w.mu.Unlock()
		}
	}
}

// retry calls do until it succeeds or ctx ends: the admin's client goes
// straight to the apiserver, which a loaded machine may still answer
// slowly.
func (w *workload) retry(ctx context.Context, do func(context.Context) (*corev1.PersistentVolumeClaim, error)) (*corev1.PersistentVolumeClaim, error) {
	for {
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := do(callCtx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return out, err
		}
		w.mu.Lock()
		w.failures++
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// live returns the claims not deleted, and how many were made and deleted.
func (w *workload) live() (live []*claim, made, deleted int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cl := range w.claims {
		if cl.deleted {
			deleted++
		} else {
			live = append(live, cl)
		}
	}
	return live, len(w.claims), deleted
}
