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
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestTarballsHoldTheLayoutsImages(t *testing.T) {
	images := layoutImages(t)
	for i, img := range fixture.built.Images {
		t.Run(img.Arch, func(t *testing.T) {
			loaded, err := tarball.ImageFromPath(fixture.written.Tarballs[i], &fixture.tag)
			if err != nil {
				t.Fatal(err)
			}
			want, got := imageParts(t, images["linux/"+img.Arch]), imageParts(t, loaded)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("tarball image against layout image (-want +got):\n%s", diff)
			}
		})
	}
}

// parts are the digests a Docker tarball keeps of an image: it rewrites the
// manifest, but keeps the config and the gzipped layers as they are.
type parts struct {
	Config v1.Hash
	Layers []v1.Hash
}

func imageParts(t *testing.T, img v1.Image) parts {
	t.Helper()
	config, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	p := parts{Config: config}
	for _, l := range layers {
		digest, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		p.Layers = append(p.Layers, digest)
	}
	return p
}

func TestPushAndPullByDigest(t *testing.T) {
	one, err := Assemble(fixture.bins[:1], fixture.spec)
	if err != nil {
		t.Fatal(err)
	}
	// Written over the fixture's images, so it also shows that Write
	// replaces what was there.
	dir := filepath.Join(t.TempDir(), "out")
	if _, err := Write(fixture.built, dir, fixture.tag); err != nil {
		t.Fatal(err)
	}
	written, err := Write(one, dir, fixture.tag)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{filepath.Join(dir, "manager-linux-"+fixture.bins[0].Arch+".tar")}, tarballsIn(t, dir)); diff != "" {
		t.Errorf("tarballs after writing one GOARCH over several (-want +got):\n%s", diff)
	}
	server := httptest.NewServer(registry.New(registry.Logger(log.New(t.Output(), "registry: ", 0))))
	t.Cleanup(server.Close)
	for name, tc := range map[string]struct {
		layout    string
		mediaType types.MediaType
	}{
		"index of every GOARCH": {fixture.written.Layout, types.OCIImageIndex},
		"one GOARCH":            {written.Layout, types.OCIManifestSchema1},
	} {
		t.Run(name, func(t *testing.T) {
			validateLayout(t, tc.layout)
			desc, root := layoutEntry(t, tc.layout)
			if desc.MediaType != tc.mediaType {
				t.Errorf("layout entry media type %q, want %q", desc.MediaType, tc.mediaType)
			}
			ref := registryTag(t, server, strings.ReplaceAll(name, " ", "-"))
			push(t, root, desc, ref)
			if pulled := pull(t, ref.Context().Digest(desc.Digest.String()), desc.MediaType); pulled != desc.Digest {
				t.Errorf("pulled %s by digest, want %s", pulled, desc.Digest)
			}
		})
	}
}

// tarballsIn lists the docker tarballs in dir.
func tarballsIn(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// registryTag names provfleet/manager:tag in the registry behind server.
func registryTag(t *testing.T, server *httptest.Server, tag string) name.Tag {
	t.Helper()
	ref, err := name.NewTag(strings.TrimPrefix(server.URL, "http://") + "/provfleet/manager:" + tag)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// push writes the layout entry desc of root to ref, as `crane push` does.
func push(t *testing.T, root v1.ImageIndex, desc v1.Descriptor, ref name.Tag) {
	t.Helper()
	ctx := remote.WithContext(context.Background())
	if desc.MediaType.IsIndex() {
		index, err := root.ImageIndex(desc.Digest)
		if err == nil {
			err = remote.WriteIndex(ref, index, ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	img, err := root.Image(desc.Digest)
	if err == nil {
		err = remote.Write(ref, img, ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// pull reads ref back from the registry and returns the digest of what it
// holds, recomputed from the bytes pulled.
func pull(t *testing.T, ref name.Digest, mediaType types.MediaType) v1.Hash {
	t.Helper()
	got, err := remote.Get(ref, remote.WithContext(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	if got.MediaType != mediaType {
		t.Errorf("pulled media type %q, want %q", got.MediaType, mediaType)
	}
	var digest v1.Hash
	if mediaType.IsIndex() {
		index, err := got.ImageIndex()
		if err == nil {
			digest, err = index.Digest()
		}
		if err != nil {
			t.Fatal(err)
		}
		return digest
	}
	img, err := got.Image()
	if err == nil {
		digest, err = img.Digest()
	}
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

func TestRebuildIsIdentical(t *testing.T) {
	dir := t.TempDir()
	bins, err := Binaries(context.Background(), fixture.repo, filepath.Join(dir, "bin"), fixture.archs)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Assemble(bins, fixture.spec)
	if err != nil {
		t.Fatal(err)
	}
	written, err := Write(again, filepath.Join(dir, "out"), fixture.tag)
	if err != nil {
		t.Fatal(err)
	}
	want, err := fixture.built.Index.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.Index.Digest(); err != nil || got != want {
		t.Errorf("rebuilt index digest %s (%v), want %s", got, err, want)
	}
	for i, path := range written.Tarballs {
		if !sameFile(t, path, fixture.written.Tarballs[i]) {
			t.Errorf("%s differs from the first build's", filepath.Base(path))
		}
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x, y)
}
