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
	"maps"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/bench/internal/measure"
	"github.com/provfleet/provfleet/bench/internal/report"
	"github.com/provfleet/provfleet/internal/apirequests"
)

func (b *bench) scenarios(ctx context.Context) error {
	for _, n := range b.cfg.Scenarios {
		b.logf("scenario %d", n)
		var err error
		switch n {
		case 1:
			err = b.provisionScenario(ctx, provisionCase{report.S1Provision, report.S1Delete, 1, b.cfg.S1Claims, b.systems()})
		case 2:
			err = b.provisionScenario(ctx, provisionCase{report.S2Provision, report.S2Delete, b.cfg.S2Tenants, b.cfg.S2Claims, b.systems()})
		case 3:
			err = b.idleScenario(ctx)
		case 4:
			err = b.noisyScenario(ctx)
		case 5:
			err = b.retuneScenario(ctx)
		case 6:
			err = b.failoverScenario(ctx)
		case 7:
			err = b.nfsScenario(ctx)
		case 8:
			err = b.memoryScenario(ctx)
		case 9:
			err = b.nodesScenario(ctx)
		case 10:
			err = b.treeScenario(ctx)
		case 11:
			err = b.cloneScenario(ctx)
		case 12:
			err = b.scaleOutScenario(ctx)
		case 13:
			err = b.throughputScenario(ctx)
		default:
			err = fmt.Errorf("no scenario %d", n)
		}
		if err != nil {
			return fmt.Errorf("scenario %d: %w", n, err)
		}
	}
	return nil
}

// together runs each of runs, one after the other or, with
// cfg.SystemsAtOnce, all at once; it returns the first error.
func (b *bench) together(runs ...func() error) error {
	if !b.cfg.SystemsAtOnce {
		for _, run := range runs {
			if err := run(); err != nil {
				return err
			}
		}
		return nil
	}
	var g errgroup.Group
	for _, run := range runs {
		g.Go(run)
	}
	return g.Wait()
}

func (b *bench) systems() []system {
	return []system{&provfleetSystem{b: b}, &upstreamSystem{b: b}}
}

func (b *bench) tenants(system string, n int) []tenant {
	seq := b.nextSeq()
	out := make([]tenant, n)
	for i := range out {
		name := fmt.Sprintf("%s-%d-%d", system, seq, i)
		out[i] = tenant{name: name, provisionerName: "bench.provfleet.io/" + name}
	}
	return out
}

// begin makes a run's namespace, takes the API baseline its figures are
// measured from and starts sys. The caller stops sys, also when begin fails.
func (b *bench) begin(ctx context.Context, sys system, tenants []tenant, replicas int, lease LeaseTimes) (string, apiSnapshot, error) {
	ns, err := b.namespace(ctx)
	if err != nil {
		return "", apiSnapshot{}, err
	}
	baseline, err := b.snapshot(ctx)
	if err != nil {
		return "", apiSnapshot{}, err
	}
	if err := sys.start(ctx, tenants, replicas, lease); err != nil {
		return "", apiSnapshot{}, err
	}
	return ns, baseline, nil
}

func (b *bench) namespace(ctx context.Context) (string, error) {
	name := fmt.Sprintf("bench-%d", b.nextSeq())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := b.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("cannot create namespace %s: %w", name, err)
	}
	return name, nil
}

// claimRef names a claim the harness created.
type claimRef struct{ namespace, name string }

// createClaims creates perTenant claims of each class at once.
func (b *bench) createClaims(ctx context.Context, namespace, prefix string, classes []string, perTenant int) ([]claimRef, error) {
	var refs []claimRef
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, class := range classes {
		for i := range perTenant {
			ref := claimRef{namespace, fmt.Sprintf("%s-%s-%d", prefix, class, i)}
			refs = append(refs, ref)
			g.Go(func() error {
				claim := &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Name: ref.name, Namespace: namespace},
					Spec: corev1.PersistentVolumeClaimSpec{
						StorageClassName: ptr.To(class),
						AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources: corev1.VolumeResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
						},
					},
				}
				if _, err := b.kube.CoreV1().PersistentVolumeClaims(namespace).Create(gctx, claim, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("cannot create claim %s: %w", ref.name, err)
				}
				return nil
			})
		}
	}
	return refs, g.Wait()
}

// claimStats are the latencies of claims from the harness's watches.
type claimStats struct {
	// last is when the last PV appeared.
	last time.Time
	// firstAnnotated and lastAnnotated bound when the binder handed the
	// claims to their provisioner: none can have a PV before.
	firstAnnotated, lastAnnotated time.Time
	toPV, toBound                 []time.Duration
}

// waitProvisioned waits until every claim has its PV and is Bound. Latency
// runs from since, or from the claim's annotation when since is zero.
func (b *bench) waitProvisioned(ctx context.Context, refs []claimRef, since time.Time) (claimStats, error) {
	var st claimStats
	err := b.poll(ctx, fmt.Sprintf("%d claims provisioned and bound", len(refs)), func(context.Context) (bool, error) {
		st = claimStats{}
		for _, r := range refs {
			c, v, ok := b.tracker.claimVolume(r.namespace, r.name)
			if !ok || v.created.IsZero() || c.bound.IsZero() || c.annotated.IsZero() {
				return false, nil
			}
			start := since
			if start.IsZero() {
				start = c.annotated
			}
			st.toPV = append(st.toPV, v.created.Sub(start))
			st.toBound = append(st.toBound, c.bound.Sub(start))
			if v.created.After(st.last) {
				st.last = v.created
			}
			if st.firstAnnotated.IsZero() || c.annotated.Before(st.firstAnnotated) {
				st.firstAnnotated = c.annotated
			}
			if c.annotated.After(st.lastAnnotated) {
				st.lastAnnotated = c.annotated
			}
		}
		return true, nil
	})
	return st, err
}

// waitAnnotated waits until the control plane gave every claim the
// storage-provisioner annotation, which hands it to its provisioner.
func (b *bench) waitAnnotated(ctx context.Context, refs []claimRef) error {
	return b.poll(ctx, fmt.Sprintf("%d claims handed to their provisioner", len(refs)), func(context.Context) (bool, error) {
		for _, r := range refs {
			if c, _, _ := b.tracker.claimVolume(r.namespace, r.name); c.annotated.IsZero() {
				return false, nil
			}
		}
		return true, nil
	})
}

// deleteClaims deletes the claims and waits until their PVs are
// gone; it returns when each went.
func (b *bench) deleteClaims(ctx context.Context, refs []claimRef) ([]time.Time, error) {
	volumes := b.volumeNames(refs)
	// One by one: a collection delete of a thousand claims outlasts the
	// apiserver's request timeout on a busy machine.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, r := range refs {
		g.Go(func() error {
			err := b.kube.CoreV1().PersistentVolumeClaims(r.namespace).Delete(gctx, r.name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("cannot delete claim %s/%s: %w", r.namespace, r.name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var gone []time.Time
	err := b.poll(ctx, fmt.Sprintf("%d volumes deleted", len(volumes)), func(context.Context) (bool, error) {
		gone = gone[:0]
		for _, name := range volumes {
			v := b.tracker.volume(name)
			if v.gone.IsZero() {
				return false, nil
			}
			gone = append(gone, v.gone)
		}
		return true, nil
	})
	return gone, err
}

// volumeNames are the names of the PVs the harness saw for refs.
func (b *bench) volumeNames(refs []claimRef) []string {
	volumes := make([]string, 0, len(refs))
	for _, r := range refs {
		if c, v, ok := b.tracker.claimVolume(r.namespace, r.name); ok && !v.created.IsZero() {
			volumes = append(volumes, "pvc-"+c.uid)
		}
	}
	return volumes
}

// window is a measured stretch of a system's life.
type window struct {
	pids  []int
	usage map[int]measure.Usage
	api   apiSnapshot
}

func (b *bench) open(ctx context.Context, pids []int) (window, error) {
	api, err := b.snapshot(ctx)
	return window{pids: pids, usage: usage(pids), api: api}, err
}

// close fills the resource figures of m for the window: CPU spent, peak RSS,
// the system's request rate, and watches above baseline.
func (b *bench) close(ctx context.Context, w window, baseline apiSnapshot, m *report.Measurement) error {
	_, err := b.closeSnapshot(ctx, w, baseline, m)
	return err
}

// closeSnapshot is close, also returning the apiserver's figures at the end.
func (b *bench) closeSnapshot(ctx context.Context, w window, baseline apiSnapshot, m *report.Measurement) (apiSnapshot, error) {
	api, err := b.snapshot(ctx)
	if err != nil {
		return api, err
	}
	u := usage(w.pids)
	m.CPUS = cpuSince(w.usage, u).Seconds()
	m.RSSMiB = mib(total(u).PeakRSS)
	m.APIRPS = rate(w.api, api)
	m.Watches = max(api.watches-baseline.watches, 0)
	return api, nil
}

// requestMix is the requests per claim by verb and resource between two
// snapshots, every client included.
func requestMix(from, to apiSnapshot, claims int) map[string]float64 {
	return perClaim(from.all, to.all, claims)
}

// perClaim is the growth of each count from from to to, per claim; growths
// below 0.05 a claim are left out.
func perClaim(from, to map[string]float64, claims int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range to {
		if d := (v - from[k]) / float64(claims); d >= 0.05 {
			out[k] = d
		}
	}
	return out
}

// ownRequests adds up the API request counters of a system's processes by
// verb and resource, watches left out: the requests the system itself sent,
// whatever else the apiserver served meanwhile.
func ownRequests(ctx context.Context, urls []string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, url := range urls {
		m, err := scrape(ctx, http.DefaultClient, url, apirequests.MetricName)
		if err != nil {
			return nil, fmt.Errorf("cannot read the request counter of %s: %w", url, err)
		}
		sums := m.SumBy(apirequests.MetricName, func(l map[string]string) string {
			if l["verb"] == "watch" || l["resource"] == "" {
				return ""
			}
			return l["verb"] + " " + l["resource"]
		})
		for k, v := range sums {
			out[k] += v
		}
	}
	return out, nil
}

// quiesce waits until a system sent what its last phase left it to send
// (the manager's Events go out on a budget of their own, after the PVs),
// so that the next phase's requests are that phase's own. Lease renewals go
// on at any time and are not waited for.
func (b *bench) quiesce(ctx context.Context, sys system) error {
	var last map[string]float64
	return b.pollEvery(ctx, time.Second, "the system's requests to settle", func(ctx context.Context) (bool, error) {
		now, err := ownRequests(ctx, sys.metricsURLs())
		if err != nil {
			return false, err
		}
		maps.DeleteFunc(now, func(key string, _ float64) bool { return strings.HasSuffix(key, " leases") })
		settled := last != nil && maps.Equal(now, last)
		last = now
		return settled, nil
	})
}

// mixSection tabulates the request mixes of one scenario's systems.
func mixSection(scenario string, mixes map[string]map[string]float64) report.Section {
	intro := "Every client's requests (provisioner, PV binder, harness) per claim, by verb and resource, from the apiserver's " +
		"apiserver_request_total; the binder and the harness do the same work for both provisioners, so a difference between the columns is the provisioners'."
	return report.Section{
		Title: "Requests per claim, " + scenario,
		Body:  mixTable(intro, []string{report.SystemProvfleet, report.SystemUpstream, report.SystemLimit}, mixes),
	}
}

// ownMixSection tabulates the requests that each provisioner sent itself,
// per claim of one phase.
func ownMixSection(scenario string, mixes map[string]map[string]float64) report.Section {
	intro := "The requests each provisioner sent itself per claim, Events and Leases included, by verb and resource, from the " +
		"provfleet_api_requests_total counter of its processes (the same counter in the manager and the peer). " +
		"The limit sends one request per volume."
	return report.Section{
		Title: "Provisioners' own requests per claim, " + scenario,
		Body:  mixTable(intro, []string{report.SystemProvfleet, report.SystemUpstream}, mixes),
	}
}

// mixTable is a Markdown table of mixes, one column per system that has
// one, with a total.
func mixTable(intro string, systems []string, mixes map[string]map[string]float64) string {
	systems = slices.DeleteFunc(slices.Clone(systems), func(sys string) bool { return mixes[sys] == nil })
	keys := map[string]bool{}
	for _, mix := range mixes {
		for k := range mix {
			keys[k] = true
		}
	}
	var body strings.Builder
	body.WriteString(intro + "\n\n")
	body.WriteString("| verb resource | " + strings.Join(systems, " | ") + " |\n|---|" + strings.Repeat("--:|", len(systems)) + "\n")
	totals := make([]float64, len(systems))
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		body.WriteString("| " + k)
		for i, sys := range systems {
			fmt.Fprintf(&body, " | %.2f", mixes[sys][k])
			totals[i] += mixes[sys][k]
		}
		body.WriteString(" |\n")
	}
	body.WriteString("| **total**")
	for _, t := range totals {
		fmt.Fprintf(&body, " | **%.2f**", t)
	}
	body.WriteString(" |\n")
	return body.String()
}

func mib(bytes uint64) float64 { return float64(bytes) / (1 << 20) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func latencies(m *report.Measurement, toPV, toBound []time.Duration) {
	m.P50MS, m.P99MS = ms(measure.Percentile(toPV, 50)), ms(measure.Percentile(toPV, 99))
	m.BoundP50MS, m.BoundP99MS = ms(measure.Percentile(toBound, 50)), ms(measure.Percentile(toBound, 99))
}

func (b *bench) record(m report.Measurement) {
	b.logf("%s %s tenants=%d claims=%d replicas=%d: %.2fs p50 %.0fms p99 %.0fms rss %.1fMiB cpu %.2fs watches %d api %.2f/s goroutines %d %s",
		m.Scenario, m.System, m.Tenants, m.Claims, m.Replicas, m.Seconds, m.P50MS, m.P99MS, m.RSSMiB, m.CPUS, m.Watches, m.APIRPS, m.Goroutines, m.Note)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.run.Measurements = append(b.run.Measurements, m)
}

// provisionCase is what scenarios 1, 2 and 7 each run: the names of their
// two phases, the tenants and their claims, and the systems next to the
// limit.
type provisionCase struct {
	provision, remove  string
	tenants, perTenant int
	systems            []system
}

// provisionScenario is scenarios 1, 2 and 7: claims of every tenant created
// at once, then all deleted; each system, then the limit.
func (b *bench) provisionScenario(ctx context.Context, c provisionCase) error {
	provision, remove := c.provision, c.remove
	var mu sync.Mutex
	mixes := map[string]map[string]float64{}
	own := map[string]map[string]map[string]float64{provision: {}, remove: {}}
	var runs []func() error
	for _, sys := range c.systems {
		runs = append(runs, func() error {
			mix, err := b.provisionRun(ctx, sys, provision, remove, c.tenants, c.perTenant)
			if err != nil {
				return fmt.Errorf("%s: %w", sys.name(), err)
			}
			mu.Lock()
			defer mu.Unlock()
			mixes[sys.name()] = mix.all
			own[provision][sys.name()] = mix.ownProvision
			own[remove][sys.name()] = mix.ownRemove
			return nil
		})
	}
	runs = append(runs, func() error {
		mix, err := b.limitRun(ctx, provision, remove, c.tenants, c.tenants*c.perTenant)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		mixes[report.SystemLimit] = mix
		return nil
	})
	if err := b.together(runs...); err != nil {
		return err
	}
	b.addSection(mixSection(provision, mixes))
	b.addSection(ownMixSection(provision, own[provision]))
	b.addSection(ownMixSection(remove, own[remove]))
	return nil
}

// runMixes are the request mixes of one system's run of scenario 1 or 2.
type runMixes struct {
	// all is every client's requests per claim while provisioning.
	all map[string]float64
	// ownProvision and ownRemove are the system's own requests per claim
	// while provisioning and while deleting.
	ownProvision, ownRemove map[string]float64
}

// provisionRun is one system's run of scenario 1 or 2: the provisioning
// phase, then the deletion phase of the same claims, each measured.
func (b *bench) provisionRun(ctx context.Context, sys system, provision, remove string, n, perTenant int) (runMixes, error) {
	tenants := b.tenants(sys.name(), n)
	defer sys.stop(ctx)
	ns, baseline, err := b.begin(ctx, sys, tenants, 1, b.cfg.Lease)
	if err != nil {
		return runMixes{}, err
	}
	time.Sleep(b.cfg.Settle)
	refs, mixes, err := b.provisionPhase(ctx, sys, provision, ns, baseline, tenants, perTenant)
	if err != nil {
		return mixes, err
	}
	if err := checkExport(sys, b.volumeNames(refs)); err != nil {
		return mixes, err
	}
	if mixes.ownRemove, err = b.deletionPhase(ctx, sys, remove, baseline, refs, n); err != nil {
		return mixes, err
	}
	if err := checkExport(sys, nil); err != nil {
		return mixes, err
	}
	return mixes, b.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// provisionPhase creates perTenant claims of each tenant at once in ns and
// records how long until every one is provisioned and bound. It returns the
// claims and the phase's request mixes.
func (b *bench) provisionPhase(ctx context.Context, sys system, scenario, ns string, baseline apiSnapshot, tenants []tenant, perTenant int) ([]claimRef, runMixes, error) {
	var mixes runMixes
	w, err := b.open(ctx, sys.pids())
	if err != nil {
		return nil, mixes, err
	}
	var profile <-chan string
	title, profiled := profiledPhases[scenario]
	if b.cfg.Profile && profiled && sys.name() == report.SystemProvfleet {
		profile = b.profile(ctx, sys.pids()[0], 20*time.Second, scenario)
	}
	classes := make([]string, len(tenants))
	for i, t := range tenants {
		classes[i] = t.name
	}
	ownBefore, err := ownRequests(ctx, sys.metricsURLs())
	if err != nil {
		return nil, mixes, err
	}
	start := time.Now()
	refs, err := b.createClaims(ctx, ns, "c", classes, perTenant)
	if err != nil {
		return nil, mixes, err
	}
	st, err := b.waitProvisioned(ctx, refs, time.Time{})
	if err != nil {
		return nil, mixes, err
	}
	m := provisionMeasurement(scenario, sys, len(tenants), len(refs), start, st)
	m.Goroutines = goroutines(ctx, sys.metricsURLs())
	end, err := b.closeSnapshot(ctx, w, baseline, &m)
	if err != nil {
		return nil, mixes, err
	}
	mixes.all = requestMix(w.api, end, len(refs))
	if mixes.ownProvision, err = ownRequestsSince(ctx, sys, ownBefore, len(refs)); err != nil {
		return nil, mixes, err
	}
	m.RequestsPerClaim = sum(mixes.ownProvision)
	b.record(m)
	b.addProfile(profile, title)
	return refs, mixes, nil
}

// profiledPhases are the provisioning phases whose manager a run with
// cfg.Profile profiles, with the titles of their profiles.
var profiledPhases = map[string]string{
	report.S1Provision:    "provfleet CPU profile, s1 provisioning",
	report.S2Provision:    "provfleet CPU profile, s2 provisioning",
	report.S7NFSProvision: "provfleet CPU profile, s7 provisioning over NFS",
}

// provisionMeasurement is the time and latencies of claims created at start
// until every one is provisioned and bound.
func provisionMeasurement(scenario string, sys system, tenants, claims int, start time.Time, st claimStats) report.Measurement {
	m := report.Measurement{Result: report.Result{Scenario: scenario, System: sys.name(), Tenants: tenants, Claims: claims, Replicas: sys.replicas(),
		Seconds: st.last.Sub(start).Seconds()}}
	latencies(&m, st.toPV, st.toBound)
	m.Note = fmt.Sprintf("claims handed to the provisioner from +%.2f s to +%.2f s", st.firstAnnotated.Sub(start).Seconds(), st.lastAnnotated.Sub(start).Seconds())
	return m
}

// deletionPhase waits until the system sent what provisioning left it to
// send, then deletes the claims and records how long until their PVs are
// gone. It returns the system's own requests per claim while deleting.
func (b *bench) deletionPhase(ctx context.Context, sys system, scenario string, baseline apiSnapshot, refs []claimRef, tenants int) (map[string]float64, error) {
	if err := b.quiesce(ctx, sys); err != nil {
		return nil, err
	}
	w, err := b.open(ctx, sys.pids())
	if err != nil {
		return nil, err
	}
	ownBefore, err := ownRequests(ctx, sys.metricsURLs())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	gone, err := b.deleteClaims(ctx, refs)
	if err != nil {
		return nil, err
	}
	d := report.Measurement{Result: report.Result{Scenario: scenario, System: sys.name(), Tenants: tenants, Claims: len(refs), Replicas: 1}}
	d.Seconds, d.P50MS, d.P99MS = since(start, gone)
	d.Goroutines = goroutines(ctx, sys.metricsURLs())
	if err := b.close(ctx, w, baseline, &d); err != nil {
		return nil, err
	}
	own, err := ownRequestsSince(ctx, sys, ownBefore, len(refs))
	if err != nil {
		return nil, err
	}
	d.RequestsPerClaim = sum(own)
	b.record(d)
	return own, nil
}

// ownRequestsSince is what the system sent itself per claim since before,
// counted by ownRequests.
func ownRequestsSince(ctx context.Context, sys system, before map[string]float64, claims int) (map[string]float64, error) {
	after, err := ownRequests(ctx, sys.metricsURLs())
	if err != nil {
		return nil, err
	}
	return perClaim(before, after, claims), nil
}

// since returns the span from start to the last of times, and the p50 and
// p99 of each time's distance from start, in milliseconds.
func since(start time.Time, times []time.Time) (seconds, p50, p99 float64) {
	ds := make([]time.Duration, len(times))
	var last time.Duration
	for i, t := range times {
		ds[i] = t.Sub(start)
		last = max(last, ds[i])
	}
	return last.Seconds(), ms(measure.Percentile(ds, 50)), ms(measure.Percentile(ds, 99))
}

// limitRun creates and then deletes count PVs with the limit client, each
// phase measured; it returns every client's requests per claim while
// creating.
func (b *bench) limitRun(ctx context.Context, provision, remove string, tenants, count int) (map[string]float64, error) {
	prefix := fmt.Sprintf("limit-%d", b.nextSeq())
	baseline, after, err := b.limitPhase(ctx, limitBurst{scenario: provision, prefix: prefix, tenants: tenants, count: count,
		at: func(v volumeTimes) time.Time { return v.created }})
	if err != nil {
		return nil, err
	}
	mix := requestMix(baseline, after, count)
	if _, _, err := b.limitPhase(ctx, limitBurst{scenario: remove, prefix: prefix, tenants: tenants, count: count,
		args: []string{"--delete"}, at: func(v volumeTimes) time.Time { return v.gone }}); err != nil {
		return nil, err
	}
	return mix, nil
}

// limitBurst is one phase of the limit: count PVs named prefix-<i>,
// created, or deleted with args --delete.
type limitBurst struct {
	scenario       string
	prefix         string
	tenants, count int
	// args are added to the limit's flags.
	args []string
	// at is when a PV's phase is done, zero until then.
	at func(volumeTimes) time.Time
}

// limitPhase runs the limit for one burst and records how long until the
// harness saw each PV done. It returns the apiserver's figures before and
// after.
func (b *bench) limitPhase(ctx context.Context, l limitBurst) (baseline, after apiSnapshot, err error) {
	baseline, err = b.snapshot(ctx)
	if err != nil {
		return baseline, after, err
	}
	args := []string{
		"--kubeconfig=" + b.kubeconfigs.limit, "--prefix=" + l.prefix, "--count=" + strconv.Itoa(l.count),
		"--dir=" + filepath.Join(b.volumes, l.prefix),
		"--kube-api-qps=" + strconv.FormatFloat(float64(b.cfg.QPS), 'f', -1, 32), "--kube-api-burst=" + strconv.Itoa(b.cfg.Burst),
	}
	cmd := exec.CommandContext(ctx, b.bins.limit, append(args, l.args...)...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return baseline, after, fmt.Errorf("the limit failed: %w\n%s", err, out)
	}
	times, err := b.waitLimitVolumes(ctx, l)
	if err != nil {
		return baseline, after, err
	}
	m := report.Measurement{Result: report.Result{Scenario: l.scenario, System: report.SystemLimit, Tenants: l.tenants, Claims: l.count, Replicas: 1}, Goroutines: -1}
	m.Seconds, m.P50MS, m.P99MS = since(start, times)
	if after, err = b.snapshot(ctx); err != nil {
		return baseline, after, err
	}
	m.APIRPS = rate(apiSnapshot{at: start, requests: baseline.requests}, after)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.RSSMiB = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	m.CPUS = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	m.Note = "latency from the start of the burst"
	b.record(m)
	return baseline, after, nil
}

// waitLimitVolumes waits until the harness saw every PV of the burst done
// and returns when each was.
func (b *bench) waitLimitVolumes(ctx context.Context, l limitBurst) ([]time.Time, error) {
	var times []time.Time
	err := b.poll(ctx, "the limit's volumes seen", func(context.Context) (bool, error) {
		times = times[:0]
		for i := range l.count {
			t := l.at(b.tracker.volume(fmt.Sprintf("%s-%d", l.prefix, i)))
			if t.IsZero() {
				return false, nil
			}
			times = append(times, t)
		}
		return true, nil
	})
	return times, err
}

// idleStartTimeout bounds how long an idle fleet gets to take its Leases.
const idleStartTimeout = 3 * time.Minute

// idleScenario is scenario 3: fleets that do nothing, with one and with two
// replicas.
func (b *bench) idleScenario(ctx context.Context) error {
	for _, n := range b.cfg.S3Counts {
		var runs []func() error
		for _, sys := range b.systems() {
			if sys.name() == report.SystemUpstream && n > b.cfg.S3PeerMax {
				continue
			}
			runs = append(runs, func() error {
				if err := b.idleRun(ctx, sys, n); err != nil {
					return fmt.Errorf("%s with %d provisioners: %w", sys.name(), n, err)
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

// idleRun starts a fleet of n idle provisioners and measures it with one
// replica, then with two.
func (b *bench) idleRun(ctx context.Context, sys system, n int) error {
	baseline, err := b.snapshot(ctx)
	if err != nil {
		return err
	}
	defer sys.stop(ctx)
	note, err := b.startIdle(ctx, sys, b.tenants(sys.name(), n))
	if err != nil {
		return err
	}
	for replicas := 1; replicas <= 2; replicas++ {
		if replicas == 2 {
			// The peer's second replica is n more processes.
			if sys.name() == report.SystemUpstream && 2*n > b.cfg.S3PeerMax {
				return nil
			}
			if err := sys.addReplica(ctx); err != nil {
				return err
			}
		}
		if err := b.idleWindow(ctx, sys, n, replicas, baseline, note); err != nil {
			return err
		}
	}
	return nil
}

// startIdle starts a fleet of tenants. A fleet that cannot hold all its
// Leases is a result, not a failure: the note says so.
func (b *bench) startIdle(ctx context.Context, sys system, tenants []tenant) (note string, err error) {
	n := len(tenants)
	startCtx, cancel := context.WithTimeout(ctx, idleStartTimeout)
	err = sys.start(startCtx, tenants, 1, b.cfg.Lease)
	cancel()
	if err != nil {
		if ctx.Err() != nil || len(sys.pids()) == 0 {
			return "", err
		}
		note = fmt.Sprintf("not every provisioner led within %v of the start", idleStartTimeout)
		b.logf("%s %d: %s: %v", sys.name(), n, note, err)
	}
	return note, nil
}

// idleWindow measures an idle fleet of n provisioners and replicas replicas
// over S3Window, after S3Settle.
func (b *bench) idleWindow(ctx context.Context, sys system, n, replicas int, baseline apiSnapshot, note string) error {
	time.Sleep(b.cfg.S3Settle)
	w, err := b.open(ctx, sys.pids())
	if err != nil {
		return err
	}
	var prof <-chan string
	if b.idleProfiled(sys, n) {
		prof = b.profile(ctx, sys.pids()[0], b.cfg.S3Window, fmt.Sprintf("s3-idle-%d-r%d", n, replicas))
	}
	time.Sleep(b.cfg.S3Window)
	m := report.Measurement{Result: report.Result{Scenario: report.S3Idle, System: sys.name(), Tenants: n, Replicas: replicas}, Note: note}
	if err := b.closeIdle(ctx, sys, w, baseline, &m); err != nil {
		return err
	}
	b.record(m)
	b.addProfile(prof, fmt.Sprintf("provfleet CPU profile, s3 idle, %d provisioners, replica 1 of %d", n, replicas))
	return nil
}

// closeIdle fills the figures of m for the idle window w of sys.
func (b *bench) closeIdle(ctx context.Context, sys system, w window, baseline apiSnapshot, m *report.Measurement) error {
	m.Goroutines = goroutines(ctx, sys.metricsURLs())
	if err := b.close(ctx, w, baseline, m); err != nil {
		return err
	}
	// Idle: what the fleet holds now, not its start-up peak.
	u := usage(w.pids)
	m.RSSMiB = mib(total(u).RSS)
	setCharge(m, u)
	m.Seconds = b.cfg.S3Window.Seconds()
	return nil
}

// idleProfiled says whether the idle windows of a fleet of n are profiled:
// provfleet's largest fleet, when asked for.
func (b *bench) idleProfiled(sys system, n int) bool {
	return b.cfg.Profile && sys.name() == report.SystemProvfleet && n == slices.Max(b.cfg.S3Counts)
}

// noisyScenario is scenario 4: a good tenant's claims alone, then next to a
// tenant whose backend refuses every claim or one that floods its
// provisioner with valid claims, in rounds whose latencies are pooled per
// system and case.
func (b *bench) noisyScenario(ctx context.Context) error {
	var mu sync.Mutex
	pools := map[noisyCase]*noisyPool{}
	cases := s4Cases(b.cfg)
	for round := range b.cfg.S4Rounds {
		for _, scenario := range cases {
			var runs []func() error
			for _, sys := range b.noisySystems(scenario) {
				runs = append(runs, func() error {
					r, err := b.noisyRun(ctx, sys, scenario)
					if err != nil {
						return fmt.Errorf("%s, %s, round %d: %w", sys.name(), scenario, round+1, err)
					}
					mu.Lock()
					defer mu.Unlock()
					key := noisyCase{sys.name(), scenario}
					if pools[key] == nil {
						pools[key] = &noisyPool{}
					}
					pools[key].add(r)
					return nil
				})
			}
			if err := b.together(runs...); err != nil {
				return err
			}
		}
	}
	for _, sys := range b.systems() {
		for _, scenario := range cases {
			if pool := pools[noisyCase{sys.name(), scenario}]; pool != nil {
				b.record(pool.measurement(b.neighbourClaims(scenario)))
			}
		}
	}
	return nil
}

// s4Cases are the cases of scenario 4 cfg runs, in the order of
// report.S4Cases: those it names, all when it names none, the flood only
// with claims to flood.
func s4Cases(cfg Config) []string {
	return slices.DeleteFunc(slices.Clone(report.S4Cases), func(c string) bool {
		return (len(cfg.S4Cases) > 0 && !slices.Contains(cfg.S4Cases, c)) || (c == report.S4Flood && cfg.S4Flood == 0)
	})
}

// noisySystems are the systems of a case of scenario 4: provfleet alone
// next to a hostile NFS server, the peer having no NFS client.
func (b *bench) noisySystems(scenario string) []system {
	if scenario == report.S4Hostile {
		return []system{&provfleetSystem{b: b}}
	}
	return b.systems()
}

type noisyCase struct {
	system, scenario string
}

// noisyResult is one run of scenario 4: its figures, the good tenant's
// latencies and, in S4Flood, how long the flood took until its last claim
// was bound.
type noisyResult struct {
	m             report.Measurement
	toPV, toBound []time.Duration
	flood         time.Duration
	// writes are the apiserver's write latencies while the good tenant's
	// claims were provisioned (apiWriteProbe).
	writes []time.Duration
}

// noisyPool gathers the rounds of one system and case.
type noisyPool struct {
	runs          []report.Measurement
	toPV, toBound []time.Duration
	floods        []time.Duration
	writes        []time.Duration
}

func (p *noisyPool) add(r noisyResult) {
	p.runs = append(p.runs, r.m)
	p.toPV = append(p.toPV, r.toPV...)
	p.toBound = append(p.toBound, r.toBound...)
	p.floods = append(p.floods, r.flood)
	p.writes = append(p.writes, r.writes...)
}

// measurement is the pool as one: latencies over every claim of every
// round, the mean time, CPU and request rate of a round, the highest RSS
// and watch count; neighbours are the other tenant's claims of a round.
func (p *noisyPool) measurement(neighbours int) report.Measurement {
	m := p.runs[0]
	m.Claims = len(p.toPV)
	m.Seconds, m.CPUS, m.APIRPS = 0, 0, 0
	n := float64(len(p.runs))
	for _, r := range p.runs {
		m.Seconds += r.Seconds / n
		m.CPUS += r.CPUS / n
		m.APIRPS += r.APIRPS / n
		m.RSSMiB = max(m.RSSMiB, r.RSSMiB)
		m.Watches = max(m.Watches, r.Watches)
	}
	latencies(&m, p.toPV, p.toBound)
	switch m.Scenario {
	case report.S4Noisy:
		m.Note = fmt.Sprintf("good tenant's claims over %d rounds, created right after %d failing claims", len(p.runs), neighbours)
	case report.S4Settled:
		m.Note = fmt.Sprintf("good tenant's claims over %d rounds, next to %d failing claims that each failed already", len(p.runs), neighbours)
	case report.S4Hostile:
		m.Note = fmt.Sprintf("good tenant's claims over %d rounds, next to %d claims of a provisioner whose NFS server answers every call with the worst replies", len(p.runs), neighbours)
	case report.S4Flood:
		m.Note = fmt.Sprintf("good tenant's claims over %d rounds, created right after %d valid claims of another tenant in one namespace; %s",
			len(p.runs), neighbours, p.floodRate(neighbours))
	default:
		m.Note = fmt.Sprintf("good tenant's claims over %d rounds", len(p.runs))
	}
	m.Note += "; time, CPU and requests per round"
	if len(p.writes) > 0 {
		m.Note += fmt.Sprintf("; meanwhile the apiserver's writes (a ConfigMap created every %v by the harness) took p50 %.0f ms, p99 %.0f ms",
			apiWriteProbeEvery, ms(measure.Percentile(p.writes, 50)), ms(measure.Percentile(p.writes, 99)))
	}
	return m
}

// floodRate is how long the floods of claims each took until their last
// claim was bound, from the first one's creation.
func (p *noisyPool) floodRate(claims int) string {
	var sum time.Duration
	for _, d := range p.floods {
		sum += d
	}
	mean := sum / time.Duration(len(p.floods))
	return fmt.Sprintf("each flood bound in %.1f s on average (%.0f claims/s), the slowest in %.1f s",
		mean.Seconds(), float64(claims)/mean.Seconds(), slices.Max(p.floods).Seconds())
}

// noisyRun is one run of scenario 4: the good tenant alone (S4Alone), its
// claims created right after the failing tenant's (S4Noisy), or once the
// control plane annotated every failing claim and the system had Settle to
// fail each (S4Settled), so that only the failing tenant's retries remain,
// right after the claims of a tenant on a hostile NFS server (S4Hostile),
// or right after a flood of another tenant's valid claims (S4Flood), which
// the run also waits to see bound so that none is left to the next.
func (b *bench) noisyRun(ctx context.Context, sys system, scenario string) (noisyResult, error) {
	tenants := b.noisyTenants(sys, scenario)
	noisy := scenario != report.S4Alone
	good := tenants[len(tenants)-1]
	ready, stop, err := b.hostileNeighbour(ctx, sys, scenario, &tenants[0])
	if err != nil {
		return noisyResult{}, err
	}
	defer stop()
	defer sys.stop(ctx)
	ns, baseline, err := b.begin(ctx, sys, tenants, 1, b.cfg.Lease)
	if err != nil {
		return noisyResult{}, err
	}
	time.Sleep(b.cfg.Settle)
	w, err := b.open(ctx, sys.pids())
	if err != nil {
		return noisyResult{}, err
	}
	var neighbour []claimRef
	neighbourStart := time.Now()
	if noisy {
		if neighbour, err = b.createNeighbourClaims(ctx, ns, scenario, tenants[0]); err != nil {
			return noisyResult{}, err
		}
	}
	if err := ready(); err != nil {
		return noisyResult{}, err
	}
	defer b.addProfile(b.noisyProfile(ctx, sys, scenario))
	writes := b.apiWriteProbe(ctx, ns)
	start := time.Now()
	refs, err := b.createClaims(ctx, ns, "good", []string{good.name}, b.cfg.S4Good)
	if err != nil {
		writes()
		return noisyResult{}, err
	}
	r, err := b.measureGoodTenant(ctx, sys, scenario, len(tenants), refs, start, w, baseline)
	r.writes = writes()
	if err != nil {
		return noisyResult{}, err
	}
	if scenario == report.S4Flood {
		if r.flood, err = b.waitFlood(ctx, neighbour, neighbourStart); err != nil {
			return noisyResult{}, err
		}
	}
	if _, err := b.deleteClaims(ctx, append(neighbour, refs...)); err != nil {
		return noisyResult{}, err
	}
	return r, b.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// apiWriteProbeEvery is how often apiWriteProbe writes.
const apiWriteProbeEvery = 100 * time.Millisecond

// apiWriteProbe creates a small ConfigMap in ns every apiWriteProbeEvery
// until the returned function is called, which returns how long each
// create took. It is what any client's write costs at the apiserver
// meanwhile: a system's provisioning latency that grows by the same share
// grows for the shared control plane, not for the system.
func (b *bench) apiWriteProbe(ctx context.Context, ns string) (stop func() []time.Duration) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan []time.Duration)
	go func() {
		var took []time.Duration
		ticker := time.NewTicker(apiWriteProbeEvery)
		defer ticker.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				done <- took
				return
			case <-ticker.C:
			}
			start := time.Now()
			_, err := b.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", i)},
			}, metav1.CreateOptions{})
			if err == nil {
				took = append(took, time.Since(start))
			}
		}
	}()
	return func() []time.Duration {
		cancel()
		return <-done
	}
}

// noisyTenants are the tenants of a run of scenario 4: the neighbour, valid
// in S4Flood and failing else, unless the good tenant runs alone, and the
// good tenant last.
func (b *bench) noisyTenants(sys system, scenario string) []tenant {
	tenants := b.tenants(sys.name(), 2)
	if scenario == report.S4Alone {
		return tenants[1:]
	}
	tenants[0].failing = scenario != report.S4Flood
	return tenants
}

// noisyProfiles are the cases of scenario 4 whose first round is profiled:
// where the shared process spends what the neighbour costs it while the
// good tenant's claims are provisioned.
var noisyProfiles = map[string]string{
	report.S4Hostile: "provfleet CPU profile, s4 next to a hostile NFS server, first round",
	report.S4Flood:   "provfleet CPU profile, s4 next to a flood of valid claims, first round",
}

// noisyProfile starts the CPU profile of provfleet's first round of a case
// in noisyProfiles, when asked for, and returns it with its title for
// addProfile; a nil channel when there is none to take.
func (b *bench) noisyProfile(ctx context.Context, sys system, scenario string) (<-chan string, string) {
	title, ok := noisyProfiles[scenario]
	if !ok || !b.cfg.Profile || sys.name() != report.SystemProvfleet {
		return nil, ""
	}
	if _, done := b.profiled.LoadOrStore(scenario, true); done {
		return nil, ""
	}
	return b.profile(ctx, sys.pids()[0], noisyProfileSpan, scenario), title
}

// noisyProfileSpan covers the provisioning of the good tenant's claims,
// from their creation on.
const noisyProfileSpan = 5 * time.Second

// hostileNeighbour, for S4Hostile, puts tenant t on a hostile NFS server
// (hostileBackend) and returns what waits until it has sent every attack
// and what stops it; for the other cases, what does nothing.
func (b *bench) hostileNeighbour(ctx context.Context, sys system, scenario string, t *tenant) (ready func() error, stop func(), err error) {
	pf, ok := sys.(*provfleetSystem)
	if !ok || scenario != report.S4Hostile {
		return func() error { return nil }, func() {}, nil
	}
	worst, stop, err := b.hostileBackend(ctx, pf, t)
	if err != nil {
		return nil, nil, err
	}
	ready = func() error {
		return b.poll(ctx, "every worst reply sent", func(context.Context) (bool, error) { return worst.Rounds() >= 1, nil })
	}
	return ready, stop, nil
}

// createNeighbourClaims creates the other tenant's claims: the flood of
// S4Flood, the failing tenant's else. For S4Settled it waits until the
// control plane annotated every one and the system had Settle to fail each.
func (b *bench) createNeighbourClaims(ctx context.Context, ns, scenario string, neighbour tenant) ([]claimRef, error) {
	prefix := "bad"
	if scenario == report.S4Flood {
		prefix = "flood"
	}
	claims, err := b.createClaims(ctx, ns, prefix, []string{neighbour.name}, b.neighbourClaims(scenario))
	if err != nil {
		return nil, err
	}
	if scenario == report.S4Settled {
		if err := b.waitAnnotated(ctx, claims); err != nil {
			return nil, err
		}
		time.Sleep(b.cfg.Settle)
	}
	return claims, nil
}

// neighbourClaims is the number of the other tenant's claims in a case of
// scenario 4.
func (b *bench) neighbourClaims(scenario string) int {
	if scenario == report.S4Flood {
		return b.cfg.S4Flood
	}
	return b.cfg.S4Bad
}

// waitFlood waits until every claim of a flood that began at start is
// bound, and returns how long that took.
func (b *bench) waitFlood(ctx context.Context, flood []claimRef, start time.Time) (time.Duration, error) {
	st, err := b.waitProvisioned(ctx, flood, start)
	if err != nil {
		return 0, err
	}
	took := slices.Max(st.toBound)
	b.logf("flood of %d claims bound in %.2fs (%.0f claims/s)", len(flood), took.Seconds(), float64(len(flood))/took.Seconds())
	return took, nil
}

// measureGoodTenant waits until the good tenant's claims, created at start,
// are provisioned and bound, and closes the window w on the run's figures.
func (b *bench) measureGoodTenant(ctx context.Context, sys system, scenario string, tenants int, refs []claimRef, start time.Time, w window, baseline apiSnapshot) (noisyResult, error) {
	st, err := b.waitProvisioned(ctx, refs, time.Time{})
	if err != nil {
		return noisyResult{}, err
	}
	r := noisyResult{toPV: st.toPV, toBound: st.toBound}
	r.m = report.Measurement{Result: report.Result{Scenario: scenario, System: sys.name(), Tenants: tenants, Claims: len(refs), Replicas: 1,
		Seconds: st.last.Sub(start).Seconds()}}
	r.m.Goroutines = goroutines(ctx, sys.metricsURLs())
	if err := b.close(ctx, w, baseline, &r.m); err != nil {
		return noisyResult{}, err
	}
	b.logf("%s %s round: %.2fs p99 %.0fms", scenario, sys.name(), r.m.Seconds, ms(measure.Percentile(st.toPV, 99)))
	return r, nil
}

// retuneScenario is scenario 5: spec edits of a running provisioner. The
// peer cannot be re-tuned in place: its figure is a restart with new flags
// until the new process holds the Lease.
func (b *bench) retuneScenario(ctx context.Context) error {
	return b.together(func() error {
		if err := b.retuneProvfleet(ctx); err != nil {
			return fmt.Errorf("provfleet: %w", err)
		}
		return nil
	}, func() error {
		if err := b.retuneUpstream(ctx); err != nil {
			return fmt.Errorf("upstream: %w", err)
		}
		return nil
	})
}

func (b *bench) retuneProvfleet(ctx context.Context) error {
	sys := &provfleetSystem{b: b}
	tenants := b.tenants(sys.name(), 1)
	defer sys.stop(ctx)
	if err := sys.start(ctx, tenants, 1, b.cfg.Lease); err != nil {
		return err
	}
	client := b.pcfg.ProvfleetV1alpha1().ProvisionerConfigs()
	var times []time.Duration
	begun := time.Now()
	for i := range b.cfg.S5Edits {
		start := time.Now()
		updated, err := b.editConfig(ctx, tenants[0].name, func(pc *v1alpha1.ProvisionerConfig) {
			// New thresholds and backoff each time; workers alternate.
			pc.Spec.Retry.ProvisionFailureThreshold = ptr.To(int32(10 + i)) //nolint:gosec // a few edits
			pc.Spec.Retry.InitialDelay = &metav1.Duration{Duration: time.Duration(1+i) * time.Second}
			pc.Spec.Workers = int32(2 + i%2)
		})
		if err != nil {
			return err
		}
		err = b.pollEvery(ctx, retunePoll, "the edit observed", func(ctx context.Context) (bool, error) {
			pc, err := client.Get(ctx, updated.Name, metav1.GetOptions{})
			if err != nil || pc.Status.ObservedGeneration != updated.Generation {
				return false, nil
			}
			c := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.ObservedGeneration == updated.Generation && c.Reason == v1alpha1.ReasonRunning, nil
		})
		if err != nil {
			return err
		}
		times = append(times, time.Since(start))
	}
	b.recordRetune(ctx, sys, begun, times, fmt.Sprintf("%d edits; latency: edit until status.observedGeneration and Ready=Running at the new generation (status is written only once the instance runs the new spec), polled every 20ms", len(times)))
	return nil
}

// editConfig applies edit to the ProvisionerConfig name as it is now, again
// after a conflict with the manager's own writes.
func (b *bench) editConfig(ctx context.Context, name string, edit func(*v1alpha1.ProvisionerConfig)) (*v1alpha1.ProvisionerConfig, error) {
	client := b.pcfg.ProvfleetV1alpha1().ProvisionerConfigs()
	var updated *v1alpha1.ProvisionerConfig
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pc, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("cannot read the ProvisionerConfig: %w", err)
		}
		edit(pc)
		updated, err = client.Update(ctx, pc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cannot edit the ProvisionerConfig: %w", err)
	}
	return updated, nil
}

// retunePoll is how often the harness reads a re-tuned ProvisionerConfig.
const retunePoll = 20 * time.Millisecond

func (b *bench) retuneUpstream(ctx context.Context) error {
	sys := &upstreamSystem{b: b}
	tenants := b.tenants(sys.name(), 1)
	defer sys.stop(ctx)
	if err := sys.start(ctx, tenants, 1, b.cfg.Lease); err != nil {
		return err
	}
	leases := b.kube.CoordinationV1().Leases(upstreamNamespace)
	name := upstreamLeaseName(tenants[0].provisionerName)
	var times []time.Duration
	begun := time.Now()
	for range min(b.cfg.S5Edits, b.cfg.S5PeerRestarts) {
		before, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("cannot read the peer's Lease: %w", err)
		}
		holder := ptr.Deref(before.Spec.HolderIdentity, "")
		start := time.Now()
		sys.signal(0, syscall.SIGTERM)
		if err := sys.restart(ctx, 0); err != nil {
			return err
		}
		err = b.poll(ctx, "the restarted peer leading", func(ctx context.Context) (bool, error) {
			l, err := leases.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			h := ptr.Deref(l.Spec.HolderIdentity, "")
			return h != "" && h != holder, nil
		})
		if err != nil {
			return err
		}
		times = append(times, time.Since(start))
	}
	b.recordRetune(ctx, sys, begun, times, fmt.Sprintf("%d restarts with new flags (the library has no in-place re-tune): SIGTERM until the new process holds the Lease", len(times)))
	return nil
}

// recordRetune records one system's scenario 5 measurement: the latencies of
// its re-tunes, begun at begun, and its processes' goroutines and peak RSS.
func (b *bench) recordRetune(ctx context.Context, sys system, begun time.Time, times []time.Duration, note string) {
	m := report.Measurement{Result: report.Result{Scenario: report.S5Retune, System: sys.name(), Tenants: 1, Replicas: 1,
		Seconds: time.Since(begun).Seconds()}}
	m.P50MS, m.P99MS = ms(measure.Percentile(times, 50)), ms(measure.Percentile(times, 99))
	m.Goroutines = goroutines(ctx, sys.metricsURLs())
	m.RSSMiB = mib(total(usage(sys.pids())).PeakRSS)
	m.Note = note
	b.record(m)
}

// leader waits until a running replica of sys leads t: a replica that has
// just taken over may not have said so yet.
func (b *bench) leader(ctx context.Context, sys system, t tenant) (int, error) {
	var leader int
	var last error
	err := b.poll(ctx, "a replica leading "+t.name, func(ctx context.Context) (bool, error) {
		leader, last = sys.leaderReplica(ctx, t)
		return last == nil, nil
	})
	if err != nil {
		return 0, errors.Join(err, last)
	}
	return leader, nil
}

// failoverScenario is scenario 6: two replicas; the leader gets SIGTERM,
// later the new leader SIGKILL, each time with claims pending.
func (b *bench) failoverScenario(ctx context.Context) error {
	var runs []func() error
	for _, sys := range b.systems() {
		runs = append(runs, func() error {
			if err := b.failoverRun(ctx, sys); err != nil {
				return fmt.Errorf("%s: %w", sys.name(), err)
			}
			return nil
		})
	}
	return b.together(runs...)
}

// failoverRun is one system's run of scenario 6: its leader gets SIGTERM,
// then the new leader SIGKILL, each a measured phase.
func (b *bench) failoverRun(ctx context.Context, sys system) error {
	tenants := b.tenants(sys.name(), 1)
	defer sys.stop(ctx)
	ns, baseline, err := b.begin(ctx, sys, tenants, 2, b.cfg.S6Lease)
	if err != nil {
		return err
	}
	var all []claimRef
	for _, f := range []struct {
		scenario string
		sig      syscall.Signal
	}{{report.S6SIGTERM, syscall.SIGTERM}, {report.S6SIGKILL, syscall.SIGKILL}} {
		refs, err := b.failoverPhase(ctx, sys, f.scenario, f.sig, ns, tenants[0], baseline)
		all = append(all, refs...)
		if err != nil {
			return err
		}
	}
	if _, err := b.deleteClaims(ctx, all); err != nil {
		return err
	}
	return b.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// failoverPhase sends sig to the replica leading t while creating claims of
// t, records how long until every one is provisioned and bound, and restarts
// the signalled replica. It returns the claims it created.
func (b *bench) failoverPhase(ctx context.Context, sys system, scenario string, sig syscall.Signal, ns string, t tenant, baseline apiSnapshot) ([]claimRef, error) {
	time.Sleep(b.cfg.Settle)
	leader, err := b.leader(ctx, sys, t)
	if err != nil {
		return nil, err
	}
	w, err := b.open(ctx, sys.pids())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	signalled := make(chan struct{})
	go func() {
		defer close(signalled)
		sys.signal(leader, sig)
	}()
	refs, err := b.createClaims(ctx, ns, scenario, []string{t.name}, b.cfg.S6Claims)
	if err != nil {
		return nil, err
	}
	st, err := b.waitProvisioned(ctx, refs, start)
	<-signalled
	if err != nil {
		return refs, err
	}
	m := report.Measurement{Result: report.Result{Scenario: scenario, System: sys.name(), Tenants: 1, Claims: len(refs), Replicas: 2,
		Seconds: st.last.Sub(start).Seconds()}}
	latencies(&m, st.toPV, st.toBound)
	m.Goroutines = goroutines(ctx, sys.metricsURLs())
	m.Note = "latency from the signal to the leader"
	if err := b.close(ctx, w, baseline, &m); err != nil {
		return refs, err
	}
	b.record(m)
	return refs, sys.restart(ctx, leader)
}
