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
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// mapping is one mapping of /proc/<pid>/smaps.
type mapping struct {
	start, end uint64
	perms      string
	path       string
	// rss and anonymous are its resident and its private, anonymous bytes.
	rss, anonymous int64
}

// fileCopy reports whether m maps exe read-only and privately with no page
// of its own: each of its pages can be read back from exe as it is.
func (m mapping) fileCopy(exe string) bool {
	return m.path == exe && !strings.Contains(m.perms, "w") && strings.HasSuffix(m.perms, "p") && m.anonymous == 0
}

// parseSmaps reads the mappings of an smaps file.
func parseSmaps(r io.Reader) ([]mapping, error) {
	var mappings []mapping
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		line := scanner.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if start, end, ok := parseRange(fields[0]); ok && len(fields) >= 5 {
			m := mapping{start: start, end: end, perms: fields[1]}
			if len(fields) >= 6 {
				// A path may hold spaces, as " (deleted)" does.
				m.path = strings.Join(fields[5:], " ")
			}
			mappings = append(mappings, m)
			continue
		}
		if len(mappings) == 0 || len(fields) != 3 || fields[2] != "kB" {
			continue
		}
		kib, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("cannot parse smaps line %q: %w", line, err)
		}
		switch fields[0] {
		case "Rss:":
			mappings[len(mappings)-1].rss = kib << 10
		case "Anonymous:":
			mappings[len(mappings)-1].anonymous = kib << 10
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("cannot read smaps: %w", err)
	}
	return mappings, nil
}

// parseRange parses the address range that opens a mapping's header line.
func parseRange(s string) (start, end uint64, ok bool) {
	lo, hi, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	return start, end, err1 == nil && err2 == nil && end > start
}
