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

package backend

// AnnAdoptedFrom records on a PersistentVolume whose directory was adopted
// (a claim made again given the directory its earlier volume retained) the
// name of that earlier PersistentVolume. Its release skips that volume when
// it looks for others using the directory: it handed the directory on.
const AnnAdoptedFrom = "provfleet.io/adopted-from"

// AnnAdoptedBy records on a retained PersistentVolume the name of the
// PersistentVolume that adopted its directory. It informs: the directory's
// owner marker, which names the new volume, is what keeps a release of the
// old one from touching it.
const AnnAdoptedBy = "provfleet.io/adopted-by"

// EventDirectoryAdopted is the reason of the Normal Event on a claim that
// was given the directory of a retained PersistentVolume.
const EventDirectoryAdopted = "DirectoryAdopted"
