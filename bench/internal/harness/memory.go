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
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/bench/internal/report"
)

// memoryLabel marks the claims and PersistentVolumes of scenario 8, so they
// go in one request each.
const memoryLabel = "bench.provfleet.io/memory"

// pollBoundInterval spaces the lists of scenario 8's claims while the binder
// binds them: each is thousands of objects.
const pollBoundInterval = 2 * time.Second

// memoryScenario is scenario 8: one idle provisioner of each system in a
// cluster that holds each of S8Counts claims in turn, and as many
// PersistentVolumes bound to them, made by the harness and served by none:
// what caching the cluster's claims and volumes costs a process, and how
// long it takes to lead.
func (b *bench) memoryScenario(ctx context.Context) error {
	ns, err := b.namespace(ctx)
	if err != nil {
		return err
	}
	defer b.deleteBoundPairs(ctx, ns)
	made := 0
	for _, n := range slices.Sorted(slices.Values(b.cfg.S8Counts)) {
		if err := b.createBoundPairs(ctx, ns, made, n); err != nil {
			return err
		}
		made = max(made, n)
		if err := b.waitAllBound(ctx, ns, n); err != nil {
			return err
		}
		var runs []func() error
		for _, sys := range b.systems() {
			runs = append(runs, func() error {
				if err := b.memoryRun(ctx, sys, n); err != nil {
					return fmt.Errorf("%s next to %d claims and PVs: %w", sys.name(), n, err)
				}
				return nil
			})
		}
		if err := b.together(runs...); err != nil {
			return err
		}
	}
	return nil
}

// createBoundPairs creates the claims from to to-1 in ns, each with the
// last-applied annotation kubectl apply leaves, and as many
// PersistentVolumes, each naming its claim, which the PV binder binds.
func (b *bench) createBoundPairs(ctx context.Context, ns string, from, to int) error {
	b.logf("creating %d claims and PVs", to-from)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := from; i < to; i++ {
		g.Go(func() error {
			claim, err := b.createBoundClaim(gctx, ns, fmt.Sprintf("memory-%d", i), fmt.Sprintf("%s-memory-%d", ns, i))
			if err != nil {
				return err
			}
			if _, err := b.kube.CoreV1().PersistentVolumes().Create(gctx, boundVolume(claim), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("cannot create PV %s: %w", claim.Spec.VolumeName, err)
			}
			return nil
		})
	}
	return g.Wait()
}

func (b *bench) createBoundClaim(ctx context.Context, ns, name, volume string) (*corev1.PersistentVolumeClaim, error) {
	claim := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{memoryLabel: ns}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(""),
			VolumeName:       volume,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			},
		},
	}
	applied, err := json.Marshal(claim)
	if err != nil {
		return nil, fmt.Errorf("cannot encode claim %s: %w", name, err)
	}
	claim.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(applied)}
	created, err := b.kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot create claim %s: %w", name, err)
	}
	return created, nil
}

// boundVolume is a PersistentVolume made by hand for claim, never mounted.
func boundVolume(claim *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: claim.Spec.VolumeName, Labels: claim.Labels},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/nonexistent/" + claim.Spec.VolumeName},
			},
			ClaimRef: &corev1.ObjectReference{
				APIVersion: "v1", Kind: "PersistentVolumeClaim",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID,
			},
		},
	}
}

// waitAllBound waits until the binder bound every claim of ns, so the
// systems start on a cluster at rest.
func (b *bench) waitAllBound(ctx context.Context, ns string, n int) error {
	return b.pollEvery(ctx, pollBoundInterval, fmt.Sprintf("%d claims Bound", n), func(ctx context.Context) (bool, error) {
		claims, err := b.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound := 0
		for _, c := range claims.Items {
			if c.Status.Phase == corev1.ClaimBound {
				bound++
			}
		}
		return bound == n, nil
	})
}

// deleteBoundPairs deletes the claims and PersistentVolumes of ns, one
// request each. A request that times out is only logged: the apiserver goes
// on deleting, and scenario 8 runs last.
func (b *bench) deleteBoundPairs(ctx context.Context, ns string) {
	selector := metav1.ListOptions{LabelSelector: memoryLabel + "=" + ns}
	if err := b.kube.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, selector); err != nil {
		b.logf("cannot delete the claims of %s: %v", ns, err)
	}
	if err := b.kube.CoreV1().PersistentVolumes().DeleteCollection(ctx, metav1.DeleteOptions{}, selector); err != nil {
		b.logf("cannot delete the PVs of %s: %v", ns, err)
	}
}

// memoryRun starts one idle provisioner of sys next to claims claims and
// PVs, times its start until it leads, and measures it as scenario 3 does,
// after S3Settle and over S3Window.
func (b *bench) memoryRun(ctx context.Context, sys system, claims int) error {
	baseline, err := b.snapshot(ctx)
	if err != nil {
		return err
	}
	defer sys.stop(ctx)
	tenants := b.tenants(sys.name(), 1)
	start := time.Now()
	note, err := b.startIdle(ctx, sys, tenants)
	if err != nil {
		return err
	}
	// Ready: the manager's provisioner Ready with a leader, once the
	// process's caches synced; the peer's controller started, which it
	// logs once it holds the Lease and its caches synced.
	if _, err := b.leader(ctx, sys, tenants[0]); err != nil {
		return err
	}
	ready := time.Since(start)
	time.Sleep(b.cfg.S3Settle)
	w, err := b.open(ctx, sys.pids())
	if err != nil {
		return err
	}
	time.Sleep(b.cfg.S3Window)
	m := report.Measurement{
		Result: report.Result{Scenario: report.S8Memory, System: sys.name(), Tenants: 1, Claims: claims, Replicas: 1},
		Note:   note,
	}
	if err := b.closeIdle(ctx, sys, w, baseline, &m); err != nil {
		return err
	}
	m.Seconds = ready.Seconds()
	// The peak is the initial list of every claim and PV, held at once.
	u := total(usage(sys.pids()))
	m.Note = strings.TrimPrefix(fmt.Sprintf("%s; peak RSS %.1f MiB", m.Note, mib(u.PeakRSS)), "; ")
	if heap := b.liveHeap(ctx, sys.pids()[0]); heap != "" {
		m.Note += "; " + heap
	}
	b.record(m)
	return nil
}

// liveHeap reads the Go heap of pid after a collection from its profiling
// endpoint: what the process holds, apart from what the runtime keeps for
// the next collections. Empty for a process without one (the peer).
func (b *bench) liveHeap(ctx context.Context, pid int) string {
	b.mu.Lock()
	addr, ok := b.pprofAddrs[pid]
	b.mu.Unlock()
	if !ok {
		return ""
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Sprintf("cannot read the heap profile: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Sprintf("cannot read the heap profile: %v", err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
				return fmt.Sprintf("live Go heap after a collection: %.1f MiB", mib(n))
			}
		}
	}
	return "no HeapAlloc in the heap profile"
}
