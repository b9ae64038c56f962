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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Check is one property the run checked at its end, and what broke it.
type Check struct {
	Name     string
	Problems []string
}

// Passed says whether nothing broke the property.
func (c Check) Passed() bool { return len(c.Problems) == 0 }

// maxProblems bounds the problems a check lists; the count says the rest.
const maxProblems = 20

func (c *Check) add(format string, args ...any) {
	c.Problems = append(c.Problems, fmt.Sprintf(format, args...))
}

// Hidden folders of a volume base: the records of volumes being made and
// the trash of volumes being deleted.
const (
	recordFolder = ".provfleet-unsaved"
	trashFolder  = ".provfleet-deleting"
)

// state is what the cluster and the disks hold at the end.
type state struct {
	claims map[types.UID]*corev1.PersistentVolumeClaim
	pvs    []corev1.PersistentVolume
	// dirs are the volume directories by location (as madeDir's), with
	// the provisioner whose base holds them.
	dirs map[string]string
	// archived counts the archived directories; trash lists what waits
	// in a trash folder; records the directories records name.
	archived int
	trash    []string
	records  map[string]bool
}

// observe reads the end state.
func (r *runner) observe(ctx context.Context) (*state, error) {
	s := &state{claims: map[types.UID]*corev1.PersistentVolumeClaim{}, dirs: map[string]string{}, records: map[string]bool{}}
	for _, ns := range tenants {
		claims, err := r.c.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("cannot list claims: %w", err)
		}
		for i := range claims.Items {
			s.claims[claims.Items[i].UID] = &claims.Items[i]
		}
	}
	pvs, err := r.c.kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot list PersistentVolumes: %w", err)
	}
	s.pvs = pvs.Items
	for _, p := range r.provisioners {
		for base, location := range r.bases(p) {
			if err := s.scan(p, base, location); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// bases are the folders of p's volumes on the host, each with the
// location prefix of its volumes (as madeDir's).
func (r *runner) bases(p *provisioner) map[string]string {
	out := map[string]string{}
	if p.local() {
		for _, node := range nodeNames {
			base := filepath.Join(r.c.disk(node), p.base)
			out[base] = base
		}
		return out
	}
	out[p.nfs.dir] = "nfs:" + p.name
	return out
}

// scan reads one base's volume directories, archives, trash and records.
func (s *state) scan(p *provisioner, base, location string) error {
	entries, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot list %s: %w", base, err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == trashFolder:
			trash, err := os.ReadDir(filepath.Join(base, name))
			if err != nil {
				return fmt.Errorf("cannot list the trash of %s: %w", base, err)
			}
			for _, t := range trash {
				s.trash = append(s.trash, filepath.Join(base, name, t.Name()))
			}
		case name == recordFolder:
			if err := s.readRecords(filepath.Join(base, name), location); err != nil {
				return err
			}
		case strings.HasPrefix(name, "."):
			// owner markers
		case strings.HasPrefix(name, "archived-"):
			s.archived++
		default:
			s.dirs[path.Join(location, name)] = p.name
		}
	}
	return nil
}

func (s *state) readRecords(folder, location string) error {
	records, err := os.ReadDir(folder)
	if err != nil {
		return fmt.Errorf("cannot list the records of %s: %w", folder, err)
	}
	for _, rec := range records {
		data, err := os.ReadFile(filepath.Join(folder, rec.Name())) //nolint:gosec // the run's own folders
		if err != nil {
			return fmt.Errorf("cannot read record %s: %w", rec.Name(), err)
		}
		var content struct {
			Dir string `json:"dir"`
		}
		if json.Unmarshal(data, &content) == nil && content.Dir != "" {
			s.records[path.Join(location, content.Dir)] = true
		}
	}
	return nil
}

// location is where pv's directory is, as madeDir's locations are.
func (r *runner) location(pv *corev1.PersistentVolume) string {
	switch {
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path
	case pv.Spec.NFS != nil:
		return path.Join("nfs:"+pv.Spec.StorageClassName, strings.TrimPrefix(pv.Spec.NFS.Path, exportPath+"/"))
	}
	return ""
}

// checkState checks the end state: every live claim bound to exactly one
// PersistentVolume, no volume without its claim, nothing Released or
// Failed, no directory without a volume or a record, nothing left in a
// trash.
func (r *runner) checkState(s *state, live []*claim) []Check {
	bound := Check{Name: "every live claim is bound to exactly one PersistentVolume"}
	orphans := Check{Name: "no PersistentVolume without its claim (every class's policy is Delete)"}
	released := Check{Name: "nothing stuck Released or Failed"}
	dirs := Check{Name: "no volume directory without its PersistentVolume or a record that explains it; no trash left to purge"}

	byClaim := map[types.UID][]string{}
	locations := map[string]string{}
	for i := range s.pvs {
		pv := &s.pvs[i]
		if pv.Spec.ClaimRef != nil {
			byClaim[pv.Spec.ClaimRef.UID] = append(byClaim[pv.Spec.ClaimRef.UID], pv.Name)
		}
		locations[r.location(pv)] = pv.Name
		switch pv.Status.Phase {
		case corev1.VolumeReleased, corev1.VolumeFailed:
			released.add("%s is %s: %s", pv.Name, pv.Status.Phase, pv.Status.Message)
		}
	}
	liveUIDs := map[types.UID]bool{}
	for _, cl := range live {
		liveUIDs[cl.uid] = true
		pvc := s.claims[cl.uid]
		switch {
		case pvc == nil:
			bound.add("%s/%s is gone, though never deleted", cl.namespace, cl.name)
		case pvc.Status.Phase != corev1.ClaimBound:
			bound.add("%s/%s (%s) is %s", cl.namespace, cl.name, cl.provisioner.name, pvc.Status.Phase)
		case len(byClaim[cl.uid]) != 1:
			bound.add("%s/%s has %d PersistentVolumes: %v", cl.namespace, cl.name, len(byClaim[cl.uid]), byClaim[cl.uid])
		case byClaim[cl.uid][0] != pvc.Spec.VolumeName:
			bound.add("%s/%s names %s, while %s names it", cl.namespace, cl.name, pvc.Spec.VolumeName, byClaim[cl.uid][0])
		}
	}
	for i := range s.pvs {
		pv := &s.pvs[i]
		if pv.Spec.ClaimRef == nil || !liveUIDs[pv.Spec.ClaimRef.UID] {
			orphans.add("%s (%s) has no live claim", pv.Name, pv.Spec.StorageClassName)
		}
	}
	for _, location := range slices.Sorted(maps.Keys(s.dirs)) {
		if _, ok := locations[location]; !ok && !s.records[location] {
			dirs.add("%s of %s: no PersistentVolume or record names it", location, s.dirs[location])
		}
	}
	for _, t := range s.trash {
		dirs.add("%s is still in the trash", t)
	}
	return []Check{bound, orphans, released, dirs}
}

// checkHistory judges double provisioning from the run's history: each
// PersistentVolume created once, and of the directories made for it only
// the one it names left, the others (tries on another node or path)
// removed.
func (r *runner) checkHistory(s *state, creates []pvCreate, made []madeDir, ours map[string]bool) Check {
	twice := Check{Name: "no claim provisioned twice (the audit log's PersistentVolume creations and the stores' directory creations)"}
	created := map[string]int{}
	for _, c := range creates {
		created[c.Name]++
		if !ours[c.Name] {
			twice.add("%s was created by %s for no claim of the run", c.Name, c.User)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(created)) {
		if created[name] > 1 {
			twice.add("%s was created %d times", name, created[name])
		}
	}
	final := map[string]string{}
	for i := range s.pvs {
		final[s.pvs[i].Name] = r.location(&s.pvs[i])
	}
	for _, d := range made {
		location := d.Location
		if d.NFS {
			location = path.Join("nfs:"+r.classOf(d.PV), d.Location)
		}
		if _, left := s.dirs[location]; left && final[d.PV] != location {
			twice.add("%s: a directory made for it is still at %s, while its volume is at %q", d.PV, location, final[d.PV])
		}
	}
	return twice
}

// classOf is the class of the claim of PersistentVolume pvName.
func (r *runner) classOf(pvName string) string {
	uid := types.UID(strings.TrimPrefix(pvName, "pvc-"))
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	for _, cl := range r.w.claims {
		if cl.uid == uid {
			return cl.provisioner.name
		}
	}
	return ""
}
