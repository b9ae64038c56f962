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
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/provfleet/provfleet/bench/internal/report"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/backend/hostpath"
	"github.com/provfleet/provfleet/pkg/backend/nfs"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// treeShape is what a tenant leaves in a volume: a chain of depth
// directories, or width files in one directory.
type treeShape struct {
	depth, width int
}

func (s treeShape) String() string {
	if s.depth > 0 {
		return fmt.Sprintf("a chain %d deep", s.depth)
	}
	return fmt.Sprintf("%d files", s.width)
}

// treeBackend is a backend whose volumes scenario 10 deletes: a
// Provisioner, and a way to fill a volume's directory with a tree.
type treeBackend struct {
	name        string
	provisioner interface {
		Provision(context.Context, provisioning.ProvisionOptions) (*corev1.PersistentVolume, provisioning.ProvisioningState, error)
		Delete(context.Context, *corev1.PersistentVolume) error
	}
	fill func(pv *corev1.PersistentVolume, shape treeShape) error
	stop func()
}

// treeUsage is the most a delete held beyond what the process held before.
type treeUsage struct {
	seconds float64
	files   int
	heap    int64
	rss     int64
}

// treeScenario is scenario 10: volumes whose directories hold trees of
// growing depth and width deleted on hostPath and on NFS (an export the
// harness's go-nfs server holds in memory), in the harness's own process,
// which samples its open descriptors and live heap meanwhile: both stay
// flat however deep or wide the tree. No control plane is involved.
func (b *bench) treeScenario(ctx context.Context) error {
	var shapes []treeShape
	for _, depth := range b.cfg.S10Depths {
		shapes = append(shapes, treeShape{depth: depth})
	}
	for _, width := range b.cfg.S10Widths {
		shapes = append(shapes, treeShape{width: width})
	}
	var table strings.Builder
	table.WriteString("Deleting one volume whose directory holds the tree, in the harness's process: the most it held beyond what it held before. " +
		"The NFS server (go-nfs) runs in that process too: the heap of a wide directory on NFS is mostly its listing, " +
		"which go-nfs makes whole and sorts for every READDIR and keeps two of.\n\n")
	table.WriteString("| backend | tree | entries | seconds | open files | live heap (KiB) |\n|---|---|---|---|---|---|\n")
	for _, kind := range []string{"hostpath", "nfs"} {
		for _, shape := range shapes {
			used, err := b.treeRun(ctx, kind, shape)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", kind, shape, err)
			}
			entries := shape.depth + shape.width
			fmt.Fprintf(&table, "| %s | %s | %d | %.1f | %d | %d |\n", kind, shape, entries, used.seconds, used.files, used.heap>>10)
			b.record(report.Measurement{Result: report.Result{
				Scenario: report.S10TreeDelete + "-" + kind, System: report.SystemProvfleet, Tenants: 1, Claims: entries, Replicas: 1,
				Seconds: used.seconds, RSSMiB: float64(used.rss) / (1 << 20),
			}, Goroutines: -1, Note: fmt.Sprintf("%s: %d more open files, %d KiB more live heap at most", shape, used.files, used.heap>>10)})
		}
	}
	b.run.Sections = append(b.run.Sections, report.Section{Title: "Scenario 10: deleting deep and wide trees", Body: table.String()})
	return nil
}

// treeRun provisions a volume of kind, fills it with shape and deletes it,
// sampling the process meanwhile.
func (b *bench) treeRun(ctx context.Context, kind string, shape treeShape) (treeUsage, error) {
	dir := filepath.Join(b.cfg.Work, "trees", strconv.Itoa(b.nextSeq()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return treeUsage{}, fmt.Errorf("cannot create the scenario's folder: %w", err)
	}
	backend, err := newTreeBackend(ctx, kind, dir)
	if err != nil {
		return treeUsage{}, err
	}
	defer backend.stop()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "tree", UID: types.UID("tree-" + strconv.Itoa(b.nextSeq()))},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}
	pv, _, err := backend.provisioner.Provision(ctx, provisioning.ProvisionOptions{StorageClass: class, PVName: "pvc-" + string(claim.UID), PVC: claim})
	if err != nil {
		return treeUsage{}, fmt.Errorf("cannot provision: %w", err)
	}
	if err := backend.fill(pv, shape); err != nil {
		return treeUsage{}, fmt.Errorf("cannot build the tree: %w", err)
	}
	return sampleWhile(func() error { return backend.provisioner.Delete(ctx, pv) })
}

// newTreeBackend returns a backend of kind keeping its volumes in dir.
func newTreeBackend(ctx context.Context, kind, dir string) (*treeBackend, error) {
	if kind == "hostpath" {
		p, err := hostpath.New(hostpath.Config{Path: filepath.Join(dir, "volumes"), HostPathRoot: dir, NodeName: "bench-node"}, hostpath.Options{})
		if err != nil {
			return nil, err
		}
		fill := func(pv *corev1.PersistentVolume, shape treeShape) error {
			return fillHostTree(pv.Spec.Local.Path, shape)
		}
		return &treeBackend{name: kind, provisioner: p, fill: fill, stop: func() {}}, nil
	}
	memory := nfsserver.NewMemory()
	server, err := nfsserver.Start(ctx, nfsserver.Options{Memory: memory, Path: nfsExportPath})
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(server.Addr())
	p, err := nfs.New(nfs.Config{Server: host, Port: server.Port(), Path: nfsExportPath}, nfs.Options{})
	if err != nil {
		return nil, errors.Join(err, server.Stop())
	}
	fill := func(pv *corev1.PersistentVolume, shape treeShape) error {
		volume := strings.TrimPrefix(pv.Spec.NFS.Path, nfsExportPath+"/")
		if shape.depth > 0 {
			return memory.MakeChain(volume, "level", shape.depth, "leaf")
		}
		return memory.MakeFiles(volume, "file-", shape.width)
	}
	stop := func() {
		p.Close()
		_ = server.Stop()
	}
	return &treeBackend{name: kind, provisioner: p, fill: fill, stop: stop}, nil
}

// fillHostTree builds shape in the host directory dir, a directory at a
// time: a deep chain's path is longer than any call by path takes.
func fillHostTree(dir string, shape treeShape) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	for i := range shape.width {
		f, err := root.Create("file-" + strconv.Itoa(i))
		if err != nil {
			root.Close()
			return err
		}
		f.Close()
	}
	for range shape.depth {
		if err := root.Mkdir("level", 0o755); err != nil {
			root.Close()
			return err
		}
		next, err := root.OpenRoot("level")
		root.Close()
		if err != nil {
			return err
		}
		root = next
	}
	return root.Close()
}

// sampleWhile runs do, sampling the process's open descriptors, live heap
// and resident memory until it returns.
func sampleWhile(do func() error) (treeUsage, error) {
	runtime.GC()
	before := sampleProcess()
	stop := make(chan struct{})
	peak := make(chan treeUsage)
	go func() {
		var most treeUsage
		for {
			now := sampleProcess()
			most.files = max(most.files, now.files-before.files)
			most.heap = max(most.heap, now.heap-before.heap)
			most.rss = max(most.rss, now.rss)
			select {
			case <-stop:
				peak <- most
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	start := time.Now()
	err := do()
	seconds := time.Since(start).Seconds()
	close(stop)
	most := <-peak
	most.seconds = seconds
	return most, err
}

// sampleProcess counts the open descriptors in /proc/self/fd and reads the
// live heap and the resident memory.
func sampleProcess() treeUsage {
	var u treeUsage
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		u.files = len(fds)
	}
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(samples)
	u.heap = int64(samples[0].Value.Uint64()) //nolint:gosec // a heap fits
	if status, err := os.ReadFile("/proc/self/statm"); err == nil {
		if fields := strings.Fields(string(status)); len(fields) > 1 {
			pages, _ := strconv.ParseInt(fields[1], 10, 64)
			u.rss = pages * int64(os.Getpagesize())
		}
	}
	return u
}
