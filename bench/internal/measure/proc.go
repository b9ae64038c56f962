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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of CPU times in /proc/<pid>/stat; it is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// Usage is what /proc tells of one process.
type Usage struct {
	// CPU is user plus system time since the process started.
	CPU time.Duration
	// RSS is the resident set now; PeakRSS its high-water mark (VmHWM).
	RSS, PeakRSS uint64
	// RSSAnon and RSSFile are the parts of RSS that are the process's own
	// memory and that are mapped from files (its binary, its libraries);
	// zero where the kernel does not tell them apart.
	RSSAnon, RSSFile uint64
	// PSS is the proportional set size of /proc/<pid>/smaps_rollup: each
	// resident page divided by the number of processes that map it, so two
	// processes of one binary share its pages instead of each counting
	// them whole. PSSAnon and PSSFile are its anonymous and file-backed
	// parts. All three are zero where the kernel has no smaps_rollup.
	PSS, PSSAnon, PSSFile uint64
}

// ReadUsage reads the usage of pid from the proc filesystem mounted at root
// (normally /proc).
func ReadUsage(root string, pid int) (Usage, error) {
	dir := filepath.Join(root, strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Usage{}, fmt.Errorf("cannot read the CPU time of process %d: %w", pid, err)
	}
	cpu, err := parseStat(stat)
	if err != nil {
		return Usage{}, fmt.Errorf("cannot parse the stat of process %d: %w", pid, err)
	}
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return Usage{}, fmt.Errorf("cannot read the memory of process %d: %w", pid, err)
	}
	mem, err := parseStatus(status)
	if err != nil {
		return Usage{}, fmt.Errorf("cannot parse the status of process %d: %w", pid, err)
	}
	u := Usage{CPU: cpu, RSS: mem["VmRSS"], PeakRSS: mem["VmHWM"], RSSAnon: mem["RssAnon"], RSSFile: mem["RssFile"]}
	rollup, err := os.ReadFile(filepath.Join(dir, "smaps_rollup"))
	if errors.Is(err, fs.ErrNotExist) {
		return u, nil
	}
	if err != nil {
		return Usage{}, fmt.Errorf("cannot read the proportional set of process %d: %w", pid, err)
	}
	pss, err := parseKiBFields(rollup, rollupFields)
	if err != nil {
		return Usage{}, fmt.Errorf("cannot parse the smaps_rollup of process %d: %w", pid, err)
	}
	if _, ok := pss["Pss"]; !ok {
		return Usage{}, fmt.Errorf("no Pss in the smaps_rollup of process %d", pid)
	}
	u.PSS, u.PSSAnon, u.PSSFile = pss["Pss"], pss["Pss_Anon"], pss["Pss_File"]
	return u, nil
}

// parseStat returns utime+stime of a /proc/<pid>/stat line. The command name
// is in parentheses and may itself hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseStat(data []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, errors.New("no command name")
	}
	// After the name: state (field 3) ... utime (14), stime (15).
	fields := strings.Fields(string(data[end+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(fields))
	}
	var ticks uint64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cannot parse CPU ticks %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil //nolint:gosec // a process lives far less than 2^63 ns
}

// memoryFields are the fields of /proc/<pid>/status parseStatus reads; the
// first two every process of user space has.
var memoryFields = []string{"VmRSS", "VmHWM", "RssAnon", "RssFile"}

// rollupFields are the fields of /proc/<pid>/smaps_rollup ReadUsage reads;
// Pss_Anon and Pss_File came in Linux 5.9, Pss in 4.14 with the file.
var rollupFields = []string{"Pss", "Pss_Anon", "Pss_File"}

// parseStatus returns the memoryFields of /proc/<pid>/status, in bytes.
func parseStatus(data []byte) (map[string]uint64, error) {
	mem, err := parseKiBFields(data, memoryFields)
	if err != nil {
		return nil, err
	}
	if _, ok := mem["VmRSS"]; !ok {
		return nil, errors.New("no VmRSS (a kernel thread or a zombie)")
	}
	if _, ok := mem["VmHWM"]; !ok {
		return nil, errors.New("no VmHWM (a kernel thread or a zombie)")
	}
	return mem, nil
}

// parseKiBFields returns the named "Key: <n> kB" lines of data, in bytes.
func parseKiBFields(data []byte, names []string) (map[string]uint64, error) {
	mem := map[string]uint64{}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		key, value, ok := strings.Cut(s.Text(), ":")
		if !ok || !slices.Contains(names, key) {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			return nil, fmt.Errorf("unexpected %s value %q", key, value)
		}
		kib, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("cannot parse %s: %w", key, err)
		}
		mem[key] = kib * 1024
	}
	return mem, s.Err()
}
