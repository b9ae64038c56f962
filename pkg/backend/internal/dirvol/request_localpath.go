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
	"strings"
	"unicode"

	storagev1 "k8s.io/api/storage/v1"

	"github.com/provfleet/provfleet/pkg/backend"
)

// The patterns local-path-provisioner (from v0.0.37 on) renders for its
// setup script as VOL_USER, VOL_GROUP and VOL_PERM: a class parameter, else
// the class annotation of the same name.
const (
	ParamUserPattern  = "userPattern"
	ParamGroupPattern = "groupPattern"
	ParamPermPattern  = "permPattern"
)

// maxRenderedValue bounds what a pattern renders: an id or a mode is a few
// bytes.
const maxRenderedValue = 64

// LocalPathPatterns says which lines of local-path-provisioner's setup
// script a backend applies.
type LocalPathPatterns struct {
	// Owner applies userPattern and groupPattern, as
	// chown "${VOL_USER}:${VOL_GROUP}" "$VOL_DIR" does.
	Owner bool
	// Mode applies permPattern, as chmod "${VOL_PERM}" "$VOL_DIR" does.
	Mode bool
}

// ApplyLocalPathPatterns sets the directory's owner and mode from the
// patterns of class that applied names, rendered for the request's claim as
// local-path-provisioner renders them; patterns not applied are ignored, as
// its stock setup script ignores them. An error says which pattern cannot be
// applied and what to do.
func (r *Request) ApplyLocalPathPatterns(class *storagev1.StorageClass, applied LocalPathPatterns) error {
	if class == nil {
		return nil
	}
	var err error
	if applied.Owner {
		err = r.applyOwnerPatterns(class)
	}
	if err == nil && applied.Mode {
		err = r.applyModePattern(class)
	}
	if err != nil {
		return fmt.Errorf("StorageClass %s: %w", class.Name, err)
	}
	return nil
}

// applyOwnerPatterns does what chown "${VOL_USER}:${VOL_GROUP}" does in
// local-path-provisioner's helper image, BusyBox: ":" is refused (unknown
// group), ":<group>" sets the group only, and "<user>:" sets the user and,
// as its group, the user's primary group in the image's /etc/passwd, or the
// number itself where the image lists no such user. The stock image's users
// each have the group of their own number but sync (4, group 100), so the
// group is taken to be the user's number.
func (r *Request) applyOwnerPatterns(class *storagev1.StorageClass) error {
	_, userSet := classPattern(class, ParamUserPattern)
	_, groupSet := classPattern(class, ParamGroupPattern)
	if (userSet || groupSet) && (r.Directory.UID != nil || r.Directory.GID != nil) {
		return fmt.Errorf("parameters %s or %s and %s or %s both set the owner: keep one", ParamUID, ParamGID, ParamUserPattern, ParamGroupPattern)
	}
	uid, err := r.renderID(class, ParamUserPattern)
	if err != nil {
		return err
	}
	gid, err := r.renderID(class, ParamGroupPattern)
	if err != nil {
		return err
	}
	switch {
	case uid == nil && gid == nil:
		return fmt.Errorf("%s and %s render nothing for this claim (or are not set), and local-path-provisioner's setup script "+
			"ran chown \":\", which BusyBox refuses: the claim failed there too; set either pattern on the class, or drop Owner from the "+
			"ProvisionerConfig's localPathPatterns", ParamUserPattern, ParamGroupPattern)
	case gid == nil:
		gid = uid
	}
	r.Directory.UID, r.Directory.GID = uid, gid
	return nil
}

// renderID renders the pattern key of class as a uid or gid; nil when the
// class sets none or it renders nothing.
func (r *Request) renderID(class *storagev1.StorageClass, key string) (*int64, error) {
	value, err := r.renderClassPattern(class, key)
	if err != nil || value == "" {
		return nil, err
	}
	if strings.IndexFunc(value, unicode.IsLetter) >= 0 {
		return nil, fmt.Errorf("%s renders %q, a name: only numeric ids are applied, since the node agent cannot read the user "+
			"database of local-path-provisioner's helper image; make the pattern render the number", key, value)
	}
	id, err := backend.ParseID(value)
	if err != nil {
		return nil, fmt.Errorf("%s renders %q: %w", key, value, err)
	}
	return &id, nil
}

// applyModePattern does what chmod "${VOL_PERM}" does in BusyBox: an octal
// mode sets the mode exactly, and nothing rendered changes nothing (its chmod
// takes "" as no change and succeeds).
func (r *Request) applyModePattern(class *storagev1.StorageClass) error {
	if _, set := classPattern(class, ParamPermPattern); set && r.Directory.Mode != nil {
		return fmt.Errorf("parameters %s and %s both set the mode: keep one", ParamMode, ParamPermPattern)
	}
	value, err := r.renderClassPattern(class, ParamPermPattern)
	if err != nil || value == "" {
		return err
	}
	mode, err := backend.ParseMode(value)
	if err != nil {
		return fmt.Errorf("%s renders %q: %w; symbolic modes are not applied", ParamPermPattern, value, err)
	}
	r.Directory.Mode = &mode
	return nil
}

// renderClassPattern renders the pattern key of class for the request's
// claim, its surrounding space trimmed; "" when the class sets none.
func (r *Request) renderClassPattern(class *storagev1.StorageClass, key string) (string, error) {
	text, set := classPattern(class, key)
	if !set {
		return "", nil
	}
	if len(text) > maxPatternLen {
		return "", fmt.Errorf("%s is %d bytes long, more than %d", key, len(text), maxPatternLen)
	}
	pattern, err := parseTemplate(key, text)
	if err != nil {
		return "", err
	}
	value, err := pattern.execute(r.PVName, r.Claim, maxRenderedValue)
	if err != nil {
		return "", fmt.Errorf("cannot render %s for this claim: %w; give the claim what the pattern reads", key, err)
	}
	return strings.TrimSpace(value), nil
}

// classPattern returns the pattern key of class: its parameter, else its
// annotation, as local-path-provisioner reads it; set is false where it
// has neither.
func classPattern(class *storagev1.StorageClass, key string) (text string, set bool) {
	if text, ok := class.Parameters[key]; ok {
		return text, true
	}
	text, ok := class.Annotations[key]
	return text, ok
}
