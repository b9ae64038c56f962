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
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// layoutEntry reads the one entry of the OCI layout at dir, as `crane push`
// does.
func layoutEntry(t *testing.T, dir string) (v1.Descriptor, v1.ImageIndex) {
	t.Helper()
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("the layout has %d entries, want 1: %+v", len(m.Manifests), m.Manifests)
	}
	return m.Manifests[0], root
}

// validateLayout checks that every blob of the OCI layout at dir hashes to
// what its descriptor says, and every layer to its diff ID.
func validateLayout(t *testing.T, dir string) {
	t.Helper()
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(root); err != nil {
		t.Fatalf("the layout does not hold together: %v", err)
	}
}

// layoutImages reads the images of the fixture's layout, by platform.
func layoutImages(t *testing.T) map[string]v1.Image {
	t.Helper()
	desc, root := layoutEntry(t, fixture.written.Layout)
	index, err := root.ImageIndex(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]v1.Image{}
	for _, d := range m.Manifests {
		img, err := index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		images[d.Platform.String()] = img
	}
	return images
}

// entrySummary is what the tests compare of a layout entry.
type entrySummary struct {
	MediaType   types.MediaType
	Digest      v1.Hash
	Annotations map[string]string
}

func TestLayoutHoldsAnIndexOfEveryArch(t *testing.T) {
	desc, _ := layoutEntry(t, fixture.written.Layout)
	digest, err := fixture.built.Index.Digest()
	if err != nil {
		t.Fatal(err)
	}
	want := entrySummary{types.OCIImageIndex, digest, map[string]string{"org.opencontainers.image.ref.name": "v0.0.0-test"}}
	if diff := cmp.Diff(want, entrySummary{desc.MediaType, desc.Digest, desc.Annotations}); diff != "" {
		t.Errorf("layout entry (-want +got):\n%s", diff)
	}
	wantPlatforms := map[string]string{}
	for _, arch := range fixture.archs {
		wantPlatforms["linux/"+arch] = "linux/" + arch
	}
	platforms := map[string]string{}
	for platform, img := range layoutImages(t) {
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		platforms[platform] = cfg.OS + "/" + cfg.Architecture
	}
	if diff := cmp.Diff(wantPlatforms, platforms); diff != "" {
		t.Errorf("index platform to config platform (-want +got):\n%s", diff)
	}
}

func TestConfig(t *testing.T) {
	for platform, img := range layoutImages(t) {
		t.Run(platform, func(t *testing.T) {
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			want := v1.Config{
				Entrypoint: []string{"/manager"},
				User:       "65532:65532",
				WorkingDir: "/",
				Labels: map[string]string{
					"org.opencontainers.image.title":    "provfleet-manager",
					"org.opencontainers.image.source":   "https://example.com/provfleet",
					"org.opencontainers.image.version":  "v0.0.0-test",
					"org.opencontainers.image.licenses": "Apache-2.0",
				},
			}
			if diff := cmp.Diff(want, cfg.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if !cfg.Created.Equal(fixture.spec.Created) {
				t.Errorf("created %v, want %v", cfg.Created, fixture.spec.Created)
			}
		})
	}
}

// file is what the tests compare of a tar entry.
type file struct {
	Type     byte
	Mode     int64
	UID, GID int
	Time     int64
	Contents []byte
}

// layerFiles reads the one layer of img by name.
func layerFiles(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	if mt, err := layers[0].MediaType(); err != nil || mt != types.OCILayer {
		t.Errorf("layer media type %q (%v), want %q", mt, err, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		contents, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = file{hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime.Unix(), contents}
	}
}

func TestLayerHoldsExactlyTheBinaryCertificatesAndUsers(t *testing.T) {
	certs, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatal(err)
	}
	images := layoutImages(t)
	for _, bin := range fixture.bins {
		t.Run(bin.Arch, func(t *testing.T) {
			manager, err := os.ReadFile(bin.Path)
			if err != nil {
				t.Fatal(err)
			}
			epoch := fixture.spec.Created.Unix()
			want := map[string]file{
				"etc/":                              {tar.TypeDir, 0o755, 0, 0, epoch, []byte{}},
				"etc/group":                         {tar.TypeReg, 0o644, 0, 0, epoch, []byte("root:x:0:\nnonroot:x:65532:\n")},
				"etc/passwd":                        {tar.TypeReg, 0o644, 0, 0, epoch, []byte("root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n")},
				"etc/ssl/":                          {tar.TypeDir, 0o755, 0, 0, epoch, []byte{}},
				"etc/ssl/certs/":                    {tar.TypeDir, 0o755, 0, 0, epoch, []byte{}},
				"etc/ssl/certs/ca-certificates.crt": {tar.TypeReg, 0o644, 0, 0, epoch, certs},
				"manager":                           {tar.TypeReg, 0o755, 0, 0, epoch, manager},
			}
			// Contents are compared by equality: a diff of a binary is unreadable.
			if diff := cmp.Diff(want, layerFiles(t, images["linux/"+bin.Arch]), cmp.Comparer(bytes.Equal)); diff != "" {
				t.Errorf("layer files (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBinaryInTheLayerRunsHelp(t *testing.T) {
	img, ok := layoutImages(t)["linux/"+runtime.GOARCH]
	if !ok {
		t.Fatalf("no image for linux/%s", runtime.GOARCH)
	}
	manager := layerFiles(t, img)["manager"]
	path := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(path, manager.Contents, os.FileMode(manager.Mode)); err != nil { //nolint:gosec // a tar header's mode bits fit
		t.Fatal(err)
	}
	out, err := exec.CommandContext(context.Background(), path, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("manager --help: %v\n%s", err, out)
	}
	for _, want := range []string{"Usage of manager:", "--host-path-root", "--leader-elect"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("manager --help prints no %q:\n%s", want, out)
		}
	}
}

func TestMissingCABundleIsNamed(t *testing.T) {
	spec := fixture.spec
	spec.CABundle = filepath.Join(t.TempDir(), "ca-certificates.crt")
	_, err := Assemble(fixture.bins[:1], spec)
	if err == nil {
		t.Fatal("Assemble without a CA bundle succeeded")
	}
	for _, want := range []string{spec.CABundle, "apt-get install ca-certificates"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
}
