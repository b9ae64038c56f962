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
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/bench/internal/report"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// errCloneRefused is a clone claim its provisioner refused for its data
// source: a build without clones.
var errCloneRefused = errors.New("not supported by this build")

// refusalOfDataSource is what the provision controller's Event says of a
// data source its backend cannot fill a volume from.
const refusalOfDataSource = "cannot fill a volume from data source"

// cloneTree is the tree scenario 11 copies: its folder, what it holds,
// its digest to check a clone against, and how long cp -a took.
type cloneTree struct {
	dir       string
	st        treeStats
	digest    map[string]string
	cpSeconds float64
}

// cloneResult is one way of copying the tree and how long it took.
type cloneResult struct {
	what    string
	seconds float64
}

// cloneScenario is scenario 11: a volume whose directory holds a tree of
// mixed file sizes cloned by a claim whose dataSource is its claim, on
// hostPath and on NFS (through the manager's NFS client, against the
// harness's go-nfs server), timed from the clone claim's creation until it
// is Bound and its PV exists, next to `cp -a` of the same tree on the same
// file system. A build that refuses clones is reported as such.
func (b *bench) cloneScenario(ctx context.Context) error {
	work := filepath.Join(b.cfg.Work, "clone", strconv.Itoa(b.nextSeq()))
	tree := filepath.Join(work, "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return fmt.Errorf("cannot create the scenario's folder: %w", err)
	}
	defer func() {
		if err := os.RemoveAll(work); err != nil {
			b.logf("%v", err)
		}
	}()
	st, err := buildCloneTree(tree, int64(b.cfg.S11Bytes))
	if err != nil {
		return err
	}
	b.logf("clone tree of %d MiB: %d files, %d directories, %d symlinks", st.bytes>>20, st.files, st.dirs, st.symlinks)
	want, err := treeDigest(tree)
	if err != nil {
		return err
	}
	cp, err := timeCopy(ctx, tree, filepath.Join(work, "cp"))
	if err != nil {
		return err
	}
	results := []cloneResult{{what: "cp -a", seconds: cp}}
	for _, kind := range []string{"hostpath", "nfs"} {
		seconds, err := b.cloneRun(ctx, kind, cloneTree{dir: tree, st: st, digest: want, cpSeconds: cp})
		if errors.Is(err, errCloneRefused) {
			b.logf("scenario 11: %v", err)
			b.addSection(report.Section{Title: "Scenario 11: cloning a volume", Body: "Not run: " + err.Error() + "."})
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		results = append(results, cloneResult{what: kind + " clone", seconds: seconds})
	}
	b.addSection(cloneSection(st, results))
	return nil
}

// timeCopy times `cp -a` of tree to dst, which it removes after.
func timeCopy(ctx context.Context, tree, dst string) (float64, error) {
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "cp", "-a", tree, dst).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("cannot cp -a the tree: %w: %s", err, out)
	}
	seconds := time.Since(start).Seconds()
	if err := os.RemoveAll(dst); err != nil {
		return 0, fmt.Errorf("cannot remove the copy: %w", err)
	}
	return seconds, nil
}

// megabytesPerSecond is a copy's throughput in MB (10^6 bytes) a second.
func megabytesPerSecond(bytes int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / seconds
}

func cloneSection(st treeStats, results []cloneResult) report.Section {
	var body strings.Builder
	fmt.Fprintf(&body, "A tree of %.1f MB (%d files of 1 KiB to 256 MiB, %d directories up to 3 deep, %d symlinks) copied on one file system: "+
		"by `cp -a`, and by a clone claim (`spec.dataSource` its source's claim) from its creation until it is Bound and its PV exists. "+
		"The tree was just written and copied, so the page cache holds it for each; the NFS server (go-nfs) runs in the harness's process.\n\n",
		float64(st.bytes)/1e6, st.files, st.dirs, st.symlinks)
	body.WriteString("| copy | seconds | MB/s | speed against cp -a |\n|---|--:|--:|--:|\n")
	for _, r := range results {
		fmt.Fprintf(&body, "| %s | %.2f | %.1f | %.2f |\n", r.what, r.seconds, megabytesPerSecond(st.bytes, r.seconds), results[0].seconds/r.seconds)
	}
	return report.Section{Title: "Scenario 11: cloning a volume", Body: body.String()}
}

// cloneTarget is where scenario 11 runs on one backend: a provfleet system
// and the host directory of a volume.
type cloneTarget struct {
	sys       system
	volumeDir func(pv *corev1.PersistentVolume) string
	stop      func()
}

// newCloneTarget is provfleet on hostPath, or on an NFS export the harness
// serves from a folder of its own.
func (b *bench) newCloneTarget(ctx context.Context, kind string) (*cloneTarget, error) {
	if kind == "hostpath" {
		return &cloneTarget{
			sys:       &provfleetSystem{b: b},
			volumeDir: func(pv *corev1.PersistentVolume) string { return pv.Spec.HostPath.Path },
			stop:      func() {},
		}, nil
	}
	dir := filepath.Join(b.cfg.Work, "nfs", strconv.Itoa(b.nextSeq()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the NFS export's folder: %w", err)
	}
	server, err := nfsserver.Start(ctx, nfsserver.Options{Dir: dir, Path: nfsExportPath})
	if err != nil {
		return nil, err
	}
	stop := func() {
		if err := server.Stop(); err != nil {
			b.logf("%v", err)
		}
	}
	sys, err := newNFSSystem(b, server, dir)
	if err != nil {
		stop()
		return nil, err
	}
	return &cloneTarget{
		sys: sys,
		volumeDir: func(pv *corev1.PersistentVolume) string {
			return filepath.Join(dir, strings.TrimPrefix(pv.Spec.NFS.Path, nfsExportPath))
		},
		stop: stop,
	}, nil
}

// cloneRun clones a volume holding the tree on kind and returns how long
// the clone took, after checking it holds the tree. The tree is moved into
// the source volume and back, never copied.
func (b *bench) cloneRun(ctx context.Context, kind string, tree cloneTree) (float64, error) {
	target, err := b.newCloneTarget(ctx, kind)
	if err != nil {
		return 0, err
	}
	defer target.stop()
	sys := target.sys
	defer sys.stop(ctx)
	tenants := b.tenants(sys.name(), 1)
	defer b.deleteClasses(ctx, tenants)
	ns, baseline, err := b.begin(ctx, sys, tenants, 1, b.cfg.Lease)
	if err != nil {
		return 0, err
	}
	size := resource.NewQuantity((tree.st.bytes>>20+2)<<20, resource.BinarySI)
	source, clone := claimRef{ns, "source"}, claimRef{ns, "clone"}
	if err := b.createClaim(ctx, source, tenants[0].name, size, ""); err != nil {
		return 0, err
	}
	pv, err := b.waitVolume(ctx, source)
	if err != nil {
		return 0, err
	}
	sourceDir := target.volumeDir(pv)
	if err := moveEntries(tree.dir, sourceDir); err != nil {
		return 0, err
	}
	// The tree goes back before the source claim is deleted, which
	// deletes its volume's directory, and the tree with it, for the next
	// run.
	moveBack := sync.OnceValue(func() error { return moveEntries(sourceDir, tree.dir) })
	defer func() {
		if err := moveBack(); err != nil {
			b.logf("%v", err)
		}
	}()
	seconds, err := b.measureClone(ctx, kind, sys, baseline, tree, clone, func() error {
		return b.createClaim(ctx, clone, tenants[0].name, size, source.name)
	})
	if err != nil {
		return 0, err
	}
	if err := b.checkClone(ctx, clone, target, tree.digest); err != nil {
		return 0, err
	}
	if err := moveBack(); err != nil {
		return 0, err
	}
	if _, err := b.deleteClaims(ctx, []claimRef{clone, source}); err != nil {
		return 0, err
	}
	return seconds, b.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// measureClone times the clone claim that create makes until it is Bound
// and its PV exists, and records it with the system's figures meanwhile.
func (b *bench) measureClone(ctx context.Context, kind string, sys system, baseline apiSnapshot, tree cloneTree, clone claimRef, create func() error) (float64, error) {
	w, err := b.open(ctx, sys.pids())
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := create(); err != nil {
		return 0, err
	}
	seconds, err := b.waitClone(ctx, clone, start)
	if err != nil {
		return 0, err
	}
	m := report.Measurement{Result: report.Result{
		Scenario: report.S11Clone + "-" + kind, System: report.SystemProvfleet, Tenants: 1, Claims: 1, Replicas: 1, Seconds: seconds,
	}, Goroutines: -1, Note: fmt.Sprintf("a clone of %.1f MB at %.1f MB/s, %.2f times the speed of cp -a of the tree (%.1f MB/s)",
		float64(tree.st.bytes)/1e6, megabytesPerSecond(tree.st.bytes, seconds), tree.cpSeconds/seconds, megabytesPerSecond(tree.st.bytes, tree.cpSeconds))}
	if err := b.close(ctx, w, baseline, &m); err != nil {
		return 0, err
	}
	b.record(m)
	return seconds, nil
}

// createClaim creates the claim ref of class asking for size, cloning the
// claim source of its namespace unless source is empty.
func (b *bench) createClaim(ctx context.Context, ref claimRef, class string, size *resource.Quantity, source string) error {
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: ref.name, Namespace: ref.namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *size}},
		},
	}
	if source != "" {
		claim.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: source}
	}
	if _, err := b.kube.CoreV1().PersistentVolumeClaims(ref.namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cannot create claim %s: %w", ref.name, err)
	}
	return nil
}

// waitVolume waits until ref is provisioned and bound, and returns its PV.
func (b *bench) waitVolume(ctx context.Context, ref claimRef) (*corev1.PersistentVolume, error) {
	if _, err := b.waitProvisioned(ctx, []claimRef{ref}, time.Time{}); err != nil {
		return nil, err
	}
	c, _, _ := b.tracker.claimVolume(ref.namespace, ref.name)
	pv, err := b.kube.CoreV1().PersistentVolumes().Get(ctx, "pvc-"+c.uid, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot get the PV of claim %s: %w", ref.name, err)
	}
	return pv, nil
}

// waitClone waits until the clone claim is Bound and its PV exists, and
// returns the seconds from start until both were seen. A refusal of its
// data source fails it at once with errCloneRefused; a clone still Pending
// after the wait's bound fails with the claim's last Event.
func (b *bench) waitClone(ctx context.Context, ref claimRef, start time.Time) (float64, error) {
	var seconds float64
	var refusal string
	polls := 0
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, b.cfg.WaitTimeout, true, func(ctx context.Context) (bool, error) {
		if c, v, ok := b.tracker.claimVolume(ref.namespace, ref.name); ok && !c.bound.IsZero() && !v.created.IsZero() {
			done := c.bound
			if v.created.After(done) {
				done = v.created
			}
			seconds = done.Sub(start).Seconds()
			return true, nil
		}
		if polls++; polls%10 != 0 {
			return false, nil
		}
		events, err := b.claimEvents(ctx, ref)
		if err != nil {
			return false, nil
		}
		refusal = refusedDataSource(events)
		return refusal != "", nil
	})
	switch {
	case refusal != "":
		return 0, fmt.Errorf("%w: the provisioner refused the clone claim: %s", errCloneRefused, refusal)
	case err != nil:
		events, lerr := b.claimEvents(ctx, ref)
		if lerr != nil {
			return 0, fmt.Errorf("the clone claim stayed Pending (%w), and its Events cannot be listed: %w", err, lerr)
		}
		last := lastEvent(events)
		return 0, fmt.Errorf("the clone claim stayed Pending: %s %s: %s (%w)", last.Type, last.Reason, last.Message, err)
	}
	return seconds, nil
}

// claimEvents are the Events of the claim ref.
func (b *bench) claimEvents(ctx context.Context, ref claimRef) ([]corev1.Event, error) {
	list, err := b.kube.CoreV1().Events(ref.namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + ref.name})
	if err != nil {
		return nil, fmt.Errorf("cannot list the Events of claim %s: %w", ref.name, err)
	}
	return list.Items, nil
}

// refusedDataSource is the message of an Event that refuses the claim's
// data source, or empty.
func refusedDataSource(events []corev1.Event) string {
	for _, e := range events {
		if e.Reason == provisioning.EventProvisioningFailed && strings.Contains(e.Message, refusalOfDataSource) {
			return e.Message
		}
	}
	return ""
}

// binder is the component of the PV binder's Events, which says every few
// seconds that a claim waits for its provisioner.
const binder = "persistentvolume-controller"

// lastEvent is the latest of events that the PV binder did not report, or
// the latest of all when it reported each.
func lastEvent(events []corev1.Event) corev1.Event {
	if len(events) == 0 {
		return corev1.Event{Message: "no Event"}
	}
	latest := func(a, b corev1.Event) int {
		aBinder, bBinder := a.Source.Component == binder, b.Source.Component == binder
		if aBinder != bBinder {
			if aBinder {
				return -1
			}
			return 1
		}
		return eventTime(a).Compare(eventTime(b))
	}
	return slices.MaxFunc(events, latest)
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// checkClone fails unless the clone's volume holds the tree.
func (b *bench) checkClone(ctx context.Context, clone claimRef, target *cloneTarget, want map[string]string) error {
	pv, err := b.waitVolume(ctx, clone)
	if err != nil {
		return err
	}
	got, err := treeDigest(target.volumeDir(pv))
	if err != nil {
		return err
	}
	var differ []string
	for name, entry := range want {
		if got[name] != entry {
			differ = append(differ, name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			differ = append(differ, name)
		}
	}
	if len(differ) > 0 {
		slices.Sort(differ)
		return fmt.Errorf("the clone differs from its source in %d entries, among them %v", len(differ), differ[:min(len(differ), 5)])
	}
	return nil
}
