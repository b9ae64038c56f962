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
	"strconv"
	"strings"
	"testing"
)

// residentFile is the process's resident memory mapped from files.
func residentFile(t *testing.T) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib << 10
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

func TestRelease(t *testing.T) {
	before := residentFile(t)
	released, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := residentFile(t)
	if released <= 0 || after >= before {
		t.Fatalf("released %d bytes; resident file pages %d before, %d after", released, before, after)
	}
	// The code runs on: what it needs is mapped again as it is used.
	if got := fmt.Sprintf("%d-%s", 42, strings.Repeat("x", 3)); got != "42-xxx" {
		t.Errorf("after the release the code computes %q", got)
	}
	t.Logf("released %d KiB; resident file pages %d KiB before, %d KiB after", released>>10, before>>10, after>>10)
}
