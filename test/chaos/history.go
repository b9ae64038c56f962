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

package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/provfleet/provfleet/internal/chaoshistory"
)

// pvCreate is a creation of a PersistentVolume the apiserver carried out,
// from its audit log.
type pvCreate struct {
	Name string
	Time time.Time
	User string
}

// auditEvent is what a run reads of an audit event.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	ObjectRef *struct {
		Resource string `json:"resource"`
		Name     string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// readPVCreates returns the creations of PersistentVolumes that the
// apiserver's audit log at path records as carried out.
func readPVCreates(auditLog string) ([]pvCreate, error) {
	f, err := os.Open(auditLog) //nolint:gosec // the run's own audit log
	if err != nil {
		return nil, fmt.Errorf("cannot read the audit log: %w", err)
	}
	defer f.Close()
	var creates []pvCreate
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		var e auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("cannot read an audit event: %w", err)
		}
		if e.Stage == "ResponseComplete" && e.Verb == "create" && e.ObjectRef != nil && e.ObjectRef.Resource == "persistentvolumes" &&
			e.ResponseStatus != nil && e.ResponseStatus.Code == 201 {
			creates = append(creates, pvCreate{Name: e.ObjectRef.Name, Time: e.StageTimestamp, User: e.User.Username})
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("cannot read the audit log: %w", err)
	}
	return creates, nil
}

// readStoreHistory returns the volume directory operations every process
// recorded, in the files of dir.
func readStoreHistory(dir string) ([]chaoshistory.Entry, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("cannot list the store histories: %w", err)
	}
	var all []chaoshistory.Entry
	for _, f := range files {
		entries, err := chaoshistory.Read(f)
		if err != nil {
			return nil, err
		}
		all = append(all, entries...)
	}
	return all, nil
}

// madeDir is a volume directory an operation made.
type madeDir struct {
	// PV is the PersistentVolume it was made for: the name the path
	// pattern renders, the directory's own.
	PV string
	// Location is where it is: an absolute path on the nodes' disks, or
	// a path below an NFS export.
	Location string
	NFS      bool
}

// madeDirs returns the volume directories that the history records as
// made (a Mkdir carried out, whatever it answered), each once.
func madeDirs(history []chaoshistory.Entry, agents map[string]bool) []madeDir {
	seen := map[madeDir]bool{}
	var out []madeDir
	for _, e := range history {
		if e.Op != "Mkdir" || !e.CarriedOut() {
			continue
		}
		name := path.Base(e.Path)
		if !strings.HasPrefix(name, "pvc-") {
			continue
		}
		d := madeDir{PV: name, NFS: !agents[e.Identity]}
		if d.NFS {
			d.Location = e.Path
		} else {
			d.Location = filepath.Join(e.Root, filepath.FromSlash(e.Path))
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// actedWhileCut returns the operations a process began while cut off from
// the apiserver, later than its Lease allowed: one begun before may end
// after.
func actedWhileCut(history []chaoshistory.Entry, partitions []partition) []string {
	var out []string
	for _, p := range partitions {
		deadline := p.Start.Add(p.Lease)
		for _, e := range history {
			if e.Identity == p.Identity && e.Start.After(deadline) && e.Start.Before(p.End) {
				out = append(out, fmt.Sprintf("%s: %s %s begun at %s, %v after it was cut off (its Lease: %v)",
					e.Identity, e.Op, e.Path, e.Start.Format(time.RFC3339Nano), e.Start.Sub(p.Start).Round(time.Millisecond), p.Lease))
			}
		}
	}
	return out
}
