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

package fleet

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
)

func TestEachProvisionerServesOnlyItsClass(t *testing.T) {
	f := newFixture(t)
	f.startManager("solo")
	a, b := f.provisioner(f.prefix+"-a"), f.provisioner(f.prefix+"-b")
	f.waitReady(a.Name, 1, v1alpha1.ReasonRunning)
	f.waitReady(b.Name, 1, v1alpha1.ReasonRunning)
	for i := range 3 {
		f.claim(fmt.Sprint("a-", i), a.Name)
		f.claim(fmt.Sprint("b-", i), b.Name)
	}
	f.waitBound("a-0", "a-1", "a-2", "b-0", "b-1", "b-2")
	want := map[string][]string{}
	for i := range 3 {
		want[fmt.Sprint("a-", i)] = []string{string(a.Spec.ProvisionerName)}
		want[fmt.Sprint("b-", i)] = []string{string(b.Spec.ProvisionerName)}
	}
	if diff := cmp.Diff(want, f.volumesOf()); diff != "" {
		t.Errorf("volumes per claim and their provisioner (-want +got):\n%s", diff)
	}
	pc := f.config(a.Name)
	if pc.Status.Leader != "solo" || pc.Status.Backend != v1alpha1.BackendHostPath {
		t.Errorf("status leader %q backend %q, want solo and hostPath", pc.Status.Leader, pc.Status.Backend)
	}
	if holder := f.leaseHolder(string(a.Spec.ProvisionerName)); holder != "solo" {
		t.Errorf("the Lease of %s is held by %q, want solo", a.Name, holder)
	}
}

func TestEditRetunesInPlace(t *testing.T) {
	f := newFixture(t)
	p := f.startManager("editor")
	pc := f.provisioner(f.prefix + "-x")
	f.waitReady(pc.Name, 1, v1alpha1.ReasonRunning)
	lease := func() string {
		l := f.lease(string(pc.Spec.ProvisionerName))
		return fmt.Sprint(ptr.Deref(l.Spec.HolderIdentity, ""), "@", l.Spec.AcquireTime)
	}
	before := lease()

	claims := []string{"before-0", "before-1"}
	for _, c := range claims {
		f.claim(c, pc.Name)
	}
	edit := func(change func(*v1alpha1.ProvisionerConfig)) int64 {
		t.Helper()
		current := f.config(pc.Name)
		change(current)
		updated, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Update(f.ctx, current, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("cannot edit: %v", err)
		}
		return updated.Generation
	}
	// Re-tune while the first claims are in flight: they and a claim created
	// right after the edit bind exactly once.
	gen := edit(func(pc *v1alpha1.ProvisionerConfig) {
		pc.Spec.Workers = 6
		pc.Spec.Retry.ProvisionFailureThreshold = ptr.To[int32](3)
		pc.Spec.Retry.InitialDelay = &metav1.Duration{Duration: 100 * time.Millisecond}
	})
	f.claim("during-0", pc.Name)
	claims = append(claims, "during-0")
	f.waitReady(pc.Name, gen, v1alpha1.ReasonRunning)
	f.waitBound(claims...)

	// Pausing is the observable proof that the running instance follows edits.
	gen = edit(func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Paused = true })
	f.waitReady(pc.Name, gen, v1alpha1.ReasonPaused)
	f.claim("while-paused", pc.Name)
	time.Sleep(3 * time.Second)
	if c, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Get(f.ctx, "while-paused", metav1.GetOptions{}); err != nil || c.Status.Phase == corev1.ClaimBound {
		t.Errorf("a claim of a paused provisioner got bound (err %v)", err)
	}

	gen = edit(func(pc *v1alpha1.ProvisionerConfig) {
		pc.Spec.Paused = false
		pc.Spec.Workers = 3
	})
	f.claim("after-0", pc.Name)
	f.waitReady(pc.Name, gen, v1alpha1.ReasonRunning)
	f.claim("after-1", pc.Name)
	claims = append(claims, "while-paused", "after-0", "after-1")
	f.waitBound(claims...)

	for claim, volumes := range f.volumesOf() {
		if len(volumes) != 1 {
			t.Errorf("claim %s has %d volumes, want 1", claim, len(volumes))
		}
	}
	if exited, err := p.Exited(); exited {
		t.Fatalf("the manager exited: %v", err)
	}
	if after := lease(); after != before {
		t.Errorf("the Lease changed hands across live edits: %s, then %s", before, after)
	}
}

func TestDeleteStopsOnlyThatProvisioner(t *testing.T) {
	f := newFixture(t)
	p := f.startManager("deleter")
	keep, drop := f.provisioner(f.prefix+"-keep"), f.provisioner(f.prefix+"-drop")
	f.waitReady(keep.Name, 1, v1alpha1.ReasonRunning)
	f.waitReady(drop.Name, 1, v1alpha1.ReasonRunning)
	f.claim("keep-0", keep.Name)
	f.claim("drop-0", drop.Name)
	f.waitBound("keep-0", "drop-0")
	series := func(provisioner string) int {
		text, err := p.Metrics(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(text, `provisioner="`+provisioner+`"`)
	}
	if series(string(drop.Spec.ProvisionerName)) == 0 || series(string(keep.Spec.ProvisionerName)) == 0 {
		t.Fatalf("no metric series for the provisioners before the deletion")
	}
	keepSeries := series(string(keep.Spec.ProvisionerName))

	f.deleteConfig(drop.Name)
	if holder := f.leaseHolder(string(drop.Spec.ProvisionerName)); holder != "" {
		t.Errorf("the Lease of the deleted provisioner is still held by %q", holder)
	}
	if n := series(string(drop.Spec.ProvisionerName)); n != 0 {
		t.Errorf("%d metric series of the deleted provisioner remain", n)
	}
	if holder := f.leaseHolder(string(keep.Spec.ProvisionerName)); holder != "deleter" {
		t.Errorf("the other provisioner's Lease is held by %q, want deleter", holder)
	}
	f.claim("keep-1", keep.Name)
	f.claim("drop-1", drop.Name)
	f.waitBound("keep-1")
	if n := series(string(keep.Spec.ProvisionerName)); n < keepSeries {
		t.Errorf("the other provisioner lost metric series: %d, was %d", n, keepSeries)
	}
	if c, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Get(f.ctx, "drop-1", metav1.GetOptions{}); err != nil || c.Status.Phase == corev1.ClaimBound {
		t.Errorf("a claim of the deleted provisioner got bound (err %v)", err)
	}
}

func TestNameConflictAndTakeover(t *testing.T) {
	f := newFixture(t)
	f.startManager("arbiter")
	older := f.provisioner(f.prefix + "-older")
	f.waitReady(older.Name, 1, v1alpha1.ReasonRunning)
	// creationTimestamp has a resolution of one second; in a tie the name wins.
	time.Sleep(time.Second)
	newer := f.provisioner(f.prefix+"-newer", func(pc *v1alpha1.ProvisionerConfig) {
		pc.Spec.ProvisionerName = older.Spec.ProvisionerName
	})
	f.waitReady(newer.Name, 1, v1alpha1.ReasonProvisionerNameConflict)
	f.eventually("a Warning Event on the newer object", func(ctx context.Context) (bool, error) {
		events, err := f.kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == newer.Name && e.Type == corev1.EventTypeWarning && e.Reason == v1alpha1.ReasonProvisionerNameConflict {
				return true, nil
			}
		}
		return false, nil
	})

	f.deleteConfig(older.Name)
	f.waitReady(newer.Name, 1, v1alpha1.ReasonRunning)
	f.claim("after-takeover", older.Name)
	f.waitBound("after-takeover")
}

func TestInvalidSpecsAreRefusedByTheAPIServer(t *testing.T) {
	f := newFixture(t)
	valid := func() *v1alpha1.ProvisionerConfig {
		pc := &v1alpha1.ProvisionerConfig{ObjectMeta: metav1.ObjectMeta{Name: f.prefix + "-invalid"}}
		pc.Spec.ProvisionerName = "e2e.provfleet.io/invalid"
		pc.Spec.Backend.HostPath = &v1alpha1.HostPathBackend{Path: "/var/lib/provfleet/x"}
		return pc
	}
	tests := map[string]func(*v1alpha1.ProvisionerConfig){
		"no backend":           func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Backend.HostPath = nil },
		"two backends":         func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Backend.Custom = &v1alpha1.CustomBackend{Driver: "x"} },
		"bad provisioner name": func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.ProvisionerName = "not a name!" },
		"too many workers":     func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Workers = 100000 },
		"renewDeadline not below leaseDuration": func(pc *v1alpha1.ProvisionerConfig) {
			pc.Spec.LeaderElection.LeaseDuration = &metav1.Duration{Duration: 5 * time.Second}
			pc.Spec.LeaderElection.RenewDeadline = &metav1.Duration{Duration: 5 * time.Second}
		},
		"relative hostPath": func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Backend.HostPath.Path = "relative/dir" },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			pc := valid()
			mutate(pc)
			_, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Create(f.ctx, pc, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Errorf("create returned %v, want an Invalid error", err)
				_ = f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Delete(f.ctx, pc.Name, metav1.DeleteOptions{})
			}
		})
	}
	t.Run("provisionerName is immutable", func(t *testing.T) {
		created, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Create(f.ctx, valid(), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Delete(f.ctx, created.Name, metav1.DeleteOptions{})
		}()
		created.Spec.ProvisionerName = "e2e.provfleet.io/renamed"
		if _, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Update(f.ctx, created, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("renaming returned %v, want an Invalid error", err)
		}
	})
}

func TestTwoManagersFailOver(t *testing.T) {
	f := newFixture(t)
	managers := map[string]*managerproc.Process{}
	for _, id := range []string{"one", "two"} {
		managers[id] = f.startManager(id)
	}
	var names []string
	for i := range 4 {
		names = append(names, f.provisioner(fmt.Sprint(f.prefix, "-", i)).Name)
	}
	provisionerOf := func(name string) string { return "e2e.provfleet.io/" + name }
	leaders := map[string]string{}
	f.eventually("every provisioner led by one manager, as its status says", func(ctx context.Context) (bool, error) {
		for _, name := range names {
			holder := f.leaseHolder(provisionerOf(name))
			if holder == "" || f.config(name).Status.Leader != holder {
				return false, nil
			}
			leaders[name] = holder
		}
		return true, nil
	})
	victim := leaders[names[0]]
	var survivor string
	for id := range managers {
		if id != victim {
			survivor = id
		}
	}
	var claims []string
	for _, name := range names {
		for i := range 3 {
			claim := fmt.Sprint(name, "-", i)
			f.claim(claim, name)
			claims = append(claims, claim)
		}
	}
	managers[victim].Kill()
	f.waitBound(claims...)
	for _, name := range names {
		f.eventually("the survivor leads "+name, func(ctx context.Context) (bool, error) {
			return f.leaseHolder(provisionerOf(name)) == survivor && f.config(name).Status.Leader == survivor, nil
		})
	}
	for claim, volumes := range f.volumesOf() {
		if len(volumes) != 1 {
			t.Errorf("claim %s has %d volumes, want exactly 1", claim, len(volumes))
		}
	}
}

// longrunningWatch matches the apiserver's gauge of open long-running requests;
// watchCounts sums the apiserver's open WATCH requests per resource.
var longrunningWatch = regexp.MustCompile(`(?m)^apiserver_longrunning_requests\{([^}]*)\} (\S+)$`)

func watchCounts(t *testing.T, f *fixture) map[string]int {
	t.Helper()
	body, err := f.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, m := range longrunningWatch.FindAllStringSubmatch(string(body), -1) {
		labels := m[1]
		if !strings.Contains(labels, `verb="WATCH"`) {
			continue
		}
		for _, resource := range []string{"persistentvolumeclaims", "persistentvolumes", "storageclasses"} {
			if strings.Contains(labels, `resource="`+resource+`"`) {
				n, _ := strconv.ParseFloat(m[2], 64)
				counts[resource] += int(n)
			}
		}
	}
	return counts
}

// TestHundredProvisionersShareTheWatches: the manager watches claims,
// volumes and classes once, with one provisioner as with a hundred. Its
// watches are counted against those open before it started: when a
// ProvisionerConfig comes, its caches end their watches to list again.
func TestHundredProvisionersShareTheWatches(t *testing.T) {
	f := newFixture(t)
	others := watchCounts(t, f)
	oneEach := map[string]int{}
	for _, resource := range []string{"persistentvolumeclaims", "persistentvolumes", "storageclasses"} {
		oneEach[resource] = others[resource] + 1
	}
	f.startManager("hundred", "--leader-elect=false", "--kube-api-qps=200", "--kube-api-burst=400")
	first := f.provisioner(f.prefix + "-0")
	f.waitReady(first.Name, 1, v1alpha1.ReasonRunning)
	f.eventually("one watch of each resource with one provisioner", func(context.Context) (bool, error) {
		return cmp.Equal(oneEach, watchCounts(t, f)), nil
	})
	var names []string
	for i := 1; i < 100; i++ {
		names = append(names, f.provisioner(fmt.Sprint(f.prefix, "-", i)).Name)
	}
	for _, name := range names {
		f.waitReady(name, 1, v1alpha1.ReasonRunning)
	}
	f.eventually("one watch of each resource with a hundred provisioners", func(context.Context) (bool, error) {
		return cmp.Equal(oneEach, watchCounts(t, f)), nil
	})
}
