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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// smapsOf is smaps of a Go binary /bin/agent in the layouts the kernel
// gives: code, read-only data, a write-protected mapping with relocated
// pages of its own, writable data, a heap and a library.
const smapsOf = `00400000-01dc4000 r-xp 00000000 fe:00 326269                     /bin/agent
Size:              26384 kB
Rss:               17308 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
01dc4000-03d94000 r--p 019c4000 fe:00 326269                     /bin/agent
Rss:               18816 kB
Anonymous:             0 kB
03d94000-03d96000 r--p 03994000 fe:00 326269                     /bin/agent
Rss:                   8 kB
Anonymous:             8 kB
03d96000-03e32000 rw-p 03996000 fe:00 326269                     /bin/agent
Rss:                 504 kB
Anonymous:           120 kB
c000000000-c000400000 rw-p 00000000 00:00 0
Rss:                4096 kB
Anonymous:          4096 kB
7f0799c26000-7f0799d7c000 r-xp 00026000 fe:00 326270                     /usr/lib/libc.so.6
Rss:                 536 kB
Anonymous:             0 kB
7f0799d7c000-7f0799dcf000 r--s 00000000 fe:00 326271                     /bin/agent
Rss:                  64 kB
Anonymous:             0 kB
`

func TestFileCopies(t *testing.T) {
	mappings, err := parseSmaps(strings.NewReader(smapsOf))
	if err != nil {
		t.Fatal(err)
	}
	var got []mapping
	for _, m := range mappings {
		if m.fileCopy("/bin/agent") {
			got = append(got, m)
		}
	}
	want := []mapping{
		{start: 0x400000, end: 0x1dc4000, perms: "r-xp", path: "/bin/agent", rss: 17308 << 10},
		{start: 0x1dc4000, end: 0x3d94000, perms: "r--p", path: "/bin/agent", rss: 18816 << 10},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(mapping{})); diff != "" {
		t.Errorf("mappings released (-want +got):\n%s", diff)
	}
	if len(mappings) != 7 {
		t.Errorf("parsed %d mappings, want 7", len(mappings))
	}
}

func TestParseSmapsPathsWithSpaces(t *testing.T) {
	mappings, err := parseSmaps(strings.NewReader("00400000-00401000 r-xp 00000000 fe:00 1 /bin/agent (deleted)\nRss: 4 kB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]mapping{{start: 0x400000, end: 0x401000, perms: "r-xp", path: "/bin/agent (deleted)", rss: 4 << 10}}, mappings, cmp.AllowUnexported(mapping{})); diff != "" {
		t.Errorf("mappings (-want +got):\n%s", diff)
	}
}

func TestParseSmapsRefusesBadSizes(t *testing.T) {
	if _, err := parseSmaps(strings.NewReader("00400000-00401000 r-xp 00000000 fe:00 1 /bin/agent\nRss: many kB\n")); err == nil {
		t.Error("a size that is no number parsed")
	}
}
