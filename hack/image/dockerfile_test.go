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

package image

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// dockerStage is what the tests compare of the Dockerfile's final stage.
type dockerStage struct {
	Entrypoint []string
	User       string
	WorkingDir string
}

// dockerInstructions reads the Dockerfile at path as instructions (keyword
// upper-cased, arguments), continuation lines joined, comments dropped.
func dockerInstructions(t *testing.T, path string) [][2]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out [][2]string
	var line string
	s := bufio.NewScanner(f)
	for s.Scan() {
		text := strings.TrimSpace(s.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if line += text; strings.HasSuffix(line, "\\") {
			line = strings.TrimSuffix(line, "\\") + " "
			continue
		}
		keyword, args, _ := strings.Cut(line, " ")
		out = append(out, [2]string{strings.ToUpper(keyword), strings.TrimSpace(args)})
		line = ""
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// finalStage is what the last stage of the Dockerfile runs, and the Go
// version of the image its first stage builds with.
func finalStage(t *testing.T, path string) (dockerStage, string) {
	t.Helper()
	var stage dockerStage
	var golang string
	for _, in := range dockerInstructions(t, path) {
		switch in[0] {
		case "FROM":
			if golang == "" {
				image, _, _ := strings.Cut(strings.TrimPrefix(in[1], "--platform=$BUILDPLATFORM "), " ")
				golang = strings.TrimPrefix(image, "golang:")
			}
			stage = dockerStage{}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(in[1]), &stage.Entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s is not the exec form, which runs no shell: %v", in[1], err)
			}
		case "USER":
			stage.User = in[1]
		case "WORKDIR":
			stage.WorkingDir = in[1]
		}
	}
	return stage, golang
}

func TestDockerfileRunsLikeTheImage(t *testing.T) {
	stage, golang := finalStage(t, filepath.Join(fixture.repo, "Dockerfile"))
	cfg, err := layoutImages(t)["linux/"+runtime.GOARCH].ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := dockerStage{Entrypoint: cfg.Config.Entrypoint, User: cfg.Config.User, WorkingDir: cfg.Config.WorkingDir}
	if diff := cmp.Diff(want, stage); diff != "" {
		t.Errorf("Dockerfile's final stage against the built image (-want +got):\n%s", diff)
	}
	goVersion := moduleGoVersion(t, filepath.Join(fixture.repo, "go.mod"))
	if !strings.HasPrefix(goVersion, golang+".") {
		t.Errorf("the Dockerfile builds with golang:%s, go.mod asks for go %s", golang, goVersion)
	}
}

// moduleGoVersion is the go directive of the go.mod at path.
func moduleGoVersion(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if version, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return version
		}
	}
	t.Fatalf("%s has no go directive", path)
	return ""
}

func TestDockerfileParsing(t *testing.T) {
	for name, tc := range map[string]struct {
		dockerfile string
		want       dockerStage
		golang     string
	}{
		"last stage counts": {
			dockerfile: "FROM golang:1.26 AS build\nUSER 0\nENTRYPOINT [\"/bin/sh\"]\nFROM scratch\nUSER 65532:65532\nENTRYPOINT [\"/manager\"]\n",
			want:       dockerStage{Entrypoint: []string{"/manager"}, User: "65532:65532"},
			golang:     "1.26",
		},
		"continuations and comments": {
			dockerfile: "# build\nfrom --platform=$BUILDPLATFORM golang:1.27 as build\nFROM scratch\nLABEL a=b \\\n  c=d\n# run\nWORKDIR /\nENTRYPOINT [\"/manager\", \\\n  \"--v=2\"]\n",
			want:       dockerStage{Entrypoint: []string{"/manager", "--v=2"}, WorkingDir: "/"},
			golang:     "1.27",
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "Dockerfile")
			if err := os.WriteFile(path, []byte(tc.dockerfile), 0o644); err != nil {
				t.Fatal(err)
			}
			stage, golang := finalStage(t, path)
			if diff := cmp.Diff(tc.want, stage); diff != "" {
				t.Errorf("final stage (-want +got):\n%s", diff)
			}
			if golang != tc.golang {
				t.Errorf("golang %q, want %q", golang, tc.golang)
			}
		})
	}
}
