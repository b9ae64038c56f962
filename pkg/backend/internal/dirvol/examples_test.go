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
	"io"
	"os"
	"path/filepath"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
)

// examplesDir holds the manifests the project ships.
const examplesDir = "../../../../examples"

// clashingClaims are pairs of claims of different namespaces whose namespace
// and name, joined by a dash, read alike.
var clashingClaims = [][2][2]string{
	{{"team", "prod-db"}, {"team-prod", "db"}},
	{{"a-b", "c-d"}, {"a", "b-c-d"}},
}

// separatesNamespaces returns an error when the pattern renders two claims of
// clashingClaims to one directory: one namespace could then take the other's.
func separatesNamespaces(text string) error {
	pattern, err := ParsePattern(text)
	if err != nil {
		return err
	}
	for _, pair := range clashingClaims {
		var dirs [2]string
		for i, c := range pair {
			claim := backendtest.Claim(c[0], c[1], "1Gi")
			if dirs[i], err = pattern.Render("pvc-"+string(claim.UID), claim); err != nil {
				return err
			}
		}
		if dirs[0] == dirs[1] {
			return fmt.Errorf("claims %s/%s and %s/%s both render to %q", pair[0][0], pair[0][1], pair[1][0], pair[1][1], dirs[0])
		}
	}
	return nil
}

// shippedPatterns returns every pathPattern in the examples, by file.
func shippedPatterns(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	patterns := map[string][]string{}
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		decoder := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			var doc any
			err := decoder.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("cannot parse %s: %v", file, err)
			}
			patterns[filepath.Base(file)] = append(patterns[filepath.Base(file)], findPatterns(doc)...)
		}
		f.Close()
	}
	return patterns
}

// findPatterns collects the values of pathPattern keys at any depth, so
// ProvisionerConfigs and StorageClass parameters are both found.
func findPatterns(node any) []string {
	var found []string
	switch n := node.(type) {
	case map[string]any:
		for key, value := range n {
			if s, ok := value.(string); ok && key == "pathPattern" {
				found = append(found, s)
				continue
			}
			found = append(found, findPatterns(value)...)
		}
	case []any:
		for _, value := range n {
			found = append(found, findPatterns(value)...)
		}
	}
	return found
}

// TestShippedPatternsSeparateNamespaces: no path pattern the examples ship
// lets a claim of one namespace render to a directory of another's.
func TestShippedPatternsSeparateNamespaces(t *testing.T) {
	// The check itself must catch the dash-joined pattern.
	if err := separatesNamespaces("{{ .PVC.Namespace }}-{{ .PVC.Name }}"); err == nil {
		t.Fatal("a dash between namespace and name passed the check")
	}
	found := 0
	for file, patterns := range shippedPatterns(t) {
		for _, pattern := range patterns {
			found++
			if err := separatesNamespaces(pattern); err != nil {
				t.Errorf("%s: pathPattern %q: %v", file, pattern, err)
			}
		}
	}
	if found == 0 {
		t.Fatalf("no pathPattern found in %s", examplesDir)
	}
}
