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

package dirvol

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// record is what Records returns for a claim of the test's request helper.
func record(namespace, name, dir string) Record {
	return Record{
		PVName:      "pvc-" + namespace + "-" + name,
		Dir:         dir,
		Claim:       types.NamespacedName{Namespace: namespace, Name: name},
		ClaimUID:    types.UID(namespace + "-" + name),
		Provisioner: testProvisioner,
	}
}

func (f *fixture) create(t *testing.T, req Request) string {
	t.Helper()
	dir, err := dirOf(f.store.Create(t.Context(), req))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return dir
}

// restart replaces the Store with a new one on the same base, as a new
// process would have: only what is on disk is known.
func (f *fixture) restart(t *testing.T) {
	t.Helper()
	var err error
	if f.store, err = New(f.store.cfg); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) journal() string { return filepath.Join(f.base, JournalDir) }

func TestRecords(t *testing.T) {
	tests := map[string]struct {
		steps func(t *testing.T, f *fixture)
		want  []Record
	}{
		"nothing made": {
			steps: func(t *testing.T, f *fixture) { t.Helper() },
		},
		"create records the directory": {
			steps: func(t *testing.T, f *fixture) { t.Helper(); f.create(t, request(t, "team", "data", "1Gi", nsPattern)) },
			want:  []Record{record("team", "data", "team/data")},
		},
		"create again keeps one record": {
			steps: func(t *testing.T, f *fixture) {
				t.Helper()
				f.create(t, request(t, "team", "data", "1Gi", nsPattern))
				f.create(t, request(t, "team", "data", "1Gi", nsPattern))
				f.restart(t)
				f.create(t, request(t, "team", "data", "1Gi", nsPattern))
			},
			want: []Record{record("team", "data", "team/data")},
		},
		"a record a crash left empty is written again": {
			steps: func(t *testing.T, f *fixture) {
				t.Helper()
				f.create(t, request(t, "team", "data", "1Gi", nsPattern))
				if err := os.WriteFile(filepath.Join(f.journal(), recordName("pvc-team-data", "team/data")), nil, 0o600); err != nil {
					t.Fatal(err)
				}
				f.restart(t)
				f.create(t, request(t, "team", "data", "1Gi", nsPattern))
			},
			want: []Record{record("team", "data", "team/data")},
		},
		"a claim rendered to another directory after a restart has two records": {
			steps: func(t *testing.T, f *fixture) {
				t.Helper()
				f.create(t, request(t, "team", "data", "1Gi", nsPattern))
				f.restart(t)
				f.create(t, request(t, "team", "data", "1Gi", "elsewhere/{{.PVC.Name}}"))
			},
			want: []Record{record("team", "data", "elsewhere/data"), record("team", "data", "team/data")},
		},
		"forget drops only that directory of that PV": {
			steps: func(t *testing.T, f *fixture) {
				t.Helper()
				f.create(t, request(t, "team", "data", "1Gi", nsPattern))
				f.restart(t)
				f.create(t, request(t, "team", "data", "1Gi", "elsewhere/{{.PVC.Name}}"))
				f.create(t, request(t, "team", "logs", "1Gi", nsPattern))
				if err := f.store.Forget(t.Context(), "pvc-team-data", "team/data"); err != nil {
					t.Fatal(err)
				}
			},
			want: []Record{record("team", "data", "elsewhere/data"), record("team", "logs", "team/logs")},
		},
		"forget of what was never recorded": {
			steps: func(t *testing.T, f *fixture) {
				t.Helper()
				f.create(t, request(t, "team", "data", "1Gi", nsPattern))
				for _, pair := range [][2]string{{"pvc-team-data", "other"}, {"pvc-other", "team/data"}} {
					if err := f.store.Forget(t.Context(), pair[0], pair[1]); err != nil {
						t.Fatalf("Forget(%q, %q): %v", pair[0], pair[1], err)
					}
				}
			},
			want: []Record{record("team", "data", "team/data")},
		},
		"remove drops the record": {
			steps: func(t *testing.T, f *fixture) {
				t.Helper()
				dir := f.create(t, request(t, "team", "data", "1Gi", nsPattern))
				if err := f.store.DeleteByName(t.Context(), "pvc-team-data", dir); err != nil {
					t.Fatal(err)
				}
			},
		},
		"remove of a vanished directory drops the record": {
			steps: func(t *testing.T, f *fixture) {
				t.Helper()
				f.create(t, request(t, "team", "data", "1Gi", nsPattern))
				if err := os.RemoveAll(filepath.Join(f.base, "team")); err != nil {
					t.Fatal(err)
				}
				if err := f.store.DeleteByName(t.Context(), "pvc-team-data", "team/data"); err != nil {
					t.Fatal(err)
				}
			},
		},
		"a refused remove keeps the record": {
			steps: func(t *testing.T, f *fixture) {
				t.Helper()
				dir := f.create(t, request(t, "team", "data", "1Gi", nsPattern))
				f.pvs = []*corev1.PersistentVolume{volume("pvc-static", "team/data/inner", "1Gi", "")}
				checkErr(t, f.store.DeleteByName(t.Context(), "pvc-team-data", dir), "another volume")
			},
			want: []Record{record("team", "data", "team/data")},
		},
		"a directory made by hand is not recorded": {
			steps: func(t *testing.T, f *fixture) {
				t.Helper()
				backendtest.WriteFile(t, filepath.Join(f.base, "team/data/secret"), "x")
				_, err := f.store.Create(t.Context(), request(t, "team", "data", "1Gi", nsPattern))
				checkErr(t, err, "already exists")
			},
		},
		"a record left by a crash goes when the directory turns out to be someone else's": {
			steps: func(t *testing.T, f *fixture) {
				t.Helper()
				req := request(t, "team", "data", "1Gi", nsPattern)
				base, err := f.store.openBase(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				defer base.Close()
				if _, err := f.store.writeRecord(t.Context(), base, req, "team/data", nil); err != nil {
					t.Fatal(err)
				}
				backendtest.WriteFile(t, filepath.Join(f.base, "team/data/secret"), "x")
				_, err = f.store.Create(t.Context(), req)
				checkErr(t, err, "already exists")
			},
		},
		"an earlier record survives a failure that proves nothing": {
			steps: func(t *testing.T, f *fixture) {
				t.Helper()
				req := request(t, "team", "data", "1Gi", nsPattern)
				f.create(t, req)
				f.restart(t)
				// An owner marker that cannot be read.
				marker := filepath.Join(f.base, "team", markerName("data"))
				if err := os.Remove(marker); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(marker, 0o755); err != nil {
					t.Fatal(err)
				}
				_, err := f.store.Create(t.Context(), req)
				checkErr(t, err, "cannot read owner marker")
			},
			want: []Record{record("team", "data", "team/data")},
		},
		"a directory of another volume is not recorded": {
			steps: func(t *testing.T, f *fixture) {
				t.Helper()
				f.create(t, request(t, "x", "team", "1Gi", "{{.PVC.Name}}"))
				f.restart(t)
				_, err := f.store.Create(t.Context(), request(t, "team", "data", "1Gi", nsPattern))
				checkErr(t, err, "another volume")
			},
			want: []Record{record("x", "team", "team")},
		},
		"damaged records are skipped": {
			steps: func(t *testing.T, f *fixture) {
				t.Helper()
				f.create(t, request(t, "team", "data", "1Gi", nsPattern))
				valid := `{"pv":"pvc-x","dir":"x","claimNamespace":"team","claimName":"x","claimUID":"u"}`
				for name, content := range map[string]string{
					"truncated" + recordSuffix:      `{"pv":"pvc-x",`,
					"empty" + recordSuffix:          "",
					"renamed" + recordSuffix:        valid,
					recordName("pvc-x", "../x"):     `{"pv":"pvc-x","dir":"../x","claimName":"x","claimUID":"u"}`,
					recordName("", "x"):             `{"pv":"","dir":"x","claimName":"x","claimUID":"u"}`,
					recordName("pvc-big", "x"):      `{"pv":"pvc-big","dir":"x","pad":"` + string(make([]byte, maxRecordSize)) + `"}`,
					recordName("pvc-x", "x") + ".d": "",
				} {
					backendtest.WriteFile(t, filepath.Join(f.journal(), name), content)
				}
				// A directory and a symlink with the name of a valid record.
				if err := os.Mkdir(filepath.Join(f.journal(), recordName("pvc-dir", "x")), 0o755); err != nil {
					t.Fatal(err)
				}
				backendtest.WriteFile(t, filepath.Join(f.base, "elsewhere.json"), valid)
				backendtest.Symlink(t, "../elsewhere.json", filepath.Join(f.journal(), recordName("pvc-x", "x")))
			},
			want: []Record{record("team", "data", "team/data")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			start := time.Now()
			tc.steps(t, f)
			got, err := f.store.Records(t.Context())
			if err != nil {
				t.Fatalf("Records: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Record{}, "Since")); diff != "" {
				t.Errorf("Records() mismatch (-want +got):\n%s", diff)
			}
			for _, r := range got {
				// File times may lag the clock by a tick; a minute is plenty.
				if r.Since.Before(start.Add(-time.Minute)) || r.Since.After(time.Now().Add(time.Minute)) {
					t.Errorf("record %s %s: Since %v, want about %v", r.PVName, r.Dir, r.Since, start)
				}
			}
		})
	}
}

// TestRecordSince: Since is the record's file time, and recording the same
// directory again keeps it, so it says how long the volume has waited.
func TestRecordSince(t *testing.T) {
	f := newFixture(t, nil)
	req := request(t, "team", "data", "1Gi", nsPattern)
	dir := f.create(t, req)
	written := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(f.journal(), recordName(req.PVName, dir)), written, written); err != nil {
		t.Fatal(err)
	}
	f.create(t, req)
	got, err := f.store.Records(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got[0].Since.Equal(written) {
		t.Errorf("Records() = %v, want one record since %v", got, written)
	}
}

func TestUnsaved(t *testing.T) {
	f := newFixture(t, nil)
	f.create(t, request(t, "team", "data", "1Gi", nsPattern))
	written := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(f.journal(), recordName("pvc-team-data", "team/data")), written, written); err != nil {
		t.Fatal(err)
	}
	got, err := f.store.Unsaved(t.Context(), func(dir string) *corev1.PersistentVolume {
		return volume("ignored", dir, "1Gi", testProvisioner)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := volume("pvc-team-data", "team/data", "1Gi", testProvisioner)
	want.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "team", Name: "data", UID: "team-data"}
	if diff := cmp.Diff([]provisioning.UnsavedVolume{{Volume: want, Since: written}}, got); diff != "" {
		t.Errorf("Unsaved() mismatch (-want +got):\n%s", diff)
	}
}

// TestRecordFirst: a volume that cannot be recorded is not made.
func TestRecordFirst(t *testing.T) {
	f := newFixture(t, nil)
	req := request(t, "team", "data", "1Gi", nsPattern)
	// A folder in the record's place cannot be replaced by a record.
	backendtest.WriteFile(t, filepath.Join(f.journal(), recordName(req.PVName, "team/data"), "x"), "")
	before := backendtest.Snapshot(t, f.tmp, "")
	_, err := f.store.Create(t.Context(), req)
	checkErr(t, err, "cannot record the volume")
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("error %v is not %v", err, backend.ErrUnavailable)
	}
	if diff := cmp.Diff(before, backendtest.Snapshot(t, f.tmp, "")); diff != "" {
		t.Errorf("a Create that could not record changed files (-before +after):\n%s", diff)
	}
}

// TestJournalSymlinked replaces the folder of records with a symlink: every
// operation on records refuses it and writes nothing through it.
func TestJournalSymlinked(t *testing.T) {
	tests := map[string]struct {
		op func(t *testing.T, f *fixture) error
		// releases: the operation handles the volume before its record.
		releases bool
		want     error
		wantErr  string
	}{
		"first probe": {
			op: func(t *testing.T, f *fixture) error {
				t.Helper()
				s, err := New(f.store.cfg)
				if err != nil {
					return err
				}
				_, err = s.Probe(t.Context())
				return err
			},
			want: backend.ErrUnavailable, wantErr: "not a directory",
		},
		"probe": {
			op:   func(t *testing.T, f *fixture) error { t.Helper(); _, err := f.store.Probe(t.Context()); return err },
			want: backend.ErrUnavailable, wantErr: "not a directory",
		},
		"create": {
			op: func(t *testing.T, f *fixture) error {
				t.Helper()
				_, err := f.store.Create(t.Context(), request(t, "team", "logs", "1Gi", nsPattern))
				return err
			},
			want: backend.ErrUnavailable, wantErr: "not a directory",
		},
		"records": {
			op:      func(t *testing.T, f *fixture) error { t.Helper(); _, err := f.store.Records(t.Context()); return err },
			wantErr: "not a directory",
		},
		"forget": {
			op: func(t *testing.T, f *fixture) error {
				t.Helper()
				return f.store.Forget(t.Context(), "pvc-team-data", "team/data")
			},
			wantErr: "not a directory",
		},
		"remove": {
			op: func(t *testing.T, f *fixture) error {
				t.Helper()
				return f.store.DeleteByName(t.Context(), "pvc-team-data", "team/data")
			},
			releases: true, wantErr: "not a directory",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.OnDelete = backend.OnDeleteRetain })
			f.create(t, request(t, "team", "data", "1Gi", nsPattern))
			moved := filepath.Join(f.tmp, "outside", "records")
			if err := os.Rename(f.journal(), moved); err != nil {
				t.Fatal(err)
			}
			backendtest.Symlink(t, moved, f.journal())
			unchanged := f.tmp
			if tc.releases {
				unchanged = moved
			}
			before := backendtest.Snapshot(t, unchanged, "")
			err := tc.op(t, f)
			checkErr(t, err, tc.wantErr)
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v is not %v", err, tc.want)
			}
			if diff := cmp.Diff(before, backendtest.Snapshot(t, unchanged, "")); diff != "" {
				t.Errorf("files changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestJournalIsNoVolume: no pattern, PersistentVolume or removal reaches the
// folder of records.
func TestJournalIsNoVolume(t *testing.T) {
	tests := map[string]struct {
		op      func(t *testing.T, f *fixture) error
		wantErr string
	}{
		"a pattern naming it": {
			op: func(t *testing.T, f *fixture) error {
				t.Helper()
				_, err := f.store.Create(t.Context(), request(t, "team", "data", "1Gi", JournalDir+"/{{.PVC.Name}}"))
				return err
			},
			wantErr: "begins with a dot",
		},
		"removing it": {
			op: func(t *testing.T, f *fixture) error {
				t.Helper()
				return f.store.DeleteByName(t.Context(), "pvc-team-data", JournalDir)
			},
			wantErr: "begins with a dot",
		},
		"a listed volume naming it is no overlap": {
			op: func(t *testing.T, f *fixture) error {
				t.Helper()
				f.pvs = []*corev1.PersistentVolume{volume("pvc-odd", JournalDir, "1Gi", testProvisioner)}
				dir := f.create(t, request(t, "team", "data", "1Gi", ""))
				return f.store.DeleteByName(t.Context(), "pvc-team-data", dir)
			},
		},
		"removing the last volume below the base": {
			op: func(t *testing.T, f *fixture) error {
				t.Helper()
				dir := f.create(t, request(t, "team", "data", "1Gi", ""))
				return f.store.DeleteByName(t.Context(), "pvc-team-data", dir)
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			backendtest.WriteFile(t, filepath.Join(f.journal(), recordName("pvc-kept", "kept")),
				`{"pv":"pvc-kept","dir":"kept","claimNamespace":"team","claimName":"kept","claimUID":"team-kept"}`)
			before := backendtest.Snapshot(t, f.journal(), "")
			checkErr(t, tc.op(t, f), tc.wantErr)
			if diff := cmp.Diff(before, backendtest.Snapshot(t, f.journal(), "")); diff != "" {
				t.Errorf("the folder of records changed (-before +after):\n%s", diff)
			}
		})
	}
}

// A base without the record folder New made is not the directory the Store
// started on, as when an export is no longer mounted: nothing is made there,
// a missing directory does not pass for a deleted one, and the records cannot
// be listed.
func TestLostRecordFolder(t *testing.T) {
	tests := map[string]func(t *testing.T, f *fixture) error{
		"list": func(t *testing.T, f *fixture) error {
			t.Helper()
			_, err := f.store.Records(t.Context())
			return err
		},
		"create": func(t *testing.T, f *fixture) error {
			t.Helper()
			_, err := f.store.Create(t.Context(), request(t, "team", "other", "1Gi", nsPattern))
			return err
		},
		"remove a missing directory": func(t *testing.T, f *fixture) error {
			t.Helper()
			return f.store.DeleteByName(t.Context(), "pvc-team-gone", "team/gone")
		},
	}
	for name, op := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			if err := os.RemoveAll(f.journal()); err != nil {
				t.Fatal(err)
			}
			before := backendtest.Tree(t, f.base)
			err := op(t, f)
			if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "mounted") {
				t.Errorf("got %v, want an ErrUnavailable that asks whether the file system is mounted", err)
			}
			if diff := cmp.Diff(before, backendtest.Tree(t, f.base)); diff != "" {
				t.Errorf("base changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestUnsavedOfOneProvisioner: two provisioners whose bases are one
// directory each reclaim only the volumes they made; a record of the version
// that wrote no provisioner is taken for the reader's.
func TestUnsavedOfOneProvisioner(t *testing.T) {
	f := newFixture(t, nil)
	otherCfg := f.store.cfg
	otherCfg.Options.ProvisionerNames = []string{"provfleet.io/other"}
	other, err := New(otherCfg)
	if err != nil {
		t.Fatal(err)
	}
	f.create(t, request(t, "team", "mine", "1Gi", nsPattern))
	if _, err := other.Create(t.Context(), request(t, "team", "theirs", "1Gi", nsPattern)); err != nil {
		t.Fatal(err)
	}
	backendtest.WriteFile(t, filepath.Join(f.journal(), recordName("pvc-team-old", "team/old")),
		`{"pv":"pvc-team-old","dir":"team/old","claimNamespace":"team","claimName":"old","claimUID":"team-old"}`)
	names := func(s *Store) []string {
		unsaved, err := s.Unsaved(t.Context(), func(dir string) *corev1.PersistentVolume {
			return volume("ignored", dir, "1Gi", "")
		})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, u := range unsaved {
			names = append(names, u.Volume.Name)
		}
		return names
	}
	if diff := cmp.Diff([]string{"pvc-team-mine", "pvc-team-old"}, names(f.store)); diff != "" {
		t.Errorf("Unsaved() of %s (-want +got):\n%s", testProvisioner, diff)
	}
	if diff := cmp.Diff([]string{"pvc-team-old", "pvc-team-theirs"}, names(other)); diff != "" {
		t.Errorf("Unsaved() of provfleet.io/other (-want +got):\n%s", diff)
	}
}

// TestRecordSyncedBeforeVolume: a record and its folder reach the disk before
// the volume directory exists, so a power cut cannot leave a directory whose
// record is empty.
func TestRecordSyncedBeforeVolume(t *testing.T) {
	f := newFixture(t, nil)
	var steps []string
	f.store.step = func(name string) error {
		steps = append(steps, name)
		return nil
	}
	f.create(t, request(t, "team", "data", "1Gi", nsPattern))
	if diff := cmp.Diff([]string{stepRecordSynced, stepJournalSynced, stepVolumeMade}, steps); diff != "" {
		t.Errorf("steps of Create (-want +got):\n%s", diff)
	}
}

// TestDamagedRecordDropped: a record left empty or truncated by a power cut
// was never followed by its directory, since records are synced first: it is
// dropped, the other records are listed, and its claim can still get the
// volume.
func TestDamagedRecordDropped(t *testing.T) {
	for name, content := range map[string]string{"empty": "", "truncated": `{"pv":"pvc-team-data","dir":"te`} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.create(t, request(t, "team", "logs", "1Gi", nsPattern))
			damaged := recordName("pvc-team-data", "team/data")
			backendtest.WriteFile(t, filepath.Join(f.journal(), damaged), content)
			got, err := f.store.Records(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]Record{record("team", "logs", "team/logs")}, got, cmpopts.IgnoreFields(Record{}, "Since")); diff != "" {
				t.Errorf("Records() (-want +got):\n%s", diff)
			}
			if _, err := os.Lstat(filepath.Join(f.journal(), damaged)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("damaged record still there: %v", err)
			}
			f.create(t, request(t, "team", "data", "1Gi", nsPattern))
			got, err = f.store.Records(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			want := []Record{record("team", "data", "team/data"), record("team", "logs", "team/logs")}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Record{}, "Since")); diff != "" {
				t.Errorf("Records() after the claim's retry (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnsavedPurgesTheTrash: what a purge that failed or was cut short
// left in the trash is deleted by the next reclaim's Unsaved, which lists
// the records all the same.
func TestUnsavedPurgesTheTrash(t *testing.T) {
	f := newFixture(t, nil)
	req := request(t, "team", "data", "1Gi", nsPattern)
	f.create(t, req)
	backendtest.WriteFile(t, filepath.Join(f.base, trashDir, "LEFT", "sub", "file"), "a deleted volume's")
	unsaved, err := f.store.Unsaved(t.Context(), func(string) *corev1.PersistentVolume { return &corev1.PersistentVolume{} })
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range unsaved {
		names = append(names, u.Volume.Name)
	}
	if diff := cmp.Diff([]string{req.PVName}, names); diff != "" {
		t.Errorf("unsaved (-want +got):\n%s", diff)
	}
	if left, err := os.ReadDir(filepath.Join(f.base, trashDir)); len(left) > 0 || err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("left in the trash: %v, %v", left, err)
	}
}
