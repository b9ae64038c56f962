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

// Package nfsfs is dirvol's Filesystem over NFSv3, through one
// nfsclient.Client: a directory store keeps its volume directories on an
// export with no mount.
//
//	New(client, export) ──▶ *FS, a dirvol.Filesystem
//	FS.OpenBase(ctx, root, base): root is the export path (as in
//	server:path, what the client mounted), base a slash-separated path
//	relative to it ("." for the export's root)
//	Dir, File ──▶ nfsclient calls by paths relative to the export
//
// A Dir is the client and a path: it holds no file handle, and every call
// walks the path again from the export's root with LOOKUP, which follows no
// symlink, so a link planted on the export (or a directory swapped for one)
// fails the call instead of sending it elsewhere. RemoveAll and CopyTo walk
// by file handles (dirvol.RemoveTree and dirvol.CopyTree over a treeDir):
// each opens its directories by their paths once, then every step is one
// or two procedures on a handle and one name, so a tree of any depth costs
// a bounded number of calls per entry, and a rename elsewhere cannot
// redirect it. ReadPage, OpenRead, Readlink and Symlink of a Dir walk its
// path once, then act by handle too.
//
// Durability: NFSv3 directory procedures (CREATE, MKDIR, SYMLINK, RENAME,
// REMOVE, RMDIR) commit to stable storage before the server answers (RFC
// 1813) and nfsclient writes the store's files with FILE_SYNC, so Dir.Sync
// and File.Sync have nothing left to do. A copy writes its files UNSTABLE,
// faster, and commits each (COMMIT) before it is closed or its mode or
// owner changes: a write verifier that changed meanwhile, a server that
// restarted and may have lost the data, fails the copy with
// nfsclient.ErrWriteVerifierChanged. An export with knfsd's "async" option breaks that promise on
// the server's side, as it does for every client.
//
// Creates: Dir.CreateFile hands the file's data to nfsclient.CreateFile,
// whose EXCLUSIVE CREATE tells a retry of the same file by its path, data
// and mode, so two stores creating one owner marker for different volumes
// never both succeed, and a retry of a record or marker whose reply was
// lost is answered for the file the first try made.
//
// Errors: an unreachable or failing server wraps backend.ErrUnavailable from
// OpenBase, and comes out of the other calls as nfsclient's error. The
// Filesystem starts no goroutine; it is as safe for concurrent use as its
// Client, each Dir for one goroutine at a time.
package nfsfs
