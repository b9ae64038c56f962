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

// Package backend holds what the built-in directory backends (hostpath, nfs)
// share with the code that configures them: the onDelete policies, the capacity
// budget, the runtime options and the error classes a caller maps to a
// ProvisionerConfig's Ready reason, and the index of PersistentVolumes by the
// paths they name, through which a backend finds the volumes a new directory
// would overlap without going through every volume.
package backend
