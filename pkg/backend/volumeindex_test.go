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

package backend

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func hostPathPV(name, p string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p}}},
	}
}

func localPV(name, p string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: p}}},
	}
}

func nfsPV(name, server, p string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: server, Path: p}}},
	}
}

// withOptions gives pv mount options.
func withOptions(pv *corev1.PersistentVolume, options ...string) *corev1.PersistentVolume {
	pv.Spec.MountOptions = options
	return pv
}

// onNode pins pv to node with the annotation of AnnNode.
func onNode(pv *corev1.PersistentVolume, node string) *corev1.PersistentVolume {
	pv.Annotations = map[string]string{AnnNode: node}
	return pv
}

// withAffinity gives pv a required node affinity of the terms, each a set
// of kubernetes.io/hostname values.
func withAffinity(pv *corev1.PersistentVolume, terms ...[]string) *corev1.PersistentVolume {
	selector := &corev1.NodeSelector{}
	for _, values := range terms {
		selector.NodeSelectorTerms = append(selector.NodeSelectorTerms, corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: values}},
		})
	}
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: selector}
	return pv
}

func csiPV(name string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}}},
	}
}

func TestIndexVolumePaths(t *testing.T) {
	tests := map[string]struct {
		obj  any
		want []string
	}{
		"hostPath pinned to no node": {
			obj:  hostPathPV("a", "/srv/vols/a"),
			want: []string{"host=:/srv/vols/a", "host-under=:/srv/vols", "host-under=:/srv", "host-under=:/"},
		},
		"local, cleaned, on the node of its annotation": {
			obj:  withAffinity(onNode(localPV("a", "/srv//vols/./a/"), "node-a"), []string{"host-a"}),
			want: []string{"host=node-a:/srv/vols/a", "host-under=node-a:/srv/vols", "host-under=node-a:/srv", "host-under=node-a:/"},
		},
		"local of another provisioner, on the node of its affinity": {
			obj:  withAffinity(localPV("a", "/srv/a"), []string{"node-b"}),
			want: []string{"host=node-b:/srv/a", "host-under=node-b:/srv", "host-under=node-b:/"},
		},
		"a node name with a slash": {
			obj: onNode(localPV("a", "/srv/a"), "node/a"),
		},
		"the root": {
			obj:  hostPathPV("a", "/"),
			want: []string{"host=:/"},
		},
		"nfs": {
			obj:  nfsPV("a", "nfs.example", "/export/a"),
			want: []string{"nfs=nfs.example:/export/a", "nfs-under=nfs.example:/export", "nfs-under=nfs.example:/"},
		},
		"relative path": {obj: hostPathPV("a", "srv/a")},
		"nfs server with a slash, which would reach another server's keys": {
			obj: nfsPV("a", "nfs.example:/export", "/a"),
		},
		"another source":      {obj: csiPV("a")},
		"not a volume at all": {obj: &corev1.PersistentVolumeClaim{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := IndexVolumePaths(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}

// volumeFinder is what PathIndex and ListedVolumes both answer.
type volumeFinder interface {
	List() ([]*corev1.PersistentVolume, error)
	Exists(name string) (bool, error)
	Overlapping(server, volumePath string) ([]*corev1.PersistentVolume, error)
}

// implementations returns a PathIndex and a ListedVolumes over the same
// PersistentVolumes.
func implementations(t *testing.T, pvs []*corev1.PersistentVolume) map[string]volumeFinder {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{VolumePathIndex: IndexVolumePaths})
	for _, pv := range pvs {
		if err := indexer.Add(pv); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]volumeFinder{
		"indexed": NewPathIndex(indexer),
		"listed":  NewListedVolumes(func() ([]*corev1.PersistentVolume, error) { return pvs, nil }),
	}
}

func names(pvs []*corev1.PersistentVolume) []string {
	var out []string
	for _, pv := range pvs {
		out = append(out, pv.Name)
	}
	slices.Sort(out)
	return out
}

func TestOverlapping(t *testing.T) {
	pvs := []*corev1.PersistentVolume{
		hostPathPV("host-a-b", "/a/b"),
		localPV("local-a-bc", "/a/bc/"),
		hostPathPV("host-a-b-c-d", "/a/b/c/d"),
		hostPathPV("host-x", "/x"),
		hostPathPV("host-relative", "a/b"),
		nfsPV("nfs1-a-b", "nfs1", "/a/b"),
		nfsPV("nfs1-a-b-c", "nfs1", "/a/b/c/"),
		nfsPV("nfs2-a", "nfs2", "/a"),
		nfsPV("nfs-no-server-a-b", "", "/a/b"),
		csiPV("csi"),
	}
	tests := map[string]struct {
		pvs        []*corev1.PersistentVolume
		server     string
		volumePath string
		want       []string
		wantErr    string
	}{
		"the path itself, the volumes inside and none of the siblings": {
			volumePath: "/a/b", want: []string{"host-a-b", "host-a-b-c-d"},
		},
		"a trailing slash": {
			volumePath: "/a/b/", want: []string{"host-a-b", "host-a-b-c-d"},
		},
		"a sibling with a common name prefix": {
			volumePath: "/a/bc/d", want: []string{"local-a-bc"},
		},
		"between two volumes": {
			volumePath: "/a/b/c", want: []string{"host-a-b", "host-a-b-c-d"},
		},
		"a parent of every volume of a file system": {
			volumePath: "/a", want: []string{"host-a-b", "host-a-b-c-d", "local-a-bc"},
		},
		"the root": {
			volumePath: "/", want: []string{"host-a-b", "host-a-b-c-d", "host-x", "local-a-bc"},
		},
		"a volume at the root contains everything": {
			pvs: []*corev1.PersistentVolume{hostPathPV("root", "/"), nfsPV("nfs-root", "nfs1", "/")}, volumePath: "/y/z", want: []string{"root"},
		},
		"nowhere near a volume": {
			volumePath: "/y/z",
		},
		"one NFS server": {
			server: "nfs1", volumePath: "/a/b", want: []string{"nfs1-a-b", "nfs1-a-b-c"},
		},
		"inside a volume of another NFS server": {
			server: "nfs2", volumePath: "/a/b/c", want: []string{"nfs2-a"},
		},
		"an NFS server without volumes": {
			server: "nfs3", volumePath: "/",
		},
		"servers on one address with different ports": {
			pvs: []*corev1.PersistentVolume{
				nfsPV("default-port", "nfs1", "/a/b"),
				withOptions(nfsPV("default-port-written", "nfs1", "/a"), "nfsvers=3,port=2049"),
				withOptions(nfsPV("port-2050", "nfs1", "/a/b"), "port=2050", "mountport=2050"),
				withOptions(nfsPV("port-2051", "nfs1", "/a/b"), "port=2051"),
			},
			server: NFSServer("nfs1", 2050), volumePath: "/a", want: []string{"port-2050"},
		},
		"the default port, written or not": {
			pvs: []*corev1.PersistentVolume{
				nfsPV("default-port", "nfs1", "/a/b"),
				withOptions(nfsPV("default-port-written", "nfs1", "/a"), "nfsvers=3,port=2049"),
				withOptions(nfsPV("port-2050", "nfs1", "/a/b"), "port=2050"),
			},
			server: NFSServer("nfs1", 0), volumePath: "/a/b", want: []string{"default-port", "default-port-written"},
		},
		"a node's volumes and those pinned to no node, not another node's nor an NFS server's of its name": {
			pvs: nodeVolumes(), server: HostNode("node-a"), volumePath: "/v/x", want: []string{"a-x", "unpinned"},
		},
		"a node's volumes by annotation and by the affinity of another provisioner": {
			pvs: nodeVolumes(), server: HostNode("node-b"), volumePath: "/v", want: []string{"b-x", "b-y-affinity", "unpinned"},
		},
		"a volume that may be on two nodes is pinned to neither": {
			pvs: nodeVolumes(), server: HostNode("node-c"), volumePath: "/w", want: []string{"two-nodes"},
		},
		"no server: the volumes pinned to no node alone": {
			pvs: nodeVolumes(), volumePath: "/", want: []string{"two-nodes", "unpinned"},
		},
		"the empty node is no server": {
			pvs: nodeVolumes(), server: HostNode(""), volumePath: "/", want: []string{"two-nodes", "unpinned"},
		},
		"a node name with a slash": {
			server: HostNode("node/a"), volumePath: "/b", wantErr: "holds no",
		},
		"a relative path": {
			volumePath: "a/b", wantErr: "not absolute",
		},
		"a server name with a slash": {
			server: "nfs1:/a", volumePath: "/b", wantErr: "holds no",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := pvs
			if tc.pvs != nil {
				set = tc.pvs
			}
			for impl, volumes := range implementations(t, set) {
				got, err := volumes.Overlapping(tc.server, tc.volumePath)
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Errorf("%s: error %v, want one containing %q", impl, err, tc.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", impl, err)
				}
				if diff := cmp.Diff(tc.want, names(got)); diff != "" {
					t.Errorf("%s: Overlapping(%q, %q) (-want +got):\n%s", impl, tc.server, tc.volumePath, diff)
				}
			}
		})
	}
}

// nodeVolumes are volumes of two nodes, of no node and of an NFS server
// named like a node.
func nodeVolumes() []*corev1.PersistentVolume {
	return []*corev1.PersistentVolume{
		onNode(localPV("a-x", "/v/x"), "node-a"),
		withAffinity(onNode(hostPathPV("b-x", "/v/x"), "node-b"), []string{"host-b"}),
		withAffinity(localPV("b-y-affinity", "/v/y"), []string{"node-b"}),
		withAffinity(localPV("two-nodes", "/w"), []string{"node-a"}, []string{"node-b"}),
		hostPathPV("unpinned", "/v"),
		nfsPV("nfs-node-a", "node-a", "/v/x"),
	}
}

func TestVolumeNode(t *testing.T) {
	tests := map[string]struct {
		pv   *corev1.PersistentVolume
		want string
	}{
		"the annotation wins over the affinity": {
			pv: withAffinity(onNode(localPV("a", "/a"), "node-a"), []string{"host-a"}), want: "node-a",
		},
		"the affinity of another provisioner": {
			pv: withAffinity(localPV("a", "/a"), []string{"node-b"}), want: "node-b",
		},
		"the hostname among other requirements": {
			pv: func() *corev1.PersistentVolume {
				pv := withAffinity(localPV("a", "/a"), []string{"node-b"})
				term := &pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0]
				term.MatchExpressions = append([]corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z"}}}, term.MatchExpressions...)
				return pv
			}(),
			want: "node-b",
		},
		"two terms, either node":  {pv: withAffinity(localPV("a", "/a"), []string{"node-a"}, []string{"node-b"})},
		"two values, either node": {pv: withAffinity(localPV("a", "/a"), []string{"node-a", "node-b"})},
		"another operator": {
			pv: func() *corev1.PersistentVolume {
				pv := withAffinity(localPV("a", "/a"), []string{"node-a"})
				pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Operator = corev1.NodeSelectorOpNotIn
				return pv
			}(),
		},
		"affinity without a required selector": {
			pv: func() *corev1.PersistentVolume {
				pv := localPV("a", "/a")
				pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{}
				return pv
			}(),
		},
		"neither": {pv: hostPathPV("a", "/a")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, VolumeNode(tc.pv)); diff != "" {
				t.Errorf("VolumeNode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListAndExists(t *testing.T) {
	pvs := []*corev1.PersistentVolume{hostPathPV("a", "/a"), csiPV("csi")}
	for impl, volumes := range implementations(t, pvs) {
		t.Run(impl, func(t *testing.T) {
			listed, err := volumes.List()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"a", "csi"}, names(listed)); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
			for name, want := range map[string]bool{"a": true, "csi": true, "b": false} {
				got, err := volumes.Exists(name)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("Exists(%q) = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func TestListedVolumesError(t *testing.T) {
	volumes := NewListedVolumes(func() ([]*corev1.PersistentVolume, error) { return nil, errors.New("cache gone") })
	_, err := volumes.Overlapping("", "/a")
	if err == nil || !strings.Contains(err.Error(), "cache gone") {
		t.Errorf("Overlapping: error %v, want the list's", err)
	}
	if _, err := volumes.Exists("a"); err == nil || !strings.Contains(err.Error(), "cache gone") {
		t.Errorf("Exists: error %v, want the list's", err)
	}
}

func TestPathIndexWithoutIndex(t *testing.T) {
	volumes := NewPathIndex(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	if _, err := volumes.Overlapping("", "/a"); err == nil {
		t.Error("Overlapping on an indexer without VolumePathIndex did not fail")
	}
}

// FuzzOverlapping checks that PathIndex and ListedVolumes agree on
// fuzzed paths and servers.
func FuzzOverlapping(f *testing.F) {
	for _, seed := range [][6]string{
		{"/a/b", "/a/bc", "/a/b", "", "", ""},
		{"/", "/x/", "/x/y/", "s", "s", "n"},
		{"a/b", "//a//b/", "/a/./b/..", "", "s", ""},
		{"/a:/b", "/b", "/a:/b", "s", "s:/a", "s"},
		{"/a", "/a/b", "/a", "n", HostNode("n"), "n"},
		{"/a", "/a/b", "/a", "n", HostNode("n:/a"), "n:/a"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3], seed[4], seed[5])
	}
	f.Fuzz(func(t *testing.T, first, second, query, pvServer, server, node string) {
		pvs := []*corev1.PersistentVolume{
			hostPathPV("host-first", first), localPV("local-second", second),
			onNode(hostPathPV("host-first-node", first), node), withAffinity(localPV("local-second-node", second), []string{node + "x"}),
			nfsPV("nfs-first", pvServer, first), nfsPV("nfs-second", pvServer+"x", second),
		}
		answers := map[string][]string{}
		failed := map[string]bool{}
		for impl, volumes := range implementations(t, pvs) {
			found, err := volumes.Overlapping(server, query)
			answers[impl], failed[impl] = names(found), err != nil
		}
		if diff := cmp.Diff(answers["listed"], answers["indexed"]); diff != "" {
			t.Errorf("Overlapping(%q, %q) (-listed +indexed):\n%s", server, query, diff)
		}
		if failed["listed"] != failed["indexed"] {
			t.Errorf("Overlapping(%q, %q) failed: listed %v, indexed %v", server, query, failed["listed"], failed["indexed"])
		}
	})
}
