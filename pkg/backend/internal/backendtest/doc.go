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

// Package backendtest holds test helpers shared by the directory backends:
// claim builders, filesystem snapshots that prove nothing outside a base
// directory changed, the check of New's errors, checks of their record of
// unsaved volumes (Unsaved, Saved, Delete of unmarked directories) and of the
// mode and owner of new directories (CheckDirectory), run as one table per
// backend, and FuzzConfinement, the body of each backend's fuzz
// target.
package backendtest
