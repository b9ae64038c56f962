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
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image runs, as whom, and where the layer puts things. The
// Dockerfile at the repository's root must say the same (a test checks).
const (
	binaryPath     = "/manager"
	caBundlePath   = "/etc/ssl/certs/ca-certificates.crt"
	nonrootUser    = "65532:65532"
	workingDir     = "/"
	passwdContents = "root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n" //nolint:gosec // user names, no password
	groupContents  = "root:x:0:\nnonroot:x:65532:\n"
)

// DefaultCABundle is where Debian's ca-certificates package writes the CA
// bundle on the build machine; the image has it at the same path, which Go's
// crypto/x509 reads first on linux.
const DefaultCABundle = caBundlePath

// entry is one file or directory of the layer, owned by root.
type entry struct {
	name     string // without the leading slash, directories end in one
	mode     int64
	contents []byte
}

// layerEntries lists the layer's entries in the order they are written, each
// directory before what it holds.
func layerEntries(binary, caBundle []byte) []entry {
	return []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, contents: []byte(groupContents)},
		{name: "etc/passwd", mode: 0o644, contents: []byte(passwdContents)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: caBundlePath[1:], mode: 0o644, contents: caBundle},
		{name: binaryPath[1:], mode: 0o755, contents: binary},
	}
}

// newLayer is the image's only layer: the binary at binaryPath, the CA
// bundle read from caBundle, /etc/passwd and /etc/group, every entry dated
// created. It is gzipped at the best level: it is written once and pulled
// on every node.
func newLayer(binary, caBundle string, created time.Time) (v1.Layer, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("cannot read the manager binary: %w", err)
	}
	certs, err := os.ReadFile(caBundle)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cannot find the CA bundle %s: install Debian's ca-certificates package (apt-get install ca-certificates) or name another bundle: %w", caBundle, err)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the CA bundle: %w", err)
	}
	raw, err := tarEntries(layerEntries(bin, certs), created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("cannot make the layer: %w", err)
	}
	return layer, nil
}

// tarEntries is the tar archive of entries, owned by root and dated created.
func tarEntries(entries []entry, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, ModTime: created}
		if e.name[len(e.name)-1] == '/' {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.contents))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("cannot write %s into the layer: %w", e.name, err)
		}
		if _, err := tw.Write(e.contents); err != nil {
			return nil, fmt.Errorf("cannot write %s into the layer: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("cannot close the layer: %w", err)
	}
	return buf.Bytes(), nil
}
