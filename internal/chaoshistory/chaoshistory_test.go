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

package chaoshistory

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRead(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 123456789, time.UTC)
	mkdir := Entry{Time: at, Identity: "agent-1", Op: "Mkdir", Root: "/srv", Path: "base/pv-1"}
	move := Entry{Time: at, Identity: "manager-0", Op: "Move", Root: "/srv", Path: "base/pv-1", To: "base/.provfleet-deleting/pv-1", Fault: FaultEIOAfter, Err: "Move /srv/base/pv-1: input/output error"}
	line := func(e Entry) string {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return string(data) + "\n"
	}
	cut := line(mkdir)[:40]
	tests := map[string]struct {
		content string
		want    []Entry
		wantErr bool
	}{
		"empty":                          {content: "", want: nil},
		"whole lines":                    {content: line(mkdir) + line(move), want: []Entry{mkdir, move}},
		"last line cut short":            {content: line(move) + cut, want: []Entry{move}},
		"a cut line followed by another": {content: cut + line(move) + line(mkdir), want: []Entry{move, mkdir}},
		"a broken line before the last":  {content: "not json\n" + line(move), wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "history")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := Read(path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Read: %v, want an error: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLineFormat: the names the harness reads, and "to" only where it
// applies.
func TestLineFormat(t *testing.T) {
	e := Entry{Start: time.Date(2026, 12, 3, 10, 0, 0, 1, time.UTC), Time: time.Date(2026, 12, 3, 10, 0, 0, 5, time.UTC), Identity: "m", Op: "Mkdir", Root: "/r", Path: "b/d"}
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"start":"2026-12-03T10:00:00.000000001Z","time":"2026-12-03T10:00:00.000000005Z","identity":"m","op":"Mkdir","root":"/r","path":"b/d","fault":"","err":""}`
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("line (-want +got):\n%s", diff)
	}
}

// An operation took effect when it succeeded or failed only after it was
// carried out.
func TestCarriedOut(t *testing.T) {
	cases := map[string]struct {
		entry Entry
		want  bool
	}{
		"succeeded":         {entry: Entry{}, want: true},
		"failed after":      {entry: Entry{Fault: FaultEIOAfter, Err: "input/output error"}, want: true},
		"failed before":     {entry: Entry{Fault: FaultENOSPC, Err: "no space left on device"}, want: false},
		"failed on its own": {entry: Entry{Err: "file exists"}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.entry.CarriedOut(); got != tc.want {
				t.Errorf("CarriedOut: %v, want %v", got, tc.want)
			}
		})
	}
}
