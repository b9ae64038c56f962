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

package report

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// rowKey is what a row of latest.jsonl measures: a later run's row of the
// same key replaces it, and a run that measured other things leaves it.
type rowKey struct {
	scenario, system          string
	tenants, replicas, claims int
}

func keyOf(r Result) rowKey {
	return rowKey{scenario: r.Scenario, system: r.System, tenants: r.Tenants, replicas: r.Replicas, claims: r.Claims}
}

func compareKeys(a, b rowKey) int {
	return cmp.Or(cmp.Compare(a.scenario, b.scenario), cmp.Compare(a.system, b.system),
		cmp.Compare(a.tenants, b.tenants), cmp.Compare(a.replicas, b.replicas), cmp.Compare(a.claims, b.claims))
}

// Merge returns the rows of previous that no row of run measures again, and
// the rows of run, the last of each key, sorted by key.
func Merge(previous, run []Result) []Result {
	rows := map[rowKey]Result{}
	for _, r := range previous {
		rows[keyOf(r)] = r
	}
	for _, r := range run {
		rows[keyOf(r)] = r
	}
	keys := make([]rowKey, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	out := make([]Result, len(keys))
	for i, k := range keys {
		out[i] = rows[k]
	}
	return out
}

// UpdateJSONL merges the rows of run into the file at path, which need not
// exist: each row the run measured replaces the file's row of the same key,
// every other row stays. Rows written before rows carried their date and
// commit are kept, dated Unknown. The file is replaced at once, so a failed
// run never leaves half of it.
func UpdateJSONL(path string, run []Result) error {
	for _, r := range run {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("cannot record a malformed result: %w", err)
		}
	}
	var previous []Result
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("cannot open %s: %w", path, err)
	default:
		previous, err = readJSONL(f, undatedFields)
		f.Close()
		if err != nil {
			return fmt.Errorf("cannot read %s: %w", path, err)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	err = WriteJSONL(tmp, Merge(previous, run))
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}
