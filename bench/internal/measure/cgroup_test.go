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

package measure

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cgroupTree is a proc entry of process 9 and the cgroup hierarchies it
// names, all under one temporary folder.
type cgroupTree struct {
	// cgroup is /proc/9/cgroup; mounts are the lines of /proc/9/mountinfo,
	// with MNT standing for the folder of the cgroup file systems.
	cgroup string
	mounts []string
	// files of the cgroup file systems, by path under MNT.
	files map[string]string
}

func (tree cgroupTree) write(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	mnt := filepath.Join(root, "mnt")
	files := map[string]string{
		"proc/9/cgroup":    tree.cgroup,
		"proc/9/mountinfo": strings.ReplaceAll(strings.Join(tree.mounts, "\n"), "MNT", mnt) + "\n",
	}
	for path, content := range tree.files {
		files[filepath.Join("mnt", path)] = content
	}
	for path, content := range files {
		path = filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(root, "proc")
}

const (
	v2Mount = "40 30 0:37 / MNT/unified rw,relatime shared:9 - cgroup2 cgroup2 rw"
	v1Mount = "34 30 0:31 / MNT/memory rw,relatime - cgroup cgroup rw,memory"
	// cpuMount is a v1 hierarchy without the memory controller.
	cpuMount = "31 30 0:28 / MNT/cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct"
)

func TestReadCharge(t *testing.T) {
	u := Usage{PSS: 7 << 20}
	tests := map[string]struct {
		tree cgroupTree
		want Charge
	}{
		"a v2 cgroup of its own": {
			tree: cgroupTree{
				cgroup: "0::/pods/agent\n",
				mounts: []string{v2Mount},
				files:  map[string]string{"unified/pods/agent/cgroup.procs": "9\n", "unified/pods/agent/memory.current": "52428800\n"},
			},
			want: Charge{Bytes: 50 << 20, By: ChargedByCgroupV2},
		},
		"a v2 cgroup shared with another process": {
			tree: cgroupTree{
				cgroup: "0::/pods/agent\n",
				mounts: []string{v2Mount},
				files:  map[string]string{"unified/pods/agent/cgroup.procs": "9\n12\n", "unified/pods/agent/memory.current": "52428800\n"},
			},
			want: Charge{Bytes: 7 << 20, By: ChargedByPSS},
		},
		"a v1 memory cgroup of its own beside a v2 hierarchy without the controller": {
			tree: cgroupTree{
				cgroup: "4:memory:/bench/agent\n1:cpu,cpuacct:/\n0::/\n",
				mounts: []string{cpuMount, v1Mount, v2Mount},
				files: map[string]string{
					"unified/cgroup.procs":                     "9\n",
					"memory/bench/agent/cgroup.procs":          "9\n",
					"memory/bench/agent/memory.usage_in_bytes": "1048576\n",
				},
			},
			want: Charge{Bytes: 1 << 20, By: ChargedByCgroupV1},
		},
		"a v1 memory cgroup of a namespace mounted at its root": {
			tree: cgroupTree{
				cgroup: "4:memory:/bench/agent\n",
				mounts: []string{"34 30 0:31 /bench MNT/memory rw - cgroup cgroup rw,memory"},
				files:  map[string]string{"memory/agent/cgroup.procs": "9\n", "memory/agent/memory.usage_in_bytes": "2097152\n"},
			},
			want: Charge{Bytes: 2 << 20, By: ChargedByCgroupV1},
		},
		"a hierarchy that is not mounted": {
			tree: cgroupTree{cgroup: "4:memory:/bench/agent\n", mounts: []string{cpuMount}},
			want: Charge{Bytes: 7 << 20, By: ChargedByPSS},
		},
		"only the cpu controller": {
			tree: cgroupTree{
				cgroup: "1:cpu,cpuacct:/agent\n",
				mounts: []string{cpuMount},
				files:  map[string]string{"cpu/agent/cgroup.procs": "9\n", "cpu/agent/memory.usage_in_bytes": "1\n"},
			},
			want: Charge{Bytes: 7 << 20, By: ChargedByPSS},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ReadCharge(tc.tree.write(t), 9, u)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("charge (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadChargeOfAMissingProcess(t *testing.T) {
	if _, err := ReadCharge(t.TempDir(), 9, Usage{}); err == nil {
		t.Error("want an error for a process that does not exist")
	}
}

func TestReadChargeOfThisProcess(t *testing.T) {
	u, err := ReadUsage("/proc", os.Getpid())
	if err != nil {
		t.Skipf("no proc filesystem: %v", err)
	}
	got, err := ReadCharge("/proc", os.Getpid(), u)
	if err != nil {
		t.Fatal(err)
	}
	if got.Bytes == 0 || got.By == "" {
		t.Errorf("charge %+v: want a positive figure and where it comes from", got)
	}
}
