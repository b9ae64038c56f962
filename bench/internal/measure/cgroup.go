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
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// What a Charge is read from.
const (
	// ChargedByCgroupV2 is memory.current of a cgroup v2 holding the process
	// alone: everything the kernel charges it, its page cache and kernel
	// memory included, which a container's limit is held to.
	ChargedByCgroupV2 = "memory.current"
	// ChargedByCgroupV1 is the same figure under the v1 memory controller.
	ChargedByCgroupV1 = "memory.usage_in_bytes"
	// ChargedByPSS is the process's proportional set size, where it shares
	// its cgroup with other processes (as the benchmark's children share
	// the harness's): its mapped pages, each shared one divided between
	// those mapping it. Page cache it does not map is in no process's PSS.
	ChargedByPSS = "pss"
)

// Charge is what the kernel charges for a process's memory.
type Charge struct {
	Bytes uint64
	// By is ChargedByCgroupV2, ChargedByCgroupV1 or ChargedByPSS.
	By string
}

// ReadCharge returns the memory charged to the cgroup of pid where that
// cgroup holds pid alone (its cgroup.procs lists no other process), else
// pid's PSS, taken from u. The cgroup is found from the proc filesystem at
// root: /proc/<pid>/cgroup names it, /proc/<pid>/mountinfo where its
// hierarchy is mounted (cgroup2, or cgroup with the memory controller).
func ReadCharge(root string, pid int, u Usage) (Charge, error) {
	dir := filepath.Join(root, strconv.Itoa(pid))
	cgroups, err := os.ReadFile(filepath.Join(dir, "cgroup"))
	if err != nil {
		return Charge{}, fmt.Errorf("cannot read the cgroups of process %d: %w", pid, err)
	}
	mounts, err := os.ReadFile(filepath.Join(dir, "mountinfo"))
	if err != nil {
		return Charge{}, fmt.Errorf("cannot read the mounts of process %d: %w", pid, err)
	}
	for _, c := range memoryCgroups(cgroups, mounts) {
		if !holdsOnly(c.dir, pid) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(c.dir, c.file))
		if err != nil {
			continue // a v2 hierarchy without the memory controller
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			return Charge{}, fmt.Errorf("cannot parse %s of process %d: %w", c.file, pid, err)
		}
		return Charge{Bytes: n, By: c.file}, nil
	}
	return Charge{Bytes: u.PSS, By: ChargedByPSS}, nil
}

// memoryCgroup is a cgroup directory and the file of its charged memory.
type memoryCgroup struct {
	dir, file string
}

// memoryCgroups returns the cgroups of a process's /proc/<pid>/cgroup that
// may hold a memory charge, v2 first, located through its mountinfo.
func memoryCgroups(cgroups, mountinfo []byte) []memoryCgroup {
	v2, v1 := cgroupMounts(mountinfo)
	var out []memoryCgroup
	s := bufio.NewScanner(bytes.NewReader(cgroups))
	for s.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(s.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "" && v2 != nil:
			out = slices.Insert(out, 0, memoryCgroup{v2.under(parts[2]), ChargedByCgroupV2})
		case slices.Contains(strings.Split(parts[1], ","), "memory") && v1 != nil:
			out = append(out, memoryCgroup{v1.under(parts[2]), ChargedByCgroupV1})
		}
	}
	return out
}

// cgroupMount is where a cgroup hierarchy is mounted, and which of its
// cgroups is the mount's root.
type cgroupMount struct {
	root, point string
}

// under is the directory of the cgroup at path of the hierarchy.
func (m cgroupMount) under(path string) string {
	return filepath.Join(m.point, strings.TrimPrefix(path, strings.TrimSuffix(m.root, "/")))
}

// cgroupMounts finds the cgroup2 mount and the v1 memory controller's in a
// mountinfo: "id parent major:minor root point options [tags] - type
// source super-options".
func cgroupMounts(mountinfo []byte) (v2, v1 *cgroupMount) {
	s := bufio.NewScanner(bytes.NewReader(mountinfo))
	for s.Scan() {
		before, after, ok := strings.Cut(s.Text(), " - ")
		fields, fsFields := strings.Fields(before), strings.Fields(after)
		if !ok || len(fields) < 5 || len(fsFields) < 3 {
			continue
		}
		m := &cgroupMount{root: fields[3], point: fields[4]}
		switch {
		case fsFields[0] == "cgroup2" && v2 == nil:
			v2 = m
		case fsFields[0] == "cgroup" && slices.Contains(strings.Split(fsFields[2], ","), "memory") && v1 == nil:
			v1 = m
		}
	}
	return v2, v1
}

// holdsOnly reports whether the cgroup at dir holds pid and no other
// process.
func holdsOnly(dir string, pid int) bool {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return false
	}
	return slices.Equal(strings.Fields(string(data)), []string{strconv.Itoa(pid)})
}
