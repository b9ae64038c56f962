//go:build linux

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

package startuppages

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Release unmaps every page of the process's executable that the kernel can
// read back from the file as it is, and returns how many bytes of them were
// resident.
func Release() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("cannot find the executable: %w", err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("cannot read the mappings: %w", err)
	}
	defer func() { _ = f.Close() }()
	mappings, err := parseSmaps(f)
	if err != nil {
		return 0, err
	}
	var released int64
	for _, m := range mappings {
		if !m.fileCopy(exe) {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("cannot release the pages of %x-%x: %w", m.start, m.end, errno)
		}
		released += m.rss
	}
	return released, nil
}
