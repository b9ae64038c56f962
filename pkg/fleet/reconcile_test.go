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
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// TestManagerParallelRetunes re-tunes several objects at once: a reconcile
// worker that records an instance's new config must not race with the other
// workers' name-conflict checks, which read every running instance's config.
func TestManagerParallelRetunes(t *testing.T) {
	f := newFixture(t)
	names := []string{"a", "b", "c", "d"}
	for _, name := range names {
		f.create(f.hostPath(name, "x.io/"+name, 1))
	}
	f.eventually("every object runs", func() bool {
		for _, name := range names {
			if f.readyReason(name, 1) != v1alpha1.ReasonRunning {
				return false
			}
		}
		return true
	})
	const edits int32 = 20
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			for i := range edits {
				f.edit(name, func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Workers = i + 2 })
			}
		})
	}
	wg.Wait()
	for _, name := range names {
		// The fake clientset writes a status over the whole object, so an edit
		// may be undone: the status must match whatever generation is current.
		f.eventually(fmt.Sprintf("%s observes its current generation", name), func() bool {
			return f.readyReason(name, f.get(name).Generation) == v1alpha1.ReasonRunning
		})
		if instances := f.started("x.io/" + name); len(instances) != 1 {
			t.Errorf("%s: %d instances started, want one re-tuned instance", name, len(instances))
		}
	}
}

// TestManagerLeaseNameConflict: two provisioner names with one Lease name
// would elect one leader for both; the later object is refused until the
// older goes.
func TestManagerLeaseNameConflict(t *testing.T) {
	f := newFixture(t)
	f.create(f.hostPath("old", "a.b/c", 1))
	f.create(f.hostPath("new", "a.b-c", 2))
	f.eventually("old runs, new conflicts", func() bool {
		return f.readyReason("old", 1) == v1alpha1.ReasonRunning && f.readyReason("new", 1) == v1alpha1.ReasonLeaseNameConflict
	})
	if got := len(f.started("a.b-c")); got != 0 {
		t.Fatalf("%d instances started for the later name, want none", got)
	}
	f.eventually("a Warning Event on new", func() bool { return cmp.Equal(f.warnings("new"), []string{v1alpha1.ReasonLeaseNameConflict}) })
	if msg := meta.FindStatusCondition(f.get("new").Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "old") {
		t.Errorf("the refusal %q does not name the older object", msg)
	}

	f.delete("old")
	f.eventually("new takes over", func() bool { return f.readyReason("new", 1) == v1alpha1.ReasonRunning })
}

// TestManagerComparesProvisionerNamesWithCase: the PV binder and the
// provisioned-by annotation keep the case of a name, so the fleet does too:
// the backend gets the names as written, and names that differ only by case
// are different provisioners.
func TestManagerComparesProvisionerNamesWithCase(t *testing.T) {
	var mu sync.Mutex
	names := map[string][]string{}
	f := newFixture(t, WithBackend("records", func(_ context.Context, req BackendRequest) (provisioning.Provisioner, error) {
		mu.Lock()
		defer mu.Unlock()
		names[req.ProvisionerNames[0]] = req.ProvisionerNames
		return newFakeBackend(), nil
	}))
	for _, pc := range []*v1alpha1.ProvisionerConfig{
		hostPathConfig("upper", "example.com/Fast", 1),
		hostPathConfig("lower", "example.com/fast", 2),
	} {
		pc.Spec.AdditionalProvisionerNames = []v1alpha1.ProvisionerName{pc.Spec.ProvisionerName + "_Old"}
		pc.Spec.Backend = v1alpha1.BackendSpec{Custom: &v1alpha1.CustomBackend{Driver: "records"}}
		f.create(pc)
	}
	f.eventually("both run", func() bool {
		return f.readyReason("upper", 1) == v1alpha1.ReasonRunning && f.readyReason("lower", 1) == v1alpha1.ReasonRunning
	})
	mu.Lock()
	defer mu.Unlock()
	want := map[string][]string{
		"example.com/Fast": {"example.com/Fast", "example.com/Fast_Old"},
		"example.com/fast": {"example.com/fast", "example.com/fast_Old"},
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("provisioner names given to the backends (-want +got):\n%s", diff)
	}
}

// TestManagerBackendOverlap: a later object whose base lies in an older
// object's base is refused until the older one moves away.
func TestManagerBackendOverlap(t *testing.T) {
	f := newFixture(t)
	outer := f.hostPath("outer", "x.io/outer", 1)
	inner := f.hostPath("inner", "x.io/inner", 2)
	inner.Spec.Backend.HostPath.Path = outer.Spec.Backend.HostPath.Path + "/inner"
	f.create(outer)
	f.create(inner)
	f.eventually("outer runs, inner is refused", func() bool {
		return f.readyReason("outer", 1) == v1alpha1.ReasonRunning && f.readyReason("inner", 1) == v1alpha1.ReasonBackendOverlap
	})
	if got := len(f.started("x.io/inner")); got != 0 {
		t.Fatalf("%d instances started on an overlapping base, want none", got)
	}
	f.eventually("a Warning Event on inner", func() bool { return cmp.Equal(f.warnings("inner"), []string{v1alpha1.ReasonBackendOverlap}) })
	if msg := meta.FindStatusCondition(f.get("inner").Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "outer") {
		t.Errorf("the refusal %q does not name the older object", msg)
	}

	f.edit("outer", func(pc *v1alpha1.ProvisionerConfig) {
		pc.Spec.Backend.HostPath.Path = v1alpha1.AbsolutePath(f.manager.settings.HostPathRoot + "/elsewhere")
	})
	f.eventually("inner takes over once outer moved", func() bool {
		return f.readyReason("outer", 2) == v1alpha1.ReasonRunning && f.readyReason("inner", 1) == v1alpha1.ReasonRunning
	})
}

func TestOverlappingBases(t *testing.T) {
	hostPath := func(path string) v1alpha1.BackendSpec {
		return v1alpha1.BackendSpec{HostPath: &v1alpha1.HostPathBackend{Path: v1alpha1.AbsolutePath(path)}}
	}
	nfs := func(server, path, mountPath string) v1alpha1.BackendSpec {
		return v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{Server: server, Path: v1alpha1.AbsolutePath(path), MountPath: v1alpha1.AbsolutePath(mountPath)}}
	}
	spoken := func(server string, port int32, path string) v1alpha1.BackendSpec {
		return v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{Server: server, Port: port, Path: v1alpha1.AbsolutePath(path)}}
	}
	custom := v1alpha1.BackendSpec{Custom: &v1alpha1.CustomBackend{Driver: "x"}}
	tests := map[string]struct {
		a, b v1alpha1.BackendSpec
		want string
	}{
		"hostPath siblings":              {a: hostPath("/srv/a"), b: hostPath("/srv/b")},
		"hostPath sharing a name prefix": {a: hostPath("/srv/a"), b: hostPath("/srv/ab")},
		"hostPath equal":                 {a: hostPath("/srv/a"), b: hostPath("/srv/a/"), want: `backend hostPath.path "/srv/a" overlaps hostPath.path "/srv/a/"`},
		"hostPath inside another":        {a: hostPath("/srv/a/b"), b: hostPath("/srv/a"), want: `backend hostPath.path "/srv/a/b" overlaps hostPath.path "/srv/a"`},
		"hostPath around another":        {a: hostPath("/srv"), b: hostPath("/srv/a"), want: `backend hostPath.path "/srv" overlaps hostPath.path "/srv/a"`},
		"hostPath under the root":        {a: hostPath("/"), b: hostPath("/srv/a"), want: `backend hostPath.path "/" overlaps hostPath.path "/srv/a"`},
		"a node path inside another's path": {
			a:    v1alpha1.BackendSpec{HostPath: &v1alpha1.HostPathBackend{Path: "/srv/a", NodePaths: []v1alpha1.NodePath{{Nodes: []string{"n1"}, Path: "/data/b/x"}}}},
			b:    hostPath("/data/b"),
			want: `backend hostPath.nodePaths[0].path "/data/b/x" overlaps hostPath.path "/data/b"`,
		},
		"a StorageClass's node path inside another's path": {
			a: v1alpha1.BackendSpec{HostPath: &v1alpha1.HostPathBackend{Path: "/srv/a", StorageClasses: []v1alpha1.HostPathStorageClass{
				{StorageClassName: "fast", Path: "/srv/fast", NodePaths: []v1alpha1.NodePath{{Nodes: []string{"n1"}, Path: "/srv/c", AdditionalPaths: []v1alpha1.AbsolutePath{"/data/b/x"}}}},
			}}},
			b:    hostPath("/data/b"),
			want: `backend hostPath.storageClasses[0].nodePaths[0].additionalPaths[0] "/data/b/x" overlaps hostPath.path "/data/b"`,
		},
		"NFS exports of different servers": {a: nfs("nfs-1", "/export", "/mnt/1"), b: nfs("nfs-2", "/export", "/mnt/2")},
		"NFS exports of one server apart":  {a: nfs("nfs-1", "/export/a", "/mnt/1"), b: nfs("nfs-1", "/export/b", "/mnt/2")},
		"NFS exports of one server nested": {
			a: nfs("nfs-1", "/export/a", "/mnt/1"), b: nfs("nfs-1", "/export", "/mnt/2"),
			want: `backend nfs.path "/export/a" on server "nfs-1" overlaps nfs.path "/export" on server "nfs-1"`,
		},
		"NFS server names compared as written": {a: nfs("nfs-1", "/export", "/mnt/1"), b: nfs("10.0.0.1", "/export", "/mnt/2")},
		"NFS mount paths nested": {
			a: nfs("nfs-1", "/export", "/mnt/nfs"), b: nfs("nfs-2", "/export", "/mnt/nfs/2"),
			want: `backend nfs.mountPath "/mnt/nfs" overlaps nfs.mountPath "/mnt/nfs/2"`,
		},
		"NFS mount path in a hostPath base": {
			a: nfs("nfs-1", "/export", "/var/lib/provfleet/nfs"), b: hostPath("/var/lib/provfleet"),
			want: `backend nfs.mountPath "/var/lib/provfleet/nfs" overlaps hostPath.path "/var/lib/provfleet"`,
		},
		"NFS export path is not a local path":    {a: nfs("nfs-1", "/srv/a", "/mnt/1"), b: hostPath("/srv/a")},
		"NFS spoken to two ports of one address": {a: spoken("127.0.0.1", 2050, "/export"), b: spoken("127.0.0.1", 2051, "/export")},
		"NFS spoken to one port, nested": {
			a: spoken("127.0.0.1", 2050, "/export"), b: spoken("127.0.0.1", 2050, "/export/a"),
			want: `backend nfs.path "/export" on server "127.0.0.1,port=2050" overlaps nfs.path "/export/a" on server "127.0.0.1,port=2050"`,
		},
		"NFS default port, written or not": {
			a: spoken("nfs-1", 2049, "/export"), b: nfs("nfs-1", "/export/a", "/mnt/1"),
			want: `backend nfs.path "/export" on server "nfs-1" overlaps nfs.path "/export/a" on server "nfs-1"`,
		},
		"NFS spoken, no mount path to overlap": {a: spoken("nfs-1", 0, "/export"), b: hostPath("/")},
		"custom backends declare no base":      {a: custom, b: hostPath("/")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := &v1alpha1.ProvisionerConfigSpec{Backend: tc.a}
			b := &v1alpha1.ProvisionerConfigSpec{Backend: tc.b}
			if diff := cmp.Diff(tc.want, overlappingBases(a, b)); diff != "" {
				t.Errorf("overlappingBases(a, b) (-want +got):\n%s", diff)
			}
			if (overlappingBases(b, a) == "") != (tc.want == "") {
				t.Errorf("overlappingBases is not symmetric")
			}
		})
	}
}
