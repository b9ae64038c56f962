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
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

const gi = int64(1) << 30

func TestChooseNode(t *testing.T) {
	tests := map[string]struct {
		request    int64
		candidates []nodeCandidate
		budget     nodeBudget
		want       string // empty: none fits
	}{
		"most storage budget left": {
			request: gi,
			budget:  nodeBudget{Storage: ptr.To(10 * gi)},
			candidates: []nodeCandidate{
				{Name: "a", Volumes: 1, Used: 4 * gi},
				{Name: "b", Volumes: 3, Used: 2 * gi},
				{Name: "c", Volumes: 1, Used: 5 * gi},
			},
			want: "b",
		},
		"most reported space without a storage budget": {
			request: gi,
			candidates: []nodeCandidate{
				{Name: "a", Volumes: 0, Available: ptr.To(5 * gi)},
				{Name: "b", Volumes: 4, Available: ptr.To(9 * gi)},
				{Name: "c", Volumes: 0},
			},
			want: "b",
		},
		"fewest volumes when the room is equal": {
			request: gi,
			budget:  nodeBudget{Storage: ptr.To(10 * gi)},
			candidates: []nodeCandidate{
				{Name: "a", Volumes: 3, Used: 2 * gi},
				{Name: "b", Volumes: 1, Used: 2 * gi},
				{Name: "c", Volumes: 2, Used: 2 * gi},
			},
			want: "b",
		},
		"reported space a few bytes apart counts as equal: the fewest volumes win": {
			request: gi,
			candidates: []nodeCandidate{
				{Name: "a", Volumes: 2, Available: ptr.To(50*gi + 4096)},
				{Name: "b", Volumes: 1, Available: ptr.To(50 * gi)},
			},
			want: "b",
		},
		"reports less than a hundredth of the disk apart count as equal: the fewest volumes win": {
			request: gi,
			candidates: []nodeCandidate{
				{Name: "a", Volumes: 2, Available: ptr.To(72 * gi), Total: ptr.To(250 * gi)},
				{Name: "b", Volumes: 1, Available: ptr.To(70*gi + gi/2), Total: ptr.To(250 * gi)},
			},
			want: "b",
		},
		"reports more than a hundredth of the disk apart: the most space wins": {
			request: gi,
			candidates: []nodeCandidate{
				{Name: "a", Volumes: 2, Available: ptr.To(72 * gi), Total: ptr.To(250 * gi)},
				{Name: "b", Volumes: 1, Available: ptr.To(69 * gi), Total: ptr.To(250 * gi)},
			},
			want: "a",
		},
		"what a report does not count yet is taken off its space": {
			request: gi,
			candidates: []nodeCandidate{
				{Name: "a", Volumes: 0, Used: 6 * gi, Pending: 6 * gi, Available: ptr.To(10 * gi)},
				{Name: "b", Volumes: 3, Available: ptr.To(8 * gi)},
			},
			want: "b",
		},
		"volumes a report counts already are not taken off again": {
			request: gi,
			candidates: []nodeCandidate{
				{Name: "a", Volumes: 1, Used: 8 * gi, Available: ptr.To(10 * gi)},
				{Name: "b", Volumes: 0, Available: ptr.To(5 * gi)},
			},
			want: "a",
		},
		"most volumes left of maxVolumes, whatever the reported space": {
			request: gi,
			budget:  nodeBudget{MaxVolumes: 3},
			candidates: []nodeCandidate{
				{Name: "a", Volumes: 1, Available: ptr.To(90 * gi)},
				{Name: "b", Volumes: 0, Available: ptr.To(10 * gi)},
			},
			want: "b",
		},
		"a node whose volume count is full is skipped": {
			request: gi,
			budget:  nodeBudget{MaxVolumes: 2},
			candidates: []nodeCandidate{
				{Name: "a", Volumes: 2, Available: ptr.To(100 * gi)},
				{Name: "b", Volumes: 1, Available: ptr.To(gi)},
			},
			want: "b",
		},
		"a node without storage left for the request is skipped": {
			request: 3 * gi,
			budget:  nodeBudget{Storage: ptr.To(10 * gi)},
			candidates: []nodeCandidate{
				{Name: "a", Volumes: 0, Used: 8 * gi},
				{Name: "b", Volumes: 5, Used: 7 * gi},
			},
			want: "b",
		},
		"every budget full: the claim waits": {
			request: gi,
			budget:  nodeBudget{MaxVolumes: 1, Storage: ptr.To(10 * gi)},
			candidates: []nodeCandidate{
				{Name: "a", Volumes: 1, Used: gi},
				{Name: "b", Volumes: 0, Used: 10 * gi},
			},
		},
		"no served node: the claim waits": {
			request: gi,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			node, ok := chooseNode("uid-1", tt.request, tt.candidates, tt.budget)
			got := ""
			if ok {
				got = node.Name
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("chosen node (-want +got):\n%s", diff)
			}
			// The order the nodes come in must not matter.
			reversed := slices.Clone(tt.candidates)
			slices.Reverse(reversed)
			again, _ := chooseNode("uid-1", tt.request, reversed, tt.budget)
			if diff := cmp.Diff(node, again); diff != "" {
				t.Errorf("chosen node depends on the order (-forward +reversed):\n%s", diff)
			}
		})
	}
}

// TestChooseNodeSpreadsEqualNodes proves that the hash of claim and node
// spreads claims over equal nodes, the same way in every order.
func TestChooseNodeSpreadsEqualNodes(t *testing.T) {
	candidates := []nodeCandidate{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	counts := map[string]int{}
	for i := range 300 {
		uid := types.UID(fmt.Sprintf("claim-%d", i))
		node, ok := chooseNode(uid, gi, candidates, nodeBudget{})
		if !ok {
			t.Fatalf("no node chosen for %s", uid)
		}
		reversed, _ := chooseNode(uid, gi, []nodeCandidate{{Name: "c"}, {Name: "b"}, {Name: "a"}}, nodeBudget{})
		if reversed.Name != node.Name {
			t.Fatalf("claim %s: %s in one order, %s in the other", uid, node.Name, reversed.Name)
		}
		counts[node.Name]++
	}
	for _, n := range candidates {
		if counts[n.Name] < 50 {
			t.Errorf("node %s got %d of 300 claims: %v", n.Name, counts[n.Name], counts)
		}
	}
}

func TestNodeList(t *testing.T) {
	many := make([]string, 12)
	for i := range many {
		many[i] = fmt.Sprintf("n%02d", 12-i)
	}
	tests := map[string]struct {
		names []string
		want  string
	}{
		"none":  {want: "no node"},
		"a few": {names: []string{"b", "a"}, want: "nodes a, b"},
		"many":  {names: many, want: "nodes n01, n02, n03, n04, n05, n06, n07, n08, n09, n10 and 2 more"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, nodeList(tt.names)); diff != "" {
				t.Errorf("list (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAllowedBy(t *testing.T) {
	nodes := map[string]*corev1.Node{
		"a": {ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{corev1.LabelHostname: "a", "zone": "1"}}},
		"b": {ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{corev1.LabelHostname: "b", "zone": "2"}}},
		"c": {ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{corev1.LabelHostname: "c"}}},
	}
	served := map[string]*nodeCandidate{"a": {Name: "a"}, "b": {Name: "b"}, "c": {Name: "c"}}
	term := func(key string, values ...string) corev1.TopologySelectorTerm {
		return corev1.TopologySelectorTerm{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: key, Values: values}}}
	}
	tests := map[string]struct {
		topologies []corev1.TopologySelectorTerm
		want       []string
	}{
		"none: every served node":  {want: []string{"a", "b", "c"}},
		"by host name":             {topologies: []corev1.TopologySelectorTerm{term(corev1.LabelHostname, "b", "x")}, want: []string{"b"}},
		"any of several terms":     {topologies: []corev1.TopologySelectorTerm{term("zone", "1"), term(corev1.LabelHostname, "c")}, want: []string{"a", "c"}},
		"a node without the label": {topologies: []corev1.TopologySelectorTerm{term("zone", "1", "2")}, want: []string{"a", "b"}},
		"every expression of a term": {topologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: "zone", Values: []string{"1", "2"}}, {Key: corev1.LabelHostname, Values: []string{"b", "c"}},
		}}}, want: []string{"b"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			class := &storagev1.StorageClass{AllowedTopologies: tt.topologies}
			got := slices.Sorted(maps.Keys(allowedBy(class, served, nodes)))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("allowed nodes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCandidatesCountEachVolumeOnce: a claim placed on a node counts there
// until its volume is made, and then only its volume does, even before the
// binder binds the claim to it.
func TestCandidatesCountEachVolumeOnce(t *testing.T) {
	now := time.Now()
	got := candidatesOfNodeA(t, provisionerReport{Reason: v1alpha1.ReasonRunning}, now,
		[]*corev1.PersistentVolume{volumeOnNodeA("pv-bound", "bound", "1Gi", now), volumeOnNodeA("pv-unbound", "made", "1Gi", now)},
		[]*corev1.PersistentVolumeClaim{claimOnNodeA("bound", "pv-bound"), claimOnNodeA("made", ""), claimOnNodeA("placed", "")})
	// The report does not say when it probed: every volume counts against
	// its space, as the placed claim does.
	want := map[string]*nodeCandidate{"a": {Name: "a", Volumes: 3, Used: 3 * gi, Pending: 3 * gi}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("candidates (-want +got):\n%s", diff)
	}
}

// TestCandidatesPendingSinceTheProbe: the free space a node's agent reports
// counts the volumes made before its probe, not those made since, nor the
// claims placed there whose volume is not made yet.
func TestCandidatesPendingSinceTheProbe(t *testing.T) {
	probed := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	report := provisionerReport{Reason: v1alpha1.ReasonRunning, Available: ptr.To(50 * gi), Total: ptr.To(100 * gi),
		ProbedAt: &metav1.Time{Time: probed.Add(700 * time.Millisecond)}}
	got := candidatesOfNodeA(t, report, probed.Add(time.Minute), []*corev1.PersistentVolume{
		volumeOnNodeA("pv-before", "before", "4Gi", probed.Add(-time.Minute)),
		// Made in the probe's second, perhaps after it: the report and the
		// API keep whole seconds.
		volumeOnNodeA("pv-same-second", "same-second", "2Gi", probed),
		volumeOnNodeA("pv-after", "after", "1Gi", probed.Add(time.Second)),
	}, []*corev1.PersistentVolumeClaim{claimOnNodeA("placed", "")})
	want := map[string]*nodeCandidate{"a": {Name: "a", Volumes: 4, Used: 8 * gi, Pending: 4 * gi,
		Available: ptr.To(50 * gi), Total: ptr.To(100 * gi)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("candidates (-want +got):\n%s", diff)
	}
}

// candidatesOfNodeA returns the candidates of a fake coordinator at now
// whose node a has a live agent that reports report.
func candidatesOfNodeA(t *testing.T, report provisionerReport, now time.Time, volumes []*corev1.PersistentVolume, claims []*corev1.PersistentVolumeClaim) map[string]*nodeCandidate {
	t.Helper()
	data, err := json.Marshal(nodeReport{"fake": report})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := fakeCoordinator(t, kubefake.NewClientset(), &v1alpha1.HostPathBackend{Path: "/var/lib/fake"})
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "nodes", Name: NodeLeaseName("a"), Annotations: map[string]string{AnnNodeReport: string(data)}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent-a"), LeaseDurationSeconds: ptr.To[int32](600), RenewTime: &metav1.MicroTime{Time: now}},
	}
	if err := c.nodeLeases.GetStore().Add(lease); err != nil {
		t.Fatal(err)
	}
	v := &fleetView{now: now, nodes: map[string]*corev1.Node{"a": {ObjectMeta: metav1.ObjectMeta{Name: "a"}}}, volumes: volumes, claims: claims}
	return c.candidates(v)
}

// claimOnNodeA is a claim of 1Gi placed on node a, bound to volumeName when
// set.
func claimOnNodeA(uid types.UID, volumeName string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: string(uid), UID: uid, Annotations: map[string]string{provisioning.AnnSelectedNode: "a"}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volumeName,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
}

// volumeOnNodeA is a volume of size on node a, made at created for the
// claim uid.
func volumeOnNodeA(name string, uid types.UID, size string, created time.Time) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created), Annotations: map[string]string{backend.AnnNode: "a"}},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: string(uid), UID: uid}},
	}
}

// The placements of one sync are written as many at a time as the
// provisioner has workers, never more: a burst of claims does not wait for
// each write in turn. The apiserver here holds each write until as many as
// the workers are under way (or a minute, which a writer that sends one at
// a time would meet at every write), so the most seen at once shows how
// they went out.
func TestWritePlacementsAtOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	workers := provisioning.DefaultConfig("provfleet.io/fake").Workers
	var mu sync.Mutex
	inFlight, most := 0, 0
	allUnderWay := make(chan struct{})
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if inFlight == workers {
			close(allUnderWay)
		}
		mu.Unlock()
		select {
		case <-allUnderWay:
		case <-time.After(time.Minute):
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: path.Base(r.URL.Path)},
		})
	}))
	t.Cleanup(apiserver.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: apiserver.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := fakeCoordinator(t, client, &v1alpha1.HostPathBackend{Path: "/var/lib/fake"})
	term := &coordTerm{wake: make(chan struct{}, 1), warned: map[types.UID]string{}, placed: map[types.UID]string{}}
	var chosen []*placement
	want := map[types.UID]string{}
	for i := range 3 * workers {
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("claim-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}}
		node := fmt.Sprintf("node-%d", i%3)
		chosen = append(chosen, &placement{claim: claim, node: nodeCandidate{Name: node}})
		want[claim.UID] = node
	}
	if !c.writePlacements(ctx, term, chosen) {
		t.Fatal("a placement was not written")
	}
	if most != workers {
		t.Errorf("%d placements were written at once, want %d (the workers)", most, workers)
	}
	if diff := cmp.Diff(want, term.placed); diff != "" {
		t.Errorf("placed claims (-want +got):\n%s", diff)
	}
}

// A clone is placed on the node of its source's volume when the class
// allows that node; otherwise, or while its source has no volume, as any
// claim, for its node agent to refuse with an Event that says why.
func TestWithCloneSource(t *testing.T) {
	c, _ := fakeCoordinator(t, kubefake.NewClientset(), &v1alpha1.HostPathBackend{Path: "/var/lib/fake"})
	onNode := func(name, node string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{backend.AnnNode: node}}}
	}
	source := func(name, volume string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
	}
	for _, obj := range []any{source("on-b", "pv-b"), source("on-c", "pv-c"), source("pending", ""), source("lost", "pv-gone")} {
		if err := c.informers.Claims.GetStore().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	for _, obj := range []any{onNode("pv-b", "b"), onNode("pv-c", "c")} {
		if err := c.informers.Volumes.GetStore().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	cloneOf := func(name string, namespace *string) *corev1.PersistentVolumeClaim {
		claim := claimOnNodeA("clone", "")
		claim.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: name, Namespace: namespace}
		return claim
	}
	other := "other"
	tests := map[string]struct {
		claim *corev1.PersistentVolumeClaim
		want  []string
	}{
		"no clone":                    {claim: claimOnNodeA("claim", ""), want: []string{"a", "b"}},
		"source on an allowed node":   {claim: cloneOf("on-b", nil), want: []string{"b"}},
		"source on another node":      {claim: cloneOf("on-c", nil), want: []string{"a", "b"}},
		"source pending":              {claim: cloneOf("pending", nil), want: []string{"a", "b"}},
		"source's volume gone":        {claim: cloneOf("lost", nil), want: []string{"a", "b"}},
		"source missing":              {claim: cloneOf("missing", nil), want: []string{"a", "b"}},
		"source of another namespace": {claim: cloneOf("on-b", &other), want: []string{"a", "b"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			allowed := map[string]*nodeCandidate{"a": {Name: "a"}, "b": {Name: "b"}}
			got := slices.Sorted(maps.Keys(c.withCloneSource(tc.claim, allowed)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("nodes the clone may be placed on (-want +got):\n%s", diff)
			}
		})
	}
}
