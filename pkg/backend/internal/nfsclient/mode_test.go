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

package nfsclient

import (
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The setuid, setgid and sticky bits travel as NFSv3 writes them, which the
// test server cannot show: it keeps the permissions only.
func TestModeBitsOnTheWire(t *testing.T) {
	tests := map[string]struct {
		mode fs.FileMode
		wire uint32
	}{
		"permissions":    {mode: 0o750, wire: 0o750},
		"setgid":         {mode: 0o770 | fs.ModeSetgid, wire: 0o2770},
		"sticky":         {mode: 0o777 | fs.ModeSticky, wire: 0o1777},
		"setuid":         {mode: 0o755 | fs.ModeSetuid, wire: 0o4755},
		"all three":      {mode: 0o700 | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky, wire: 0o7700},
		"no permissions": {mode: 0, wire: 0},
		"type bits drop": {mode: fs.ModeDir | 0o755, wire: 0o755},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wire, wireMode(tc.mode)); diff != "" {
				t.Errorf("wireMode (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.mode&^fs.ModeType, fileMode(tc.wire)); diff != "" {
				t.Errorf("fileMode (-want +got):\n%s", diff)
			}
		})
	}
}
