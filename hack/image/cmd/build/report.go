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
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/provfleet/provfleet/hack/image"
)

// mib is a mebibyte, the unit sizes are printed in.
const mib = 1 << 20

// report prints what was built and where it was written.
func report(w io.Writer, tag name.Tag, built image.Artifact, written image.Written) error {
	if built.Index != nil {
		digest, err := built.Index.Digest()
		if err != nil {
			return fmt.Errorf("cannot compute the index digest: %w", err)
		}
		fmt.Fprintf(w, "%s@%s (OCI image index)\n", tag, digest)
	} else {
		fmt.Fprintf(w, "%s (OCI image)\n", tag)
	}
	for i, img := range built.Images {
		digest, err := img.Image.Digest()
		if err != nil {
			return fmt.Errorf("cannot compute the image digest: %w", err)
		}
		layers, err := img.Image.Layers()
		if err != nil {
			return fmt.Errorf("cannot list the image layers: %w", err)
		}
		size, err := layers[0].Size()
		if err != nil {
			return fmt.Errorf("cannot size the layer: %w", err)
		}
		tarball, err := os.Stat(written.Tarballs[i])
		if err != nil {
			return fmt.Errorf("cannot size the tarball: %w", err)
		}
		fmt.Fprintf(w, "  linux/%s %s: layer %.1f MiB gzipped; docker load -i %s (%.1f MiB)\n",
			img.Arch, digest, float64(size)/mib, written.Tarballs[i], float64(tarball.Size())/mib)
	}
	fmt.Fprintf(w, "OCI image layout %s, named %s: crane push %s REGISTRY/%s\n",
		written.Layout, tag, written.Layout, tag.RepositoryStr()+":"+tag.TagStr())
	return nil
}
