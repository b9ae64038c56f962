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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
)

func TestRender(t *testing.T) {
	tests := map[string]struct {
		pattern     string
		labels      map[string]string
		annotations map[string]string
		want        string
		wantErr     string
	}{
		"default is the PV name":    {want: "pvc-uid"},
		"namespace and name":        {pattern: "{{.PVC.Namespace}}/{{.PVC.Name}}", want: "team/data"},
		"label":                     {pattern: "{{.PVC.Labels.app}}-{{.PVName}}", labels: map[string]string{"app": "web"}, want: "web-pvc-uid"},
		"annotation via index":      {pattern: `x/{{index .PVC.Annotations "example.com/dir"}}`, annotations: map[string]string{"example.com/dir": "d"}, want: "x/d"},
		"if else":                   {pattern: `{{if .PVC.Labels.tier}}{{.PVC.Labels.tier}}{{else}}default{{end}}/{{.PVName}}`, labels: map[string]string{"tier": ""}, want: "default/pvc-uid"},
		"with and eq":               {pattern: `{{with .PVC.Labels.tier}}{{if eq . "gold"}}g{{end}}{{end}}{{.PVName}}`, labels: map[string]string{"tier": "gold"}, want: "gpvc-uid"},
		"spaces inside a name":      {pattern: "{{.PVC.Labels.app}}", labels: map[string]string{"app": "my app"}, want: "my app"},
		"missing label":             {pattern: "{{.PVC.Labels.app}}", wantErr: `no entry for key "app"`},
		"unknown field":             {pattern: "{{.PVC.Spec}}", wantErr: "can't evaluate field Spec"},
		"index of missing is empty": {pattern: `{{index .PVC.Labels "app"}}`, wantErr: "path is empty"},
		"huge output":               {pattern: strings.Repeat("{{.PVC.Labels.app}}", 50), labels: map[string]string{"app": strings.Repeat("a", 100)}, wantErr: "longer than"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pattern, err := ParsePattern(tc.pattern)
			if err != nil {
				t.Fatalf("ParsePattern: %v", err)
			}
			claim := backendtest.Claim("team", "data", "1Gi")
			claim.Labels, claim.Annotations = tc.labels, tc.annotations
			got, err := pattern.Render("pvc-uid", claim)
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Render() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRenderRefusesHostileMetadata renders claim metadata, which namespace
// users write, into a pattern and expects every hostile value refused.
func TestRenderRefusesHostileMetadata(t *testing.T) {
	tests := map[string]struct {
		value   string
		wantErr string
	}{
		"empty":                  {value: "", wantErr: "empty"},
		"parent":                 {value: "..", wantErr: `".."`},
		"traversal":              {value: "../../etc", wantErr: `".."`},
		"traversal inside":       {value: "a/../../b", wantErr: `".."`},
		"dots inside a name":     {value: "a..b", wantErr: `".."`},
		"absolute":               {value: "/etc/passwd", wantErr: "absolute"},
		"current directory":      {value: ".", wantErr: "begins with a dot"},
		"current in the middle":  {value: "a/./b", wantErr: "begins with a dot"},
		"hidden":                 {value: ".ssh", wantErr: "begins with a dot"},
		"deleted volumes":        {value: trashDir + "/x", wantErr: "begins with a dot"},
		"snapshot folder":        {value: ".snapshot/x", wantErr: "begins with a dot"},
		"empty component":        {value: "a//b", wantErr: "empty component"},
		"trailing slash":         {value: "a/", wantErr: "empty component"},
		"newline":                {value: "a\nb", wantErr: "U+000A"},
		"nul":                    {value: "a\x00b", wantErr: "U+0000"},
		"delete character":       {value: "a\x7fb", wantErr: "U+007F"},
		"C1 control":             {value: "a\u0085b", wantErr: "U+0085"},
		"right-to-left override": {value: "a\u202eb", wantErr: "U+202E"},
		"invalid UTF-8":          {value: "a\xffb", wantErr: "UTF-8"},
		"backslash":              {value: `a\b`, wantErr: "backslash"},
		"leading space":          {value: " a", wantErr: "space"},
		"archive name":           {value: "archived-pvc-1-20260101T000000Z", wantErr: "reserved prefix"},
		"long component":         {value: strings.Repeat("a", 201), wantErr: "longer than 200"},
		"deep":                   {value: strings.Repeat("a/", 16) + "a", wantErr: "more than 16 components"},
		"too long":               {value: strings.Repeat("abcdefgh/", 120), wantErr: "longer than 1024"},
	}
	pattern, err := ParsePattern(`{{index .PVC.Annotations "dir"}}`)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := backendtest.Claim("team", "data", "1Gi")
			claim.Annotations = map[string]string{"dir": tc.value}
			got, err := pattern.Render("pvc-uid", claim)
			checkErr(t, err, tc.wantErr)
			if got != "" {
				t.Errorf("Render() = %q, want nothing", got)
			}
		})
	}
}

func TestParsePatternRefusals(t *testing.T) {
	tests := map[string]struct {
		pattern string
		wantErr string
	}{
		"syntax error":    {pattern: "{{.PVName", wantErr: "cannot parse"},
		"too long":        {pattern: strings.Repeat("a", 1025), wantErr: "more than 1024"},
		"range over int":  {pattern: "{{range 1000000000}}{{end}}x", wantErr: "not allowed"},
		"range over map":  {pattern: "{{range .PVC.Labels}}{{.}}{{end}}", wantErr: "not allowed"},
		"define":          {pattern: `{{define "a"}}x{{end}}{{template "a"}}`, wantErr: "may not define"},
		"recursion":       {pattern: `{{define "a"}}{{template "a"}}{{end}}`, wantErr: "may not define"},
		"block":           {pattern: `{{block "a" .}}x{{end}}`, wantErr: "may not define"},
		"variable":        {pattern: `{{$x := .PVName}}{{$x}}`, wantErr: "variables are not allowed"},
		"printf padding":  {pattern: `{{printf "%999999d" 1}}`, wantErr: `function "printf" is not allowed`},
		"nested escaping": {pattern: `{{js (js .PVName)}}`, wantErr: `function "js" is not allowed`},
		"in a condition":  {pattern: `{{if (print .PVName)}}x{{end}}`, wantErr: `function "print" is not allowed`},
		"in a with":       {pattern: `{{with .PVName}}{{html .}}{{end}}`, wantErr: `function "html" is not allowed`},
		"in an else":      {pattern: `{{if .PVName}}x{{else}}{{slice .PVName 1}}{{end}}`, wantErr: `function "slice" is not allowed`},
		"in a chain":      {pattern: `{{(urlquery .PVName).X}}`, wantErr: `function "urlquery" is not allowed`},
		"call":            {pattern: `{{call .PVName}}`, wantErr: `function "call" is not allowed`},
		// What the CRD's rules, reading the pattern as written, cannot see.
		"parent in a string constant": {pattern: `{{".."}}/{{.PVName}}`, wantErr: `renders ".." for every claim`},
		"parent across a comment":     {pattern: `{{.PVC.Namespace}}/.{{/* x */}}./{{.PVName}}`, wantErr: `renders ".." for every claim`},
		"parent of constants":         {pattern: `{{"."}}{{"."}}/{{.PVName}}`, wantErr: `renders ".." for every claim`},
		"parent after trimming":       {pattern: "x/. {{- \".\" -}} /{{.PVName}}", wantErr: `renders ".." for every claim`},
		"dots inside a fixed name":    {pattern: `{{.PVC.Namespace}}/v..{{.PVName}}`, wantErr: `renders ".." for every claim`},
		"absolute in a constant":      {pattern: `{{"/"}}{{.PVName}}`, wantErr: "renders an absolute path for every claim"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePattern(tc.pattern)
			checkErr(t, err, tc.wantErr)
		})
	}
}

// TestParsePatternKeepsDotsTheClaimMayChange accepts patterns whose dots or
// slashes are not, whatever the claim, a ".." or a leading "/".
func TestParsePatternKeepsDotsTheClaimMayChange(t *testing.T) {
	for _, pattern := range []string{
		`{{.PVC.Namespace}}/a.{{.PVName}}.b`,
		`{{.PVC.Namespace}}{{"/"}}{{.PVName}}`,
		`x/{{"y.z"}}/{{.PVName}}`,
		`{{if eq .PVC.Namespace ".."}}x{{else}}y{{end}}/{{.PVName}}`,
		`{{.PVC.Namespace}}.{{.PVName}}`,
	} {
		if _, err := ParsePattern(pattern); err != nil {
			t.Errorf("ParsePattern(%q): %v", pattern, err)
		}
	}
}

func TestRelDir(t *testing.T) {
	tests := map[string]struct {
		base    string
		path    string
		want    string
		wantErr string
	}{
		"below":            {base: "/vols", path: "/vols/a/b", want: "a/b"},
		"base with slash":  {base: "/vols/", path: "/vols/a", want: "a"},
		"root base":        {base: "/", path: "/a", want: "a"},
		"unclean inside":   {base: "/vols", path: "/vols/a/./b", want: "a/b"},
		"the base itself":  {base: "/vols", path: "/vols", wantErr: "not below"},
		"sibling prefix":   {base: "/vols", path: "/volsx/a", wantErr: "not below"},
		"outside":          {base: "/vols", path: "/etc", wantErr: "not below"},
		"climbing out":     {base: "/vols", path: "/vols/../etc", wantErr: "not below"},
		"relative":         {base: "/vols", path: "vols/a", wantErr: "not absolute"},
		"hidden component": {base: "/vols", path: "/vols/.x", wantErr: "begins with a dot"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := RelDir(tc.base, tc.path)
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("RelDir() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("got no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
}
