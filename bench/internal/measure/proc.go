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
	"os"
	"path/filepath"
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
	u := Usage{CPU: cpu}
	if u.RSS, u.PeakRSS, err = parseStatus(status); err != nil {
		return Usage{}, fmt.Errorf("cannot parse the status of process %d: %w", pid, err)
	}
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
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// parseStatus returns VmRSS and VmHWM of /proc/<pid>/status in bytes.
func parseStatus(data []byte) (rss, hwm uint64, err error) {
	var seenRSS, seenHWM bool
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		key, value, ok := strings.Cut(s.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, 0, fmt.Errorf("unexpected %s value %q", key, value)
		}
		kib, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("cannot parse %s: %w", key, err)
		}
		if key == "VmRSS" {
			rss, seenRSS = kib*1024, true
		} else {
			hwm, seenHWM = kib*1024, true
		}
	}
	if !seenRSS || !seenHWM {
		return 0, 0, errors.New("no VmRSS or VmHWM (a kernel thread or a zombie)")
	}
	return rss, hwm, nil
}
