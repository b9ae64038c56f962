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
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// The environment variables the store fault layer reads, once per process.
const (
	// StoreFaultsEnv says which faults to inject: "rate=0.05,seed=42", the
	// share of mutating operations that fail and the seed of their draws
	// (0 when left out). Empty or unset injects none.
	StoreFaultsEnv = "PROVFLEET_CHAOS_STORE_FAULTS"
	// IdentityEnv names the process in its history lines; the draws are
	// seeded by it too, so processes of one run fail differently.
	IdentityEnv = "PROVFLEET_CHAOS_IDENTITY"
	// HistoryEnv is the file the history is appended to; unset writes none.
	HistoryEnv = "PROVFLEET_CHAOS_HISTORY"
)

// The faults the layer injects, as Entry.Fault names them. All but
// FaultEIOAfter fail the operation before it is carried out.
const (
	FaultEIO    = "EIO"
	FaultENOSPC = "ENOSPC"
	FaultEACCES = "EACCES"
	FaultEROFS  = "EROFS"
	// FaultEIOAfter fails an operation carried out, as a disk that wrote
	// and then failed the sync.
	FaultEIOAfter = "EIO-after"
)

// Entry is one mutating operation on a volume directory, recorded once
// it returned.
type Entry struct {
	// Start is when the operation began, Time when it returned.
	Start time.Time `json:"start"`
	Time  time.Time `json:"time"`
	// Identity is the process's (IdentityEnv).
	Identity string `json:"identity"`
	// Op is the method of dirvol.Dir: Mkdir, CreateFile, RewriteFile,
	// Symlink, Rename, Move, Remove, RemoveAll, Chmod or Chown.
	Op string `json:"op"`
	// Root is the root the base was opened in: a host path, or an export's.
	Root string `json:"root"`
	// Path is the entry acted on, a slash path relative to Root (the base,
	// then the names down to the entry); Chmod and Chown act on a directory
	// itself.
	Path string `json:"path"`
	// To is where Rename and Move put the entry, relative to Root too.
	To string `json:"to,omitempty"`
	// Fault is the fault injected, empty for none.
	Fault string `json:"fault"`
	// Err is the error the operation returned, empty for none.
	Err string `json:"err"`
}

// Read reads the entries of a history file, in the order they were
// written.
func Read(path string) ([]Entry, error) {
	data, err := os.ReadFile(path) //nolint:gosec // the harness names its history
	if err != nil {
		return nil, fmt.Errorf("cannot read the history: %w", err)
	}
	lines := bytes.Split(data, []byte("\n"))
	var entries []Entry
	for i, line := range lines {
		if len(line) == 0 {
			continue
		}
		entry, err := parse(line)
		if err != nil && i == len(lines)-1 {
			// Cut short by a kill: a line written whole ends with its newline.
			break
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read line %d of the history: %w", i+1, err)
		}
		entries = append(entries, entry)
	}
	return entries, nil
}

// parse reads one line. A line that does not parse may be one cut short
// by a kill and followed by another process's: the last object on it is
// taken, the cut one lost.
func parse(line []byte) (Entry, error) {
	var entry Entry
	err := json.Unmarshal(line, &entry)
	if err == nil {
		return entry, nil
	}
	if start := bytes.LastIndex(line, []byte(`{"start":`)); start > 0 && json.Unmarshal(line[start:], &entry) == nil {
		return entry, nil
	}
	return Entry{}, err
}

// CarriedOut says whether the operation took effect: it succeeded, or a
// fault failed it after it was carried out.
func (e Entry) CarriedOut() bool {
	return e.Err == "" || e.Fault == FaultEIOAfter
}
