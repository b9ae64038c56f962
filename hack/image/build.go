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
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Binary is the manager built for one GOARCH of linux.
type Binary struct {
	Arch string
	Path string
}

// ParseArchs reads a comma-separated list of GOARCHes, such as "amd64,arm64",
// into a sorted list without repeats, so the index lists them in one order.
func ParseArchs(list string) ([]string, error) {
	var archs []string
	for arch := range strings.SplitSeq(list, ",") {
		arch = strings.TrimSpace(arch)
		if arch == "" || strings.ContainsAny(arch, "/ ") {
			return nil, fmt.Errorf("cannot read %q as a list of GOARCHes such as amd64,arm64", list)
		}
		archs = append(archs, arch)
	}
	slices.Sort(archs)
	return slices.Compact(archs), nil
}

// Binaries builds cmd/manager of the repository at repo for linux and each
// of archs into dir, as manager-linux-<arch>. The binaries are static
// (CGO_ENABLED=0), carry no build paths (-trimpath) and no symbol tables
// (-s -w: smaller, and a panic still prints its stack).
func Binaries(ctx context.Context, repo, dir string, archs []string) ([]Binary, error) {
	bins := make([]Binary, 0, len(archs))
	for _, arch := range archs {
		bin := Binary{Arch: arch, Path: filepath.Join(dir, "manager-linux-"+arch)}
		if err := goBuild(ctx, repo, bin); err != nil {
			return nil, err
		}
		bins = append(bins, bin)
	}
	return bins, nil
}

// goBuild builds bin from repo with the go command on PATH.
func goBuild(ctx context.Context, repo string, bin Binary) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin.Path, "./cmd/manager")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+bin.Arch)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cannot build cmd/manager for linux/%s in %s: %w\n%s", bin.Arch, repo, err, out.Bytes())
	}
	return nil
}
