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
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
)

// classResult is what a class's parameters make of the claim team/data.
type classResult struct {
	Dir      string
	OnDelete backend.OnDeletePolicy
	NodePath string
}

func TestClassParameters(t *testing.T) {
	tests := map[string]struct {
		params  map[string]string
		want    classResult
		wantErr string
	}{
		"none: the configured pattern and policy": {want: classResult{Dir: "pvc-team-data"}},
		"our onDelete":                           {params: map[string]string{"onDelete": "Retain"}, want: classResult{Dir: "pvc-team-data", OnDelete: backend.OnDeleteRetain}},
		"our onDelete Archive":                   {params: map[string]string{"onDelete": "Archive", "pathPattern": nsPattern}, want: classResult{Dir: "team/data", OnDelete: backend.OnDeleteArchive}},
		"our onDelete keeps our naming":          {params: map[string]string{"onDelete": "Delete"}, want: classResult{Dir: "pvc-team-data", OnDelete: backend.OnDeleteDelete}},
		"onDelete in another case":               {params: map[string]string{"onDelete": "DELETE"}, wantErr: `parameter onDelete: "DELETE" is not one of Delete, Retain, Archive (or nfs-subdir-external-provisioner's delete, retain)`},
		"nfs-subdir archive is not lower case":   {params: map[string]string{"onDelete": "archive"}, wantErr: `"archive" is not one of`},
		"nfs-subdir delete":                      {params: map[string]string{"onDelete": "delete"}, want: classResult{Dir: "team-data-pvc-team-data", OnDelete: backend.OnDeleteDelete}},
		"nfs-subdir retain":                      {params: map[string]string{"onDelete": "retain"}, want: classResult{Dir: "team-data-pvc-team-data", OnDelete: backend.OnDeleteRetain}},
		"nfs-subdir archiveOnDelete true":        {params: map[string]string{"archiveOnDelete": "true"}, want: classResult{Dir: "team-data-pvc-team-data", OnDelete: backend.OnDeleteArchive}},
		"nfs-subdir archiveOnDelete false":       {params: map[string]string{"archiveOnDelete": "false"}, want: classResult{Dir: "team-data-pvc-team-data", OnDelete: backend.OnDeleteDelete}},
		"archiveOnDelete as strconv reads it":    {params: map[string]string{"archiveOnDelete": "F"}, want: classResult{Dir: "team-data-pvc-team-data", OnDelete: backend.OnDeleteDelete}},
		"archiveOnDelete not a boolean":          {params: map[string]string{"archiveOnDelete": "yes"}, wantErr: `StorageClass standard: parameter archiveOnDelete: strconv.ParseBool: parsing "yes"`},
		"onDelete wins over archiveOnDelete":     {params: map[string]string{"onDelete": "retain", "archiveOnDelete": "false"}, want: classResult{Dir: "team-data-pvc-team-data", OnDelete: backend.OnDeleteRetain}},
		"our onDelete wins over archiveOnDelete": {params: map[string]string{"onDelete": "Delete", "archiveOnDelete": "true"}, want: classResult{Dir: "team-data-pvc-team-data", OnDelete: backend.OnDeleteDelete}},
		"a ${} pattern alone archives": {
			params: map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.name}"},
			want:   classResult{Dir: "team/data", OnDelete: backend.OnDeleteArchive},
		},
		"a ${} pattern with onDelete": {
			params: map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.name}", "onDelete": "delete"},
			want:   classResult{Dir: "team/data", OnDelete: backend.OnDeleteDelete},
		},
		"a Go pattern is ours": {
			params: map[string]string{"pathPattern": "{{.PVC.Name}}"},
			want:   classResult{Dir: "data"},
		},
		"a Go pattern with archiveOnDelete": {
			params: map[string]string{"pathPattern": "{{.PVC.Name}}", "archiveOnDelete": "true"},
			want:   classResult{Dir: "data", OnDelete: backend.OnDeleteArchive},
		},
		"patterns mixed": {
			params:  map[string]string{"pathPattern": "${.PVC.namespace}/{{.PVC.Name}}"},
			wantErr: "StorageClass standard: parameter pathPattern: path pattern \"${.PVC.namespace}/{{.PVC.Name}}\" mixes ${...} keys (nfs-subdir-external-provisioner's syntax) and {{...}} actions (a Go template): use one syntax",
		},
		"local-path nodePath": {
			params: map[string]string{"nodePath": "/opt/local-path-provisioner/"},
			want:   classResult{Dir: "pvc-team-data", NodePath: "/opt/local-path-provisioner"},
		},
		"local-path nodePath relative": {params: map[string]string{"nodePath": "opt/x"}, wantErr: `parameter nodePath: "opt/x" is not an absolute path`},
		"local-path Go pattern": {
			params: map[string]string{"nodePath": "/opt/x", "pathPattern": "{{ .PVC.Namespace }}/{{ .PVC.Name }}"},
			want:   classResult{Dir: "team/data", NodePath: "/opt/x"},
		},
		"first error by name": {params: map[string]string{"uid": "x", "mode": "x"}, wantErr: "parameter mode"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req, err := ParseRequest(backendtest.Options(backendtest.Claim("team", "data", "1Gi"), backendtest.Class(tc.params)))
			checkErr(t, err, tc.wantErr)
			if err != nil {
				return
			}
			pattern := req.Pattern
			if pattern == nil {
				pattern, _ = ParsePattern("")
			}
			dir, err := pattern.Render(req.PVName, req.Claim)
			if err != nil {
				t.Fatal(err)
			}
			got := classResult{Dir: dir, OnDelete: req.OnDelete, NodePath: req.NodePath}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("class parameters mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubdirPattern(t *testing.T) {
	tests := map[string]struct {
		pattern     string
		labels      map[string]string
		annotations map[string]string
		want        string
		wantErr     string
	}{
		"namespace and name":        {pattern: "${.PVC.namespace}/${.PVC.name}", want: "team/data"},
		"literal around keys":       {pattern: "vols/${.PVC.namespace}-x", want: "vols/team-x"},
		"label":                     {pattern: "${.PVC.labels.app}/${.PVC.name}", labels: map[string]string{"app": "web"}, want: "web/data"},
		"label key with dots":       {pattern: "${.PVC.labels.app.kubernetes.io/name}", labels: map[string]string{"app.kubernetes.io/name": "db"}, want: "db"},
		"annotation with a slash":   {pattern: "${.PVC.annotations.example.com/dir}", annotations: map[string]string{"example.com/dir": "d"}, want: "d"},
		"missing label is dropped":  {pattern: "${.PVC.labels.tier}/${.PVC.name}", want: "data"},
		"nothing left: the default": {pattern: "${.PVC.labels.tier}", want: "team-data-pvc-uid"},
		"empty components dropped":  {pattern: "/a//${.PVC.name}/", want: "a/data"},
		"literal braces are text":   {pattern: "{a}/${.PVC.name}", want: "{a}/data"},
		"a brace before a key":      {pattern: "a{${.PVC.name}}", want: "a{data}"},
		"quotes in text":            {pattern: `"q"-${.PVC.name}`, want: `"q"-data`},
		"upper case key":            {pattern: "${.PVC.Namespace}", wantErr: "${.PVC.Namespace} is not one of"},
		"unknown key":               {pattern: "${.PVC.uid}", wantErr: "${.PVC.uid} is not one of"},
		"not a claim key":           {pattern: "${HOME}/x", wantErr: "${HOME} is not one of"},
		"empty label key":           {pattern: "${.PVC.labels.}", wantErr: "is not one of"},
		"unclosed":                  {pattern: "${.PVC.name", wantErr: "has no closing }"},
		"too long":                  {pattern: "${.PVC.name}" + strings.Repeat("a", 1024), wantErr: "more than 1024"},
		"label climbing out":        {pattern: "${.PVC.labels.dir}", labels: map[string]string{"dir": ".."}, wantErr: `".."`},
		"annotation absolute":       {pattern: "${.PVC.annotations.dir}/x", annotations: map[string]string{"dir": "/etc"}, want: "etc/x"},
		"reserved archive name":     {pattern: "archived-${.PVC.name}", wantErr: "reserved prefix"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pattern, err := ParseSubdirPattern(tc.pattern)
			var got string
			if err == nil {
				claim := backendtest.Claim("team", "data", "1Gi")
				claim.Labels, claim.Annotations = tc.labels, tc.annotations
				got, err = pattern.Render("pvc-uid", claim)
			}
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Render() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzSubdirPattern renders fuzzed patterns in nfs-subdir-external-provisioner's
// syntax over fuzzed claim metadata and fails on a directory CheckDir refuses.
func FuzzSubdirPattern(f *testing.F) {
	for _, seed := range [][3]string{
		{"${.PVC.namespace}/${.PVC.name}", "", ""},
		{"${.PVC.labels.dir}/x", "..", ""},
		{"${.PVC.annotations.dir}", "", "/etc/../x"},
		{"{${.PVC.name}}}{{", "", ""},
		{"${.PVC.labels.a\"b}", "a", ""},
		{"$${.PVC.name}${", "", ""},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, text, label, annotation string) {
		pattern, err := ParseSubdirPattern(text)
		if err != nil {
			return
		}
		claim := backendtest.Claim("team", "data", "1Gi")
		claim.Labels = map[string]string{"dir": label, "a\"b": label}
		claim.Annotations = map[string]string{"dir": annotation}
		dir, err := pattern.Render("pvc-uid", claim)
		if err != nil {
			return
		}
		if err := CheckDir(dir); err != nil {
			t.Fatalf("pattern %q rendered %q, which CheckDir refuses: %v", text, dir, err)
		}
	})
}

// TestDeleteAtByRecordedPolicy deletes volumes of a store configured to
// delete, each by the policy recorded on its PersistentVolume.
func TestDeleteAtByRecordedPolicy(t *testing.T) {
	tests := map[string]struct {
		onDelete   string
		wantRemain []string
		wantErr    string
	}{
		"none recorded: deleted":  {},
		"recorded Archive":        {onDelete: "Archive", wantRemain: []string{"archived-pvc-team-data-20260102T020405Z/", "archived-pvc-team-data-20260102T020405Z/file"}},
		"recorded Retain":         {onDelete: "Retain", wantRemain: []string{"pvc-team-data/", "pvc-team-data/file"}},
		"recorded nothing known":  {onDelete: "Shred", wantErr: `"Shred" is not one of`, wantRemain: []string{".pvc-team-data.provfleet-volume", "pvc-team-data/", "pvc-team-data/file"}},
		"recorded Delete as well": {onDelete: "Delete"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.OnDelete = backend.OnDeleteDelete })
			req := request(t, "team", "data", "1Gi", "")
			dir, err := dirOf(f.store.Create(t.Context(), req))
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			backendtest.WriteFile(t, filepath.Join(f.base, dir, "file"), "data")
			pv := volume(req.PVName, dir, "1Gi", testProvisioner)
			if tc.onDelete != "" {
				pv.Annotations[backend.AnnOnDelete] = tc.onDelete
			}
			err = f.store.DeleteAt(t.Context(), pv, dir)
			checkErr(t, err, tc.wantErr)
			remain := slices.DeleteFunc(backendtest.Tree(t, f.base), func(entry string) bool {
				return strings.HasPrefix(entry, JournalDir+"/")
			})
			if diff := cmp.Diff(tc.wantRemain, remain, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("tree after DeleteAt (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewPVRecordsOnDelete(t *testing.T) {
	claim := backendtest.Claim("team", "data", "1Gi")
	opts := backendtest.Options(claim, backendtest.Class(map[string]string{"archiveOnDelete": "true"}))
	req, err := ParseRequest(opts)
	if err != nil {
		t.Fatal(err)
	}
	pv := NewPV(opts, req, corev1.PersistentVolumeSource{})
	if diff := cmp.Diff(map[string]string{backend.AnnOnDelete: "Archive"}, pv.Annotations); diff != "" {
		t.Errorf("annotations mismatch (-want +got):\n%s", diff)
	}
}
