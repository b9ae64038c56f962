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
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/provfleet/provfleet/internal/chaoshistory"
	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
)

// BinaryEnv names the manager built with the build tag chaos, which make
// builds before the tests it times.
const BinaryEnv = "PROVFLEET_CHAOS_MANAGER_BIN"

// chaosManager returns the manager of BinaryEnv, or builds one with the
// build tag chaos into dir.
func chaosManager(t *testing.T, dir string) string {
	t.Helper()
	if bin := os.Getenv(BinaryEnv); bin != "" {
		return bin
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "manager-chaos")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-tags", "chaos", "-o", bin, "./cmd/manager")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot build the manager with the tag chaos: %v\n%s", err, out)
	}
	return bin
}

// The short form of `make chaos`, on every `make test`: a minute of faults
// of every kind, at the default rates, with two replicas; then the
// system must converge and pass every check.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run starts a control plane")
	}
	work, err := os.MkdirTemp("", "provfleet-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	opts := Defaults()
	opts.Seed, opts.Duration, opts.Managers, opts.ClaimsPerSecond = seed, time.Minute, 2, 3
	opts.Every = Intervals{Kill: 10 * time.Second, Roll: 40 * time.Second, Partition: 30 * time.Second, NFSRestart: 40 * time.Second, Config: 15 * time.Second, Node: 60 * time.Second}
	opts.ConvergeTimeout = 3 * time.Minute
	opts.ManagerBinary, opts.WorkDir = chaosManager(t, work), work
	var progress bytes.Buffer
	opts.Progress = &progress
	result, err := Run(t.Context(), opts)
	if err != nil {
		t.Fatalf("the chaos run (seed %d) could not be carried out: %v\n%s\nits folder is kept in %s", seed, err, progress.String(), work)
	}
	t.Logf("%s\n%s", progress.String(), result.Markdown())
	if !result.Passed() {
		t.Fatalf("the chaos run with seed %d failed; its logs, histories and disks are kept in %s", seed, work)
	}
	if result.Claims < 100 || len(result.APIFaults) == 0 || len(result.StoreFaults) == 0 || len(result.NFSFaults) == 0 {
		t.Errorf("the run made %d claims and injected API faults %v, store faults %v, NFS faults %v: want 100 claims or more and faults of every layer",
			result.Claims, result.APIFaults, result.StoreFaults, result.NFSFaults)
	}
	// The audit log holds the creation of every live claim's volume, so the
	// history the run judged by was there to judge.
	if result.PVsCreated < result.ClaimsLive || result.DirsMade < result.ClaimsLive {
		t.Errorf("the histories record %d PersistentVolumes and %d directories made for %d live claims", result.PVsCreated, result.DirsMade, result.ClaimsLive)
	}
	if result.Disruptions["SIGKILL manager"]+result.Disruptions["SIGKILL node agent"] == 0 {
		t.Errorf("no process was SIGKILLed: %v", result.Disruptions)
	}
	for _, k := range []string{"Node removed and returned", "NFS server restarted"} {
		if result.Disruptions[k] == 0 {
			t.Errorf("no %q in the run: %v", k, result.Disruptions)
		}
	}
	if len(result.Partitions) == 0 {
		t.Error("no process was cut off from the apiserver")
	}
	_ = os.RemoveAll(work)
}

// A release build of the manager carries no fault layer.
func TestReleaseManagerCarriesNoFaults(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := managerproc.Build(t.Context(), root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{chaoshistory.StoreFaultsEnv, chaoshistory.HistoryEnv, chaoshistory.IdentityEnv} {
		if bytes.Contains(data, []byte(name)) {
			t.Errorf("the release manager %s holds %s: the fault layer is in it", bin, name)
		}
	}
}

// The seed replays the schedule; every kind of disruption is in it, each
// early enough to end before the faults go off.
func TestSchedule(t *testing.T) {
	every := Defaults().Every
	a, b := schedule(7, time.Minute, every), schedule(7, time.Minute, every)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two schedules of one seed differ (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff(a, schedule(8, time.Minute, every)); diff == "" {
		t.Error("two seeds drew the same schedule")
	}
	kinds := map[kind]int{}
	for _, e := range a {
		kinds[e.Kind]++
		if e.At < 0 || e.At >= 48*time.Second {
			t.Errorf("%s at %v: not in the first 80%% of the run", e.Kind, e.At)
		}
	}
	for _, k := range []kind{kindKill, kindRoll, kindPartition, kindNFSRestart, kindConfig, kindNode} {
		if kinds[k] == 0 {
			t.Errorf("no %s in a minute's schedule: %v", k, kinds)
		}
	}
	long := schedule(7, 10*time.Minute, every)
	if n := len(long); n < 40 {
		t.Errorf("ten minutes drew %d disruptions, want about 60 at the default intervals", n)
	}
}

// A process cut off acts on volumes only until its Lease could expire.
func TestActedWhileCut(t *testing.T) {
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	cut := []partition{{Identity: "manager-1", Start: start, End: start.Add(20 * time.Second), Lease: 6 * time.Second}}
	at := func(identity string, after time.Duration) chaoshistory.Entry {
		return chaoshistory.Entry{Start: start.Add(after), Time: start.Add(after + time.Second), Identity: identity, Op: "Mkdir", Path: "pvc-1"}
	}
	cases := map[string]struct {
		history []chaoshistory.Entry
		want    int
	}{
		"begun within its Lease, ended after": {history: []chaoshistory.Entry{at("manager-1", 5500*time.Millisecond)}, want: 0},
		"after its Lease":                     {history: []chaoshistory.Entry{at("manager-1", 7*time.Second)}, want: 1},
		"after the partition ended":           {history: []chaoshistory.Entry{at("manager-1", 21*time.Second)}, want: 0},
		"another process":                     {history: []chaoshistory.Entry{at("manager-2", 7*time.Second)}, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := actedWhileCut(tc.history, cut); len(got) != tc.want {
				t.Errorf("actedWhileCut: %v, want %d problems", got, tc.want)
			}
		})
	}
}

// The end state's checks find each kind of damage.
func TestCheckState(t *testing.T) {
	local := &provisioner{name: "local-wffc", base: "local"}
	r := &runner{c: &cluster{opts: Options{WorkDir: "/work"}}, provisioners: []*provisioner{local}}
	kept := &claim{namespace: "tenant-a", name: "kept", provisioner: local, uid: "u1"}
	boundPVC := func(volume string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	}
	pv := func(name string, uid types.UID, phase corev1.PersistentVolumePhase) corev1.PersistentVolume {
		return corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				ClaimRef:               &corev1.ObjectReference{UID: uid},
				StorageClassName:       "local-wffc",
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/work/nodes/a/local/" + name}},
			},
			Status: corev1.PersistentVolumeStatus{Phase: phase},
		}
	}
	cases := map[string]struct {
		state *state
		want  []int // problems per check: bound, orphans, released, dirs
	}{
		"converged": {
			state: &state{claims: map[types.UID]*corev1.PersistentVolumeClaim{"u1": boundPVC("pvc-u1")},
				pvs: []corev1.PersistentVolume{pv("pvc-u1", "u1", corev1.VolumeBound)}, dirs: map[string]string{"/work/nodes/a/local/pvc-u1": "local-wffc"}},
			want: []int{0, 0, 0, 0},
		},
		"pending claim, leaked volume, stuck Released, stray directory, trash": {
			state: &state{claims: map[types.UID]*corev1.PersistentVolumeClaim{"u1": {Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}},
				pvs:   []corev1.PersistentVolume{pv("pvc-u9", "u9", corev1.VolumeReleased)},
				dirs:  map[string]string{"/work/nodes/a/local/pvc-u8": "local-wffc", "/work/nodes/a/local/pvc-u9": "local-wffc"},
				trash: []string{"/work/nodes/a/local/.provfleet-deleting/x"}},
			want: []int{1, 1, 1, 2},
		},
		"a directory a record explains": {
			state: &state{claims: map[types.UID]*corev1.PersistentVolumeClaim{"u1": boundPVC("pvc-u1")},
				pvs:     []corev1.PersistentVolume{pv("pvc-u1", "u1", corev1.VolumeBound)},
				dirs:    map[string]string{"/work/nodes/a/local/pvc-u1": "local-wffc", "/work/nodes/a/local/pvc-u7": "local-wffc"},
				records: map[string]bool{"/work/nodes/a/local/pvc-u7": true}},
			want: []int{0, 0, 0, 0},
		},
		"two volumes for one claim": {
			state: &state{claims: map[types.UID]*corev1.PersistentVolumeClaim{"u1": boundPVC("pvc-u1")},
				pvs: []corev1.PersistentVolume{pv("pvc-u1", "u1", corev1.VolumeBound), pv("pvc-other", "u1", corev1.VolumeBound)}},
			want: []int{1, 0, 0, 0},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []int
			for _, c := range r.checkState(tc.state, []*claim{kept}) {
				got = append(got, len(c.Problems))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems per check (-want +got):\n%s", diff)
			}
		})
	}
}

// Double provisioning is judged from the histories: a PersistentVolume
// created twice, or a directory made for a volume left beside the one it
// names.
func TestCheckHistory(t *testing.T) {
	nfs := &provisioner{name: "nfs-immediate", nfs: &nfsServer{}}
	w := &workload{claims: []*claim{{provisioner: nfs, uid: "u1"}}}
	r := &runner{w: w, c: &cluster{}}
	end := &state{
		pvs:  []corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pvc-u1"}, Spec: corev1.PersistentVolumeSpec{StorageClassName: "nfs-immediate", PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Path: exportPath + "/pvc-u1"}}}}},
		dirs: map[string]string{"nfs:nfs-immediate/pvc-u1": "nfs-immediate", "/work/nodes/b/placed/pvc-u1": "local-immediate"},
	}
	ours := map[string]bool{"pvc-u1": true}
	cases := map[string]struct {
		creates []pvCreate
		made    []madeDir
		want    int
	}{
		"once":                          {creates: []pvCreate{{Name: "pvc-u1"}}, made: []madeDir{{PV: "pvc-u1", Location: "pvc-u1", NFS: true}}, want: 0},
		"created twice":                 {creates: []pvCreate{{Name: "pvc-u1"}, {Name: "pvc-u1"}}, want: 1},
		"a volume of no claim":          {creates: []pvCreate{{Name: "pvc-u1"}, {Name: "pvc-stranger"}}, want: 1},
		"another directory left for it": {creates: []pvCreate{{Name: "pvc-u1"}}, made: []madeDir{{PV: "pvc-u1", Location: "/work/nodes/b/placed/pvc-u1"}}, want: 1},
		"another directory made, gone":  {creates: []pvCreate{{Name: "pvc-u1"}}, made: []madeDir{{PV: "pvc-u1", Location: "/work/nodes/c/placed/pvc-u1"}}, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := r.checkHistory(end, tc.creates, tc.made, ours); len(got.Problems) != tc.want {
				t.Errorf("checkHistory: %v, want %d problems", got.Problems, tc.want)
			}
		})
	}
}
