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
	"fmt"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec is what the image says about itself beside its binary.
type Spec struct {
	// Version is org.opencontainers.image.version.
	Version string
	// Source is org.opencontainers.image.source, the repository's URL.
	Source string
	// Created dates the config and every file of the layer.
	Created time.Time
	// CABundle is the path of the CA bundle to copy into the image.
	CABundle string
}

// Artifact is the built image: one image per binary, in the binaries'
// order, and their index when there are several.
type Artifact struct {
	Images []ArchImage
	Index  v1.ImageIndex
}

// ArchImage is the image for one GOARCH of linux.
type ArchImage struct {
	Arch  string
	Image v1.Image
}

// CreatedFromEpoch reads SOURCE_DATE_EPOCH (seconds since 1970, UTC); empty
// is the epoch itself, so that builds of one tree agree by default.
func CreatedFromEpoch(epoch string) (time.Time, error) {
	if epoch == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("cannot read SOURCE_DATE_EPOCH %q as seconds since 1970: %w", epoch, err)
	}
	return time.Unix(secs, 0).UTC(), nil
}

// Assemble makes the image of each binary, and an OCI image index of them
// when there are several.
func Assemble(bins []Binary, spec Spec) (Artifact, error) {
	var a Artifact
	adds := make([]mutate.IndexAddendum, 0, len(bins))
	for _, bin := range bins {
		img, err := newImage(bin, spec)
		if err != nil {
			return Artifact{}, err
		}
		a.Images = append(a.Images, ArchImage{Arch: bin.Arch, Image: img})
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: bin.Arch},
		}})
	}
	if len(bins) > 1 {
		a.Index = mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	}
	return a, nil
}

// newImage is the OCI image of bin: its one layer, run as nonroot.
func newImage(bin Binary, spec Spec) (v1.Image, error) {
	layer, err := newLayer(bin.Path, spec.CABundle, spec.Created)
	if err != nil {
		return nil, fmt.Errorf("cannot make the image for linux/%s: %w", bin.Arch, err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	base, err = mutate.ConfigFile(base, configFile(bin.Arch, spec))
	if err != nil {
		return nil, fmt.Errorf("cannot set the config for linux/%s: %w", bin.Arch, err)
	}
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: spec.Created},
		CreatedBy: "hack/image: " + binaryPath + ", CA bundle, /etc/passwd, /etc/group",
	}})
	if err != nil {
		return nil, fmt.Errorf("cannot add the layer for linux/%s: %w", bin.Arch, err)
	}
	return img, nil
}

// configFile is the config of the image for arch, before its layer is added.
func configFile(arch string, spec Spec) *v1.ConfigFile {
	return &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: spec.Created},
		Config: v1.Config{
			Entrypoint: []string{binaryPath},
			User:       nonrootUser,
			WorkingDir: workingDir,
			Labels: map[string]string{
				"org.opencontainers.image.title":    "provfleet-manager",
				"org.opencontainers.image.source":   spec.Source,
				"org.opencontainers.image.version":  spec.Version,
				"org.opencontainers.image.licenses": "Apache-2.0",
			},
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
}
