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
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// TestPointAt points the shipped NFS example at a loopback server: its
// backend names the server, port and path, and everything else is kept.
func TestPointAt(t *testing.T) {
	src := filepath.Join("..", "..", "examples", "nfs.yaml")
	dst := filepath.Join(t.TempDir(), "nfs.yaml")
	exp := export{host: "127.0.0.1", port: 40123, path: "/served"}
	if _, err := pointAt(src, dst, exp); err != nil {
		t.Fatal(err)
	}
	before, after := readDocuments(t, src), readDocuments(t, dst)
	if len(after) != len(before) {
		t.Fatalf("%d documents, want %d", len(after), len(before))
	}
	backends := 0
	for i, want := range before {
		nfs, ok := backendOf(want, "nfs")
		if ok {
			backends++
			nfs["server"], nfs["port"], nfs["path"] = exp.host, float64(exp.port), exp.path
		}
		if diff := cmp.Diff(want, after[i]); diff != "" {
			t.Errorf("document %d (-want +got):\n%s", i, diff)
		}
	}
	if backends != 1 {
		t.Errorf("the example holds %d NFS backends, want 1", backends)
	}
}

// TestSpreadOver spreads the shipped hostPath example over three disks: its
// backend gets a nodePaths entry per node, its directory moved onto that
// node's disk, and everything else is kept.
func TestSpreadOver(t *testing.T) {
	src := filepath.Join("..", "..", "examples", "hostpath.yaml")
	dst := filepath.Join(t.TempDir(), "hostpath.yaml")
	disks := map[string]string{"node-b": "/disks/b", "node-a": "/disks/a", "node-c": "/disks/c"}
	if _, err := spreadOver(src, dst, disks); err != nil {
		t.Fatal(err)
	}
	before, after := readDocuments(t, src), readDocuments(t, dst)
	if len(after) != len(before) {
		t.Fatalf("%d documents, want %d", len(after), len(before))
	}
	backends := 0
	for i, want := range before {
		if hostPath, ok := backendOf(want, "hostPath"); ok {
			backends++
			hostPath["nodePaths"] = []any{
				map[string]any{"nodes": []any{"node-a"}, "path": "/disks/a/fast-local"},
				map[string]any{"nodes": []any{"node-b"}, "path": "/disks/b/fast-local"},
				map[string]any{"nodes": []any{"node-c"}, "path": "/disks/c/fast-local"},
			}
		}
		if diff := cmp.Diff(want, after[i]); diff != "" {
			t.Errorf("document %d (-want +got):\n%s", i, diff)
		}
	}
	if backends != 1 {
		t.Errorf("the example holds %d hostPath backends, want 1", backends)
	}
}

// TestSpreadEdit refuses a hostPath backend whose path is not under the
// folder the demo moves.
func TestSpreadEdit(t *testing.T) {
	for name, tc := range map[string]struct {
		path    any
		wantErr bool
	}{
		"under the folder":  {path: "/var/lib/provfleet/x"},
		"the folder itself": {path: "/var/lib/provfleet"},
		"beside the folder": {path: "/var/lib/other/x", wantErr: true},
		"a prefix only":     {path: "/var/lib/provfleet-old/x", wantErr: true},
		"no path":           {path: nil, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			err := spreadEdit(map[string]string{"n": "/disk"}).set(map[string]any{"path": tc.path})
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Errorf("error %v, want one: %v", err, tc.wantErr)
			}
		})
	}
}

// TestEditDocument leaves a document without an NFS backend as it is, and
// refuses one whose backend is not an object.
func TestEditDocument(t *testing.T) {
	exp := export{host: "127.0.0.1", port: 2049, path: "/exports"}
	for name, tc := range map[string]struct {
		doc     string
		wantErr bool
	}{
		"comments only":     {doc: "# nothing here\n"},
		"another backend":   {doc: "kind: ProvisionerConfig\nspec:\n  backend:\n    hostPath:\n      path: /var/lib/x\n"},
		"a StorageClass":    {doc: "kind: StorageClass\nprovisioner: example.com/nfs\n"},
		"nfs not an object": {doc: "spec:\n  backend:\n    nfs: yes\n", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := editDocument([]byte(tc.doc), pointEdit(exp))
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if !tc.wantErr {
				if diff := cmp.Diff(tc.doc, string(got)); diff != "" {
					t.Errorf("the document changed (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// readDocuments parses every document of a multi-document YAML file.
func readDocuments(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []map[string]any
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		out = append(out, obj)
	}
}

// backendOf returns the spec.backend.<kind> object of a document.
func backendOf(obj map[string]any, kind string) (map[string]any, bool) {
	spec, _ := obj["spec"].(map[string]any)
	backend, _ := spec["backend"].(map[string]any)
	b, ok := backend[kind].(map[string]any)
	return b, ok
}

// TestMoveClaims moves the claims of the shipped hostPath example into a
// manifest of their own and keeps the other documents where they were.
func TestMoveClaims(t *testing.T) {
	src := filepath.Join("..", "..", "examples", "hostpath.yaml")
	dir := t.TempDir()
	path, claims := filepath.Join(dir, "hostpath.yaml"), filepath.Join(dir, "claims.yaml")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := moveClaims(path, claims); err != nil {
		t.Fatal(err)
	}
	var wantRest, wantClaims []map[string]any
	for _, doc := range readDocuments(t, src) {
		if doc["kind"] == "PersistentVolumeClaim" {
			wantClaims = append(wantClaims, doc)
		} else {
			wantRest = append(wantRest, doc)
		}
	}
	if len(wantClaims) < 2 {
		t.Errorf("the example holds %d claims, want several", len(wantClaims))
	}
	if diff := cmp.Diff(wantRest, readDocuments(t, path)); diff != "" {
		t.Errorf("the manifest (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantClaims, readDocuments(t, claims)); diff != "" {
		t.Errorf("the claims (-want +got):\n%s", diff)
	}
}
