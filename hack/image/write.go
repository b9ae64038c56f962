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
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Written names what Write wrote.
type Written struct {
	// Layout is the OCI image layout: its index.json has one entry, the
	// image or the index, which `crane push` pushes as it is.
	Layout string
	// Tarballs holds one `docker load` tarball per GOARCH, in the images'
	// order: a Docker tarball has no room for an index.
	Tarballs []string
}

// Write writes a under dir, as dir/oci and dir/manager-linux-<arch>.tar,
// both naming the image tag; what an earlier Write left there is replaced.
func Write(a Artifact, dir string, tag name.Tag) (Written, error) {
	w := Written{Layout: filepath.Join(dir, "oci")}
	if err := clean(dir); err != nil {
		return Written{}, err
	}
	if err := writeLayout(a, w.Layout, tag); err != nil {
		return Written{}, err
	}
	for _, img := range a.Images {
		path := filepath.Join(dir, "manager-linux-"+img.Arch+".tar")
		if err := tarball.WriteToFile(path, tag, img.Image); err != nil {
			return Written{}, fmt.Errorf("cannot write %s: %w", path, err)
		}
		w.Tarballs = append(w.Tarballs, path)
	}
	return w, nil
}

// clean removes what an earlier Write left in dir, so no image of a GOARCH
// no longer asked for stays beside the new ones.
func clean(dir string) error {
	old, err := filepath.Glob(filepath.Join(dir, "manager-linux-*.tar"))
	if err != nil {
		return fmt.Errorf("cannot list the previous images: %w", err)
	}
	for _, path := range append(old, filepath.Join(dir, "oci")) {
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("cannot remove the previous image: %w", err)
		}
	}
	return nil
}

// writeLayout writes the OCI image layout of a into dir, its one entry
// annotated with the tag.
func writeLayout(a Artifact, dir string, tag name.Tag) error {
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("cannot start the image layout %s: %w", dir, err)
	}
	names := layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.TagStr()})
	if a.Index != nil {
		err = path.AppendIndex(a.Index, names)
	} else {
		err = path.AppendImage(a.Images[0].Image, names)
	}
	if err != nil {
		return fmt.Errorf("cannot write the image layout %s: %w", dir, err)
	}
	return nil
}
