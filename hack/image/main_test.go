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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// fixture is the image built once, from this repository, for the tests that
// read it: binaries, images and what Write wrote.
var fixture struct {
	repo    string
	archs   []string
	spec    Spec
	tag     name.Tag
	bins    []Binary
	built   Artifact
	written Written
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "image-test-")
	if err == nil {
		err = buildFixture(dir)
	}
	code := 1
	if err == nil {
		code = m.Run()
	} else {
		fmt.Fprintln(os.Stderr, err)
	}
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// buildFixture builds the manager for amd64, arm64 and this machine's GOARCH
// into dir and writes its image there.
func buildFixture(dir string) error {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	archs := []string{"amd64", "arm64", runtime.GOARCH}
	slices.Sort(archs)
	fixture.repo, fixture.archs = repo, slices.Compact(archs)
	fixture.spec = Spec{Version: "v0.0.0-test", Source: "https://example.com/provfleet", Created: time.Unix(1700000000, 0).UTC(), CABundle: DefaultCABundle}
	if fixture.tag, err = name.NewTag("provfleet/manager:v0.0.0-test"); err != nil {
		return err
	}
	if fixture.bins, err = Binaries(context.Background(), repo, filepath.Join(dir, "bin"), fixture.archs); err != nil {
		return err
	}
	if fixture.built, err = Assemble(fixture.bins, fixture.spec); err != nil {
		return err
	}
	fixture.written, err = Write(fixture.built, filepath.Join(dir, "out"), fixture.tag)
	return err
}
