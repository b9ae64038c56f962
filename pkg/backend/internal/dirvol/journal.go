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
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

const (
	// JournalDir is the folder at the top of the base holding one record per
	// volume directory whose PersistentVolume is not known to exist. CheckDir
	// refuses hidden names, so no pattern or PersistentVolume can name it.
	JournalDir = ".provfleet-unsaved"
	// recordSuffix ends every record's file name.
	recordSuffix = ".json"
	// maxRecordSize bounds what is read of a record; real ones are far smaller.
	maxRecordSize = 16 << 10
)

// Record is a volume directory made, or about to be made, for a
// PersistentVolume the Store was not told exists.
type Record struct {
	PVName string
	Dir    string
	// Provisioner is the provisioner that made the directory; empty for a
	// record of a version that did not write it.
	Provisioner string
	// Claim is the claim the volume was made for.
	Claim types.NamespacedName
	// ClaimUID tells the claim apart from a later one of the same name.
	ClaimUID types.UID
	// Since is when the record was written.
	Since time.Time
	// AdoptedFrom is the PersistentVolume whose directory was adopted; ""
	// for a directory made. A directory adopted is retained, never
	// deleted, when its PersistentVolume never comes.
	AdoptedFrom string
}

// recordFile is a record's content.
type recordFile struct {
	PV             string    `json:"pv"`
	Dir            string    `json:"dir"`
	ClaimNamespace string    `json:"claimNamespace"`
	ClaimName      string    `json:"claimName"`
	ClaimUID       types.UID `json:"claimUID"`
	Provisioner    string    `json:"provisioner,omitempty"`
	AdoptedFrom    string    `json:"adoptedFrom,omitempty"`
}

// openJournal opens the record folder, which the first probe or operation
// of the Store makes. Its absence after that means that the base is not the
// directory the Store started on: most often an export or disk that is no
// longer mounted, whose empty mount point must not receive volumes nor let a
// missing directory pass for a deleted one.
func (s *Store) openJournal(ctx context.Context, base Dir) (Dir, error) {
	if !s.journalMade.Load() {
		journal, err := createDir(ctx, base, []string{JournalDir})
		if err != nil {
			return nil, fmt.Errorf("cannot make the volume records: %w", err)
		}
		s.journalMade.Store(true)
		return journal, nil
	}
	journal, err := openDir(ctx, base, []string{JournalDir})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %q holds no %s folder, which the backend made when it started: is the file system that holds it mounted? "+
			"If the folder was removed, create it again", backend.ErrUnavailable, s.cfg.Base, JournalDir)
	case err != nil:
		return nil, fmt.Errorf("cannot open the volume records: %w", err)
	}
	return journal, nil
}

// recordName names a record after both the PV and the directory, so a claim
// rendered to another directory after a restart keeps both records, and no
// name needs escaping.
func recordName(pvName, dir string) string {
	sum := sha256.Sum256([]byte(pvName + "\x00" + dir))
	return hex.EncodeToString(sum[:]) + recordSuffix
}

// Records lists the volumes on record of this provisioner: those tagged with
// one of its names, and those tagged with none. Other provisioners may share
// the base; a record without a tag was written by a version that did not
// tag records, for the one provisioner it ran on the base, and since two
// provisioners on overlapping bases are refused, that is the one reading it.
// A record that cannot be read is logged and skipped: one damaged file must
// not hide the others.
func (s *Store) Records(ctx context.Context) ([]Record, error) {
	logger := klog.FromContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	base, err := s.openBase(ctx)
	if err != nil {
		return nil, err
	}
	defer base.Close()
	journal, err := s.openJournal(ctx, base)
	if err != nil {
		return nil, err
	}
	defer journal.Close()
	names, err := journal.ReadNames(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot list the volume records: %w", err)
	}
	var records []Record
	for _, name := range names {
		record, err := readRecord(ctx, journal, name)
		if errors.Is(err, errIncomplete) {
			// Records reach the disk before their directory is made, so
			// this one's directory never was: the record guards nothing.
			// Failing to drop it must not hide the others either.
			if err := removeRecord(ctx, journal, name); err != nil {
				logger.Error(err, "Cannot drop an incomplete volume record", "record", path.Join(JournalDir, name))
				continue
			}
			logger.Info("Dropped a volume record a crash left incomplete", "record", path.Join(JournalDir, name))
			continue
		}
		if err != nil {
			logger.Error(err, "Skipping an unreadable volume record", "record", path.Join(JournalDir, name))
			continue
		}
		if record.Provisioner != "" && !slices.Contains(s.cfg.Options.ProvisionerNames, record.Provisioner) {
			continue
		}
		records = append(records, record)
	}
	slices.SortFunc(records, func(a, b Record) int {
		return cmp.Or(strings.Compare(a.PVName, b.PVName), strings.Compare(a.Dir, b.Dir))
	})
	return records, nil
}

// Unsaved returns the records as the volumes the controller reclaims: volume
// gives the PersistentVolume of a directory, with its source; the record
// gives its name, claim and time. It also deletes the files a purge that
// failed or was cut short left in the trash, and returns that error with
// the records, so that the controller, which reclaims again while it
// fails, purges until the trash is empty.
func (s *Store) Unsaved(ctx context.Context, volume func(dir string) *corev1.PersistentVolume) ([]provisioning.UnsavedVolume, error) {
	records, err := s.Records(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot list unsaved volumes: %w", err)
	}
	if err := s.purge(ctx); err != nil {
		err = fmt.Errorf("cannot delete the files of deleted volumes left in %s: %w", trashDir, err)
		return unsavedVolumes(records, volume), err
	}
	return unsavedVolumes(records, volume), nil
}

// unsavedVolumes are the records as the volumes the controller reclaims.
func unsavedVolumes(records []Record, volume func(dir string) *corev1.PersistentVolume) []provisioning.UnsavedVolume {
	unsaved := make([]provisioning.UnsavedVolume, 0, len(records))
	for _, r := range records {
		pv := volume(r.Dir)
		pv.Name = r.PVName
		pv.Spec.ClaimRef = &corev1.ObjectReference{
			Kind: "PersistentVolumeClaim", APIVersion: "v1",
			Namespace: r.Claim.Namespace, Name: r.Claim.Name, UID: r.ClaimUID,
		}
		if r.AdoptedFrom != "" {
			setAdopted(pv, r.AdoptedFrom)
		}
		unsaved = append(unsaved, provisioning.UnsavedVolume{Volume: pv, Since: r.Since})
	}
	return unsaved
}

// Forget drops the record of PV pvName's directory dir, if there is one.
func (s *Store) Forget(ctx context.Context, pvName, dir string) error {
	if err := CheckDir(dir); err != nil {
		return fmt.Errorf("directory %q refused: %w", dir, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.forget(ctx, pvName, dir); err != nil {
		return err
	}
	klog.FromContext(ctx).V(4).Info("Volume record dropped", "pv", pvName, "dir", dir)
	return nil
}

func (s *Store) forget(ctx context.Context, pvName, dir string) error {
	base, err := s.openBase(ctx)
	if err != nil {
		return err
	}
	defer base.Close()
	if err := forgetRecord(ctx, base, pvName, dir); err != nil {
		return fmt.Errorf("cannot drop the record of directory %q: %w", dir, err)
	}
	return nil
}

func forgetRecord(ctx context.Context, base Dir, pvName, dir string) error {
	journal, err := openDir(ctx, base, []string{JournalDir})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	}
	defer journal.Close()
	return removeRecord(ctx, journal, recordName(pvName, dir))
}

// removeRecord unlinks a record; a symlink is removed, never followed.
func removeRecord(ctx context.Context, journal Dir, name string) error {
	if err := journal.Remove(ctx, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// writeRecord records the directory of the request's PV unless it is on
// record already, and reports whether it wrote the record. The record and
// its folder are synced before it returns, so after a power cut a volume
// directory always has a complete record, and an incomplete record no
// directory. It costs about a millisecond, less than the API write of the
// PersistentVolume it waits for.
func (s *Store) writeRecord(ctx context.Context, base Dir, req Request, dir string, adopted *corev1.PersistentVolume) (bool, error) {
	journal, err := s.openJournal(ctx, base)
	if err != nil {
		return false, err
	}
	defer journal.Close()
	name := recordName(req.PVName, dir)
	content := recordFile{
		PV: req.PVName, Dir: dir,
		ClaimNamespace: req.Claim.Namespace, ClaimName: req.Claim.Name, ClaimUID: req.Claim.UID,
		Provisioner: s.provisioner(),
	}
	if adopted != nil {
		content.AdoptedFrom = adopted.Name
	}
	data, err := json.Marshal(content)
	if err != nil {
		return false, err
	}
	// Creating first costs a new volume, the common case, one call.
	err = s.createRecord(ctx, journal, name, data)
	if !errors.Is(err, fs.ErrExist) {
		return err == nil, err
	}
	_, readErr := readRecord(ctx, journal, name)
	switch {
	case readErr == nil:
		// Keep the time of the first record: it says how long the volume
		// has been waiting for its PersistentVolume.
		return false, nil
	case errors.Is(readErr, errIncomplete):
		// The name is a hash of this PV and directory, so an empty or cut
		// short record is ours: an earlier try's whose answer was lost (a
		// server that made it and answered with an error) or that crashed
		// while writing it. Written into rather than created again, which
		// may fail the same way on every try.
		if err := s.rewriteRecord(ctx, journal, name, data); err != nil {
			return false, err
		}
		klog.FromContext(ctx).V(2).Info("Reused a volume record an earlier try left incomplete", "record", path.Join(JournalDir, name))
		return true, nil
	}
	// Not a file, or not a record of this name: replaced, once.
	if err := removeRecord(ctx, journal, name); err != nil {
		return false, unreadable(name, readErr, err)
	}
	if err := s.createRecord(ctx, journal, name, data); err != nil {
		return false, unreadable(name, readErr, err)
	}
	return true, nil
}

// unreadable says why replacing the record name, which readErr refused,
// failed with err.
func unreadable(name string, readErr, err error) error {
	return fmt.Errorf("cannot replace the unreadable record %q (%w): %w", name, readErr, err)
}

// recordMode keeps records to the provisioner's user. A file system that
// cannot set it fails the claim (backend.ErrModeRefused) rather than leave a
// record with whatever mode it gives: the folder is hidden from patterns and
// PersistentVolumes, not from other clients of an export, which may mount it
// whole, and its records name every tenant's claims, namespaces and UIDs.
// Nor would tolerating it serve the claim: a server that cannot set a file's
// mode cannot give the volume directory the mode its class asks for either
// (0777 by default, which a server's umask rarely leaves), so the claim would
// fail at its directory, after a record, a marker and folders were made.
// Failing at the record, the first file made, leaves nothing behind and names
// the cause once; the error is not the backend being unavailable, so the
// claim's tries are counted and end.
const recordMode = 0o600

// createRecord writes a record that does not exist yet and syncs it and its
// folder. A create that failed leaves no record where the file system still
// answers.
func (s *Store) createRecord(ctx context.Context, journal Dir, name string, data []byte) error {
	f, err := journal.CreateFile(ctx, name, data, recordMode)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Sync(ctx), f.Close()); err != nil {
		return errors.Join(err, removeRecord(ctx, journal, name))
	}
	return s.syncRecordFolder(ctx, journal)
}

// rewriteRecord writes data into the record name, which an earlier try made
// and left incomplete. One that cannot be written is removed, so that a file
// system failing the same way on every try leaves this error, not a record.
func (s *Store) rewriteRecord(ctx context.Context, journal Dir, name string, data []byte) error {
	if err := journal.RewriteFile(ctx, name, data, recordMode); err != nil {
		err = fmt.Errorf("cannot write the record %q an earlier try left incomplete: %w", name, err)
		return errors.Join(err, removeRecord(ctx, journal, name))
	}
	return s.syncRecordFolder(ctx, journal)
}

// syncRecordFolder syncs the folder of a record just written: the record's
// name lives in the folder, and without this sync a power cut may lose it
// while the directory made next survives.
func (s *Store) syncRecordFolder(ctx context.Context, journal Dir) error {
	if err := s.did(stepRecordSynced); err != nil {
		return err
	}
	if err := journal.Sync(ctx); err != nil {
		return fmt.Errorf("cannot sync the record folder: %w", err)
	}
	return s.did(stepJournalSynced)
}

// errIncomplete marks a record that is empty or whose content was cut short.
var errIncomplete = errors.New("the record is incomplete")

// readRecord reads and checks one record: a regular file whose content is
// valid and whose name matches it.
func readRecord(ctx context.Context, journal Dir, name string) (Record, error) {
	data, info, err := journal.ReadFile(ctx, name, maxRecordSize+1)
	switch {
	case err != nil:
		return Record{}, err
	case len(data) > maxRecordSize:
		return Record{}, fmt.Errorf("%q is larger than %d bytes", name, maxRecordSize)
	}
	if !json.Valid(data) {
		return Record{}, fmt.Errorf("%q: %w", name, errIncomplete)
	}
	var content recordFile
	if err := json.Unmarshal(data, &content); err != nil {
		return Record{}, fmt.Errorf("cannot parse %q: %w", name, err)
	}
	if err := CheckDir(content.Dir); err != nil {
		return Record{}, fmt.Errorf("%q names directory %q: %w", name, content.Dir, err)
	}
	if content.PV == "" {
		return Record{}, fmt.Errorf("%q names no PersistentVolume", name)
	}
	if name != recordName(content.PV, content.Dir) {
		return Record{}, fmt.Errorf("%q does not match its content", name)
	}
	return Record{
		PVName:      content.PV,
		Dir:         content.Dir,
		Claim:       types.NamespacedName{Namespace: content.ClaimNamespace, Name: content.ClaimName},
		ClaimUID:    content.ClaimUID,
		Provisioner: content.Provisioner,
		Since:       info.ModTime(),
		AdoptedFrom: content.AdoptedFrom,
	}, nil
}

// provisioner is the name records are tagged with: the provisioner's own,
// which comes first and never changes.
func (s *Store) provisioner() string {
	if len(s.cfg.Options.ProvisionerNames) == 0 {
		return ""
	}
	return s.cfg.Options.ProvisionerNames[0]
}
