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
	"fmt"
	"io/fs"
	"strconv"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// The claim annotations nfs-subdir-external-provisioner reads from v4.0.3 on
// for the mode and owner of a new directory.
const (
	AnnNFSDirectoryMode = "k8s-sigs.io/nfs-directory-mode"
	AnnNFSDirectoryUID  = "k8s-sigs.io/nfs-directory-uid"
	AnnNFSDirectoryGID  = "k8s-sigs.io/nfs-directory-gid"
)

// nfsSubdirMaxID is the largest uid or gid nfs-subdir-external-provisioner
// accepts in a claim annotation.
const nfsSubdirMaxID = 65535

// ParseNFSSubdirRequest is ParseRequest for a claim of a StorageClass of
// the nfs-subdir-external-provisioner subdir: its parameters are read as
// that provisioner's release reads them, and nothing else. Its pathPattern
// is in that provisioner's ${.PVC.<key>} syntax; without one a directory is
// <namespace>-<claim>-<PV name>. The onDelete policy is left for
// subdir.OnDelete to decide once the directory is known, but an
// archiveOnDelete it could not read refuses the claim now. Parameters that
// provisioner ignores are ignored, except this project's own (mode, uid, gid)
// and local-path-provisioner's (nodePath, nodeAffinityKey), which it would ignore where the class's author meant them to
// count: they refuse the claim. From v4.0.3 on, the claim's
// k8s-sigs.io/nfs-directory-mode, -uid and -gid annotations set the mode and
// owner of the directory; a value that provisioner cannot read refuses the
// claim (where it logs a bad uid or gid and goes on without it).
func ParseNFSSubdirRequest(opts provisioning.ProvisionOptions, subdir backend.NFSSubdir) (Request, error) {
	req, err := ParseRequest(provisioning.ProvisionOptions{PVName: opts.PVName, PVC: opts.PVC})
	if err != nil {
		return Request{}, err
	}
	class := opts.StorageClass
	if err := req.setNFSSubdirParams(class.Parameters, subdir); err != nil {
		return Request{}, fmt.Errorf("StorageClass %s of nfs-subdir-external-provisioner %s: %w", class.Name, subdir.ProvisionerName, err)
	}
	if subdir.ReadsDirectoryAnnotations() {
		if err := req.setNFSSubdirDirectory(); err != nil {
			return Request{}, err
		}
	}
	return req, nil
}

// setNFSSubdirParams sets what nfs-subdir-external-provisioner reads of a
// class's parameters.
func (r *Request) setNFSSubdirParams(params map[string]string, subdir backend.NFSSubdir) error {
	for _, key := range []string{ParamMode, ParamUID, ParamGID, ParamNodePath, ParamNodeAffinityKey} {
		if _, ok := params[key]; ok {
			return fmt.Errorf("parameter %s is not one nfs-subdir-external-provisioner reads, so its claims never had it: remove it, "+
				"or set the ProvisionerConfig's mode, uid and gid, or the claim annotations %s, %s and %s", key, AnnNFSDirectoryMode, AnnNFSDirectoryUID, AnnNFSDirectoryGID)
		}
	}
	// Its Delete reads archiveOnDelete only when onDelete is neither delete
	// nor retain; a directory nested in folders decides nothing yet.
	if _, err := subdir.OnDelete(params, "top"); err != nil {
		return fmt.Errorf("%w: use \"true\" or \"false\"", err)
	}
	var err error
	if text, ok := params[backend.NFSSubdirParamPathPattern]; ok {
		r.Pattern, err = parseSubdirPatternOnly(text)
	} else {
		r.Pattern, err = ParsePattern(subdirDefaultPattern)
	}
	if err != nil {
		return fmt.Errorf("parameter %s: %w", backend.NFSSubdirParamPathPattern, err)
	}
	if subdir.ReadsDirectoryAnnotations() {
		// From v4.0.3 on a pattern that renders nothing falls back to the
		// default name; before, it names the export itself.
		r.Pattern.fallback, err = ParsePattern(subdirDefaultPattern)
	}
	return err
}

// setNFSSubdirDirectory reads the claim's k8s-sigs.io/nfs-directory-*
// annotations as nfs-subdir-external-provisioner v4.0.3 does: an empty or
// missing one is not set, a mode is octal up to 0777, a uid or gid a decimal
// up to 65535.
func (r *Request) setNFSSubdirDirectory() error {
	annotations := r.Claim.Annotations
	if text := annotations[AnnNFSDirectoryMode]; text != "" {
		mode, err := strconv.ParseInt(text, 8, 64)
		if err != nil || mode < 0 || mode > 0o777 {
			return fmt.Errorf("annotation %s: %q is not an octal mode between 0 and 0777", AnnNFSDirectoryMode, text)
		}
		fileMode := fs.FileMode(mode)
		r.Directory.Mode = &fileMode
	}
	for _, owner := range []struct {
		key string
		id  **int64
	}{{AnnNFSDirectoryUID, &r.Directory.UID}, {AnnNFSDirectoryGID, &r.Directory.GID}} {
		key, id := owner.key, owner.id
		text := annotations[key]
		if text == "" {
			continue
		}
		n, err := strconv.Atoi(text)
		if err != nil || n < 0 || n > nfsSubdirMaxID {
			return fmt.Errorf("annotation %s: %q is not a number between 0 and %d", key, text, nfsSubdirMaxID)
		}
		value := int64(n)
		*id = &value
	}
	return nil
}
