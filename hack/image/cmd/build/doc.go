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

// Command build builds the manager's container image (`make image`): the
// manager for each GOARCH of -archs, assembled with package image into an
// OCI image layout and one `docker load` tarball per GOARCH under -out, and
// prints the image's digests and sizes. The creation time comes from
// SOURCE_DATE_EPOCH (unset: 1970), so a rebuild of one tree gives the same
// digests.
package main
