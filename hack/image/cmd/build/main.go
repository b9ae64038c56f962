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
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/provfleet/provfleet/hack/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// config is what the command line asks for.
type config struct {
	repo, out string
	archs     []string
	tag       name.Tag
	spec      image.Spec
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := parse(args, os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	bins, err := image.Binaries(ctx, cfg.repo, filepath.Join(cfg.out, "bin"), cfg.archs)
	if err != nil {
		return err
	}
	built, err := image.Assemble(bins, cfg.spec)
	if err != nil {
		return err
	}
	written, err := image.Write(built, cfg.out, cfg.tag)
	if err != nil {
		return err
	}
	return report(stdout, cfg.tag, built, written)
}

// parse reads the command line and SOURCE_DATE_EPOCH.
func parse(args []string, epoch string) (config, error) {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	repo := fs.String("repo", "", "The provfleet repository, whose cmd/manager is built. Required.")
	out := fs.String("out", "", "Folder for the binaries (bin/), the OCI image layout (oci/) and the docker tarballs. Empty: _output/image of the repository.")
	archs := fs.String("archs", runtime.GOARCH, "Comma-separated GOARCHes of linux to build for; several make an OCI image index.")
	repository := fs.String("repository", "provfleet/manager", "Image repository that the layout and the tarballs name, with -version as the tag.")
	version := fs.String("version", "dev", "The image's tag and org.opencontainers.image.version label.")
	source := fs.String("source", "https://github.com/provfleet/provfleet", "The org.opencontainers.image.source label.")
	caBundle := fs.String("ca-bundle", image.DefaultCABundle, "CA bundle copied into the image (Debian's ca-certificates package).")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if *repo == "" {
		return config{}, errors.New("-repo is required: the provfleet repository")
	}
	cfg := config{repo: *repo, out: *out, spec: image.Spec{Version: *version, Source: *source, CABundle: *caBundle}}
	if cfg.out == "" {
		cfg.out = filepath.Join(*repo, "_output", "image")
	}
	var err error
	if cfg.archs, err = image.ParseArchs(*archs); err != nil {
		return config{}, err
	}
	if cfg.tag, err = name.NewTag(*repository + ":" + *version); err != nil {
		return config{}, fmt.Errorf("cannot make an image tag of -repository and -version: %w", err)
	}
	if cfg.spec.Created, err = image.CreatedFromEpoch(epoch); err != nil {
		return config{}, err
	}
	return cfg, nil
}
