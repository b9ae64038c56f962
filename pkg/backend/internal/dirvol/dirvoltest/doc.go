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

// Package dirvoltest holds the contract that every implementation of
// dirvol.Filesystem and dirvol.Dir must keep: TestFilesystem plants a tree of
// files, directories and symlinks pointing out of the base on the host, has
// the implementation serve it, and checks each operation's result, the base's
// tree after it, and that nothing outside the base changed. TestRelease
// checks dirvol.Store.Release on a Store over the implementation. It is test
// support: it comes in as a function serving a host directory, goes out as
// subtests, and runs on the test's goroutine.
package dirvoltest
