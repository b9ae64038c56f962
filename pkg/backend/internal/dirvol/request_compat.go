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
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/provfleet/provfleet/pkg/backend"
)

// subdirKeyStart opens a key in nfs-subdir-external-provisioner's pattern
// syntax; a Go template action opens with templateStart.
const (
	subdirKeyStart = "${"
	templateStart  = "{{"
)

// subdirDefaultPattern names a directory as nfs-subdir-external-provisioner
// does when its class has no pathPattern, or one that renders to nothing.
const subdirDefaultPattern = "{{.PVC.Namespace}}-{{.PVC.Name}}-{{.PVName}}"

// parseOnDelete reads the onDelete parameter in either spelling: ours, or
// nfs-subdir-external-provisioner's lower-case delete and retain.
func parseOnDelete(value string) (backend.OnDeletePolicy, error) {
	switch value {
	case "Delete", "delete":
		return backend.OnDeleteDelete, nil
	case "Retain", "retain":
		return backend.OnDeleteRetain, nil
	case "Archive":
		return backend.OnDeleteArchive, nil
	}
	return "", fmt.Errorf("%q is not one of Delete, Retain, Archive (or nfs-subdir-external-provisioner's delete, retain)", value)
}

// IsSubdirPattern reports whether a path pattern is in
// nfs-subdir-external-provisioner's syntax: it holds "${". A Go template
// holds no "${" (a pattern holding both "${" and "{{" is refused).
func IsSubdirPattern(text string) bool {
	return strings.Contains(text, subdirKeyStart)
}

// IsSubdirClass reports whether a class's parameters are in
// nfs-subdir-external-provisioner's style: it sets archiveOnDelete, sets
// onDelete in that provisioner's lower case (delete, retain), or has a
// pathPattern in its syntax. Such a class gets that provisioner's defaults:
// volumes are archived unless onDelete or archiveOnDelete says otherwise,
// and directories without a pathPattern are named
// <namespace>-<claim>-<PV name>.
func IsSubdirClass(params map[string]string) bool {
	if _, ok := params[ParamArchiveOnDelete]; ok {
		return true
	}
	if onDelete := params[ParamOnDelete]; onDelete == "delete" || onDelete == "retain" {
		return true
	}
	return IsSubdirPattern(params[ParamPathPattern])
}

// setSubdirDefaults fills in, for a class in nfs-subdir-external-provisioner's
// style, the onDelete policy and path pattern that provisioner would use.
func (r *Request) setSubdirDefaults(params map[string]string) error {
	if r.OnDelete == "" {
		r.OnDelete = backend.OnDeleteArchive
		if value, ok := params[ParamArchiveOnDelete]; ok {
			archive, err := strconv.ParseBool(value)
			if err != nil {
				return fmt.Errorf("parameter %s: %w", ParamArchiveOnDelete, err)
			}
			if !archive {
				r.OnDelete = backend.OnDeleteDelete
			}
		}
	}
	if r.Pattern == nil {
		pattern, err := ParsePattern(subdirDefaultPattern)
		if err != nil {
			return fmt.Errorf("cannot parse the default path pattern: %w", err)
		}
		r.Pattern = pattern
	}
	return nil
}

// parseClassPattern parses a class's pathPattern in either syntax.
func parseClassPattern(text string) (*Pattern, error) {
	if !IsSubdirPattern(text) {
		return ParsePattern(text)
	}
	if strings.Contains(text, templateStart) {
		return nil, fmt.Errorf("path pattern %q mixes ${...} keys (nfs-subdir-external-provisioner's syntax) and {{...}} actions (a Go template): use one syntax", truncate(text))
	}
	return ParseSubdirPattern(text)
}

// ParseSubdirPattern parses a path pattern in nfs-subdir-external-provisioner's
// syntax: text with keys ${.PVC.namespace}, ${.PVC.name},
// ${.PVC.labels.<key>} and ${.PVC.annotations.<key>}, each up to the first
// "}". A label or annotation the claim lacks renders as nothing, empty
// components of the result are dropped, and a result with none left is the
// directory that provisioner names by default,
// <namespace>-<claim>-<PV name>. Other keys are refused, where that
// provisioner renders them as nothing or leaves them in the name.
func ParseSubdirPattern(text string) (*Pattern, error) {
	pattern, err := parseSubdirPatternOnly(text)
	if err != nil {
		return nil, err
	}
	if pattern.fallback, err = ParsePattern(subdirDefaultPattern); err != nil {
		return nil, fmt.Errorf("cannot parse the default path pattern: %w", err)
	}
	return pattern, nil
}

// errSubdirEmpty refuses a claim for which a pattern in
// nfs-subdir-external-provisioner's syntax renders nothing, where its
// releases before v4.0.3 give the claim the whole export.
var errSubdirEmpty = errors.New("the path pattern renders nothing for this claim, and nfs-subdir-external-provisioner " +
	"before v4.0.3 would give it the whole export, which is never done here: give the claim the labels or annotations the pattern names")

// parseSubdirPatternOnly is ParseSubdirPattern without a fallback: a claim
// for which the pattern renders nothing is refused.
func parseSubdirPatternOnly(text string) (*Pattern, error) {
	if len(text) > maxPatternLen {
		return nil, fmt.Errorf("path pattern is %d bytes long, more than %d", len(text), maxPatternLen)
	}
	tmpl, err := translateSubdir(text)
	if err != nil {
		return nil, fmt.Errorf("path pattern %q: %w", truncate(text), err)
	}
	pattern, err := parseTemplate(pathPatternName, tmpl)
	if err != nil {
		return nil, err
	}
	pattern.subdir = true
	return pattern, nil
}

// translateSubdir rewrites a pattern in nfs-subdir-external-provisioner's
// syntax as a Go template. Literal text becomes quoted string constants, so
// nothing in it can open an action.
func translateSubdir(text string) (string, error) {
	var out strings.Builder
	for text != "" {
		literal, rest, found := strings.Cut(text, subdirKeyStart)
		if literal != "" {
			out.WriteString(templateStart + strconv.Quote(literal) + "}}")
		}
		if !found {
			break
		}
		key, after, closed := strings.Cut(rest, "}")
		if !closed {
			return "", fmt.Errorf("${%s has no closing }", truncate(rest))
		}
		action, err := subdirAction(key)
		if err != nil {
			return "", err
		}
		out.WriteString(action)
		text = after
	}
	return out.String(), nil
}

var errSubdirKey = errors.New("is not one of ${.PVC.namespace}, ${.PVC.name}, ${.PVC.labels.<key>}, ${.PVC.annotations.<key>}")

// subdirAction is the Go template action for the key of ${key}.
func subdirAction(key string) (string, error) {
	field, ok := strings.CutPrefix(key, ".PVC.")
	if !ok {
		return "", fmt.Errorf("${%s} %w", key, errSubdirKey)
	}
	switch field {
	case "namespace":
		return "{{.PVC.Namespace}}", nil
	case "name":
		return "{{.PVC.Name}}", nil
	}
	for prefix, mapName := range map[string]string{"labels.": "Labels", "annotations.": "Annotations"} {
		if name, ok := strings.CutPrefix(field, prefix); ok && name != "" {
			return "{{index .PVC." + mapName + " " + strconv.Quote(name) + "}}", nil
		}
	}
	return "", fmt.Errorf("${%s} %w", key, errSubdirKey)
}

// parseNodePath reads local-path-provisioner's nodePath parameter.
func parseNodePath(value string) (string, error) {
	if !path.IsAbs(value) {
		return "", fmt.Errorf("%q is not an absolute path", value)
	}
	return path.Clean(value), nil
}

// NodePathIn returns which of bases, the folders the backend makes volumes
// in on the node with the default first, a request's volume goes in: the
// one its class's nodePath names, else the first. A nodePath that names
// none of them refuses the request, as local-path-provisioner refuses a path
// the node does not have.
func (r Request) NodePathIn(bases []string) (int, error) {
	if r.NodePath == "" {
		return 0, nil
	}
	for i, base := range bases {
		if r.NodePath == path.Clean(base) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("parameter %s: %q is none of this provisioner's paths on the node (%s): name one of them, "+
		"or add it to the node's additionalPaths", ParamNodePath, truncate(r.NodePath), strings.Join(bases, ", "))
}

// CheckNodeAffinityKey refuses a request whose class names a
// nodeAffinityKey other than key, the node label the backend pins volumes
// with: one ProvisionerConfig pins by one label.
func (r Request) CheckNodeAffinityKey(key string) error {
	if r.NodeAffinityKey == "" || r.NodeAffinityKey == key {
		return nil
	}
	return fmt.Errorf("parameter %s: %q is not the node label this provisioner pins volumes with, %q: "+
		"set hostPath.nodeAffinityKey of its ProvisionerConfig (one key per ProvisionerConfig)", ParamNodeAffinityKey, truncate(r.NodeAffinityKey), key)
}

// CheckNoNodePath refuses a request whose class names a nodePath or a
// nodeAffinityKey, for a backend that makes volumes on no node's file
// system.
func (r Request) CheckNoNodePath() error {
	key := ParamNodePath
	switch {
	case r.NodePath != "":
	case r.NodeAffinityKey != "":
		key = ParamNodeAffinityKey
	default:
		return nil
	}
	return fmt.Errorf("parameter %s is local-path-provisioner's, for volumes on a node; this backend takes none", key)
}
