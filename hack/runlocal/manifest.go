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

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// exampleHostPathRoot is the folder under which the hostPath example names
// its directory on a real node; the demo moves it onto each simulated node's
// disk.
const exampleHostPathRoot = "/var/lib/provfleet"

// backendEdit changes the backend of one kind in a manifest's documents.
type backendEdit struct {
	kind string // the field under spec.backend: nfs, hostPath
	// set changes the backend's fields in place.
	set func(backend map[string]any) error
}

// pointAt copies a manifest to dst with the server, port and path of every
// NFS backend in it set to exp's; the other objects are copied as they are.
func pointAt(src, dst string, exp export) (string, error) {
	return editManifest(src, dst, pointEdit(exp))
}

// pointEdit sets an NFS backend's server, port and path to exp's.
func pointEdit(exp export) backendEdit {
	return backendEdit{kind: "nfs", set: func(nfs map[string]any) error {
		nfs["server"], nfs["port"], nfs["path"] = exp.host, int64(exp.port), exp.path
		return nil
	}}
}

// spreadOver copies a manifest to dst with a nodePaths entry per node in
// every hostPath backend: since each simulated node's disk is another folder
// of this machine, node's base path is the backend's path moved from
// exampleHostPathRoot onto disks[node]. The other objects are copied as they
// are.
func spreadOver(src, dst string, disks map[string]string) (string, error) {
	return editManifest(src, dst, spreadEdit(disks))
}

// spreadEdit sets a hostPath backend's nodePaths to one entry per node of
// disks, in the order of the nodes' names.
func spreadEdit(disks map[string]string) backendEdit {
	return backendEdit{kind: "hostPath", set: func(hostPath map[string]any) error {
		path, _ := hostPath["path"].(string)
		rel, err := filepath.Rel(exampleHostPathRoot, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("the hostPath path %q does not lie under %s", path, exampleHostPathRoot)
		}
		nodePaths := make([]any, 0, len(disks))
		for _, node := range slices.Sorted(maps.Keys(disks)) {
			nodePaths = append(nodePaths, map[string]any{"nodes": []any{node}, "path": filepath.Join(disks[node], rel)})
		}
		hostPath["nodePaths"] = nodePaths
		return nil
	}}
}

// editManifest copies a manifest to dst with edit applied to every
// document that has its backend.
func editManifest(src, dst string, edit backendEdit) (string, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", src, err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("cannot read %s: %w", src, err)
		}
		if doc, err = editDocument(doc, edit); err != nil {
			return "", fmt.Errorf("cannot edit the %s backend of %s: %w", edit.kind, src, err)
		}
		docs = append(docs, doc)
	}
	if err := os.WriteFile(dst, bytes.Join(docs, []byte("---\n")), 0o644); err != nil {
		return "", fmt.Errorf("cannot write %s: %w", dst, err)
	}
	return dst, nil
}

// editDocument applies edit to doc's backend; a document without one is
// returned as it is.
func editDocument(doc []byte, edit backendEdit) ([]byte, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return nil, fmt.Errorf("cannot parse a document: %w", err)
	}
	field := []string{"spec", "backend", edit.kind}
	backend, found, err := unstructured.NestedMap(obj, field...)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", strings.Join(field, "."), err)
	}
	if !found {
		return doc, nil
	}
	if err := edit.set(backend); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedMap(obj, backend, field...); err != nil {
		return nil, fmt.Errorf("cannot set %s: %w", strings.Join(field, "."), err)
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot write a document: %w", err)
	}
	return out, nil
}

// moveClaims moves the PersistentVolumeClaims of the manifest at path into a
// manifest of their own at dst, so that they can be applied once their
// provisioners serve every node.
func moveClaims(path, dst string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", path, err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var rest, claims [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("cannot read %s: %w", path, err)
		}
		var obj struct{ Kind string }
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return fmt.Errorf("cannot parse a document of %s: %w", path, err)
		}
		if obj.Kind == "PersistentVolumeClaim" {
			claims = append(claims, doc)
		} else {
			rest = append(rest, doc)
		}
	}
	if err := os.WriteFile(path, bytes.Join(rest, []byte("---\n")), 0o644); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := os.WriteFile(dst, bytes.Join(claims, []byte("---\n")), 0o644); err != nil {
		return fmt.Errorf("cannot write %s: %w", dst, err)
	}
	return nil
}
