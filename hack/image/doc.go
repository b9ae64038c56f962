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

// Package image builds the manager's container image without a container
// engine and without a base image: a static linux binary of cmd/manager per
// GOARCH (go build, CGO_ENABLED=0, -trimpath), one layer holding that binary,
// the build machine's CA bundle and an /etc/passwd and /etc/group naming the
// non-root user 65532 (nonroot), and an OCI config that runs the binary as
// that user.
//
// In: the repository, the GOARCHes, a Spec (version, source URL, creation
// time, CA bundle path). Out: v1.Image values, one per GOARCH, and a
// v1.ImageIndex of them when there are several, written as an OCI image
// layout (what `crane push DIR REF` takes) and as one `docker load` tarball
// per GOARCH. Times in the layer and the config come from the Spec, so the
// same tree and CA bundle give the same digests.
//
// Binaries runs `go build` as child processes, one at a time; nothing else
// starts goroutines of its own.
package image
