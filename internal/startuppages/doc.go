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

// Package startuppages gives back to the kernel the pages of the process's
// own executable that its start-up read and its steady work may never read
// again.
//
// A Go binary built on client-go runs the initialization of hundreds of
// packages and registers every API type at start. The pages of code and
// read-only data that touched stay mapped for the life of the process, and
// the kernel keeps mapped executable pages in memory in preference to
// others: in a node agent, which runs on every node of a cluster, they are
// about half of its resident memory. They are clean copies of the binary, so
// unmapping them loses nothing: a page used again is mapped again from the
// page cache, a minor fault.
//
// What comes in: nothing; Release reads /proc/self/smaps. What goes out: the
// read-only, private mappings of /proc/self/exe that hold no page of their
// own (a relocated, write-protected mapping has some and is left alone) are
// advised MADV_DONTNEED on Linux; elsewhere Release does nothing.
//
// No goroutines.
package startuppages
