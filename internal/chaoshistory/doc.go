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

// Package chaoshistory is the format of the history that the store fault
// layer (dirvol, built with the tag chaos) writes, for the chaos harness
// that reads it: the environment variables that turn the layer on, the
// kinds of fault it injects, one Entry per line of the file, and Read.
//
// Each line is a JSON object written with a single write(2) on a file
// opened O_APPEND, so the processes of a run may share one file: their
// lines never interleave, and a process killed loses at most the line it
// was writing. Read skips such a line: the last one cut short, or one cut
// short that another process's line follows on the same line.
//
// Nothing of it is in a build without the tag: only the layer imports it.
// It runs no goroutine.
package chaoshistory
