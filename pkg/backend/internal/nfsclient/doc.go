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

// Package nfsclient talks NFSv3 over TCP to one export, in user space: no
// mount, no privilege. It offers what a directory store needs, with a
// store's semantics rather than a file system's.
//
//	New(Options{Server, Path, Port, UID, GID, SourcePort, Timeout}) ──▶ *Client
//	    talks to nobody yet: the first call connects and mounts
//	    Port 0: MOUNT and NFS ports from the portmapper (port 111, real servers);
//	    Port set: MOUNT and NFS both on it (go-nfs)
//	Dial(ctx, Options) ──▶ *Client, connected and mounted
//	Lstat, Mkdir, CreateFile, RewriteFile, WriteAt, ReadFile, ReadHead,
//	ReadDir, Rename, Remove, Chmod, Chown, FSStat ──▶ the server, by paths
//	relative to the export
//	Close: ends the connection, cutting a running call short
//
// Paths never follow symlinks: each element is looked up with LOOKUP, which
// does not follow them, and any element but the last must be a directory;
// a link or a file there fails with an error wrapping ErrNotDirectory. So a
// link planted on the export cannot send a create, rename or removal
// elsewhere. Paths are re-walked from the export's root on every call; no
// handle is cached but the root's.
//
// Errors: a server's status is a *StatusError, matching fs.ErrNotExist,
// fs.ErrExist and fs.ErrPermission (a chown refused under root_squash). A
// mode the server cannot or will not set (NFS3ERR_NOTSUPP, NFS3ERR_PERM or
// NFS3ERR_ACCES to a SETATTR of one) wraps backend.ErrModeRefused too.
// A call denied for its credentials is an *AuthError; from an unreserved
// source port (a "secure" export) its message says what to do: the pod
// sysctl net.ipv4.ip_unprivileged_port_start or the export's "insecure"
// option, and that neither port proves anything about the caller. The client connects from a reserved port (512-1023) when the
// process may bind one, else from any port.
//
// Durability: the calls by path WRITE FILE_SYNC, on the server's stable
// storage before it answers, and the procedures that change a directory
// are synchronous in NFSv3 (RFC 1813), so they need no COMMIT. WriteFileAt
// writes by handle UNSTABLE, for speed, and Commit makes it stable: the
// client keeps the server's write verifier of each file written and not
// committed (64 files at most), and a verifier that changed by the next
// write or the COMMIT (the server restarted, and may have lost the data)
// fails it with an error wrapping ErrWriteVerifierChanged: the caller
// writes the file again.
//
// Deadlines: every call takes a context; its deadline, or Options.Timeout
// when sooner, bounds the whole operation, connecting included, so a dead
// server fails calls instead of hanging them.
//
// Reconnection: a call that loses the connection fails; the next call
// connects again, and mounts again when the server no longer knows the
// root handle (NFS3ERR_STALE, as after a go-nfs restart), then retries
// once, since the server did not run it. Calls are not retried otherwise,
// as a create or rename may have happened, but for an EXCLUSIVE CREATE, and
// the calls of MkdirIn, CreateIn and Symlink, whose reply was lost: each is
// sent once more on a new connection, and an answer that the name is taken
// by what the first would have made (the file its verifier made, an empty
// file, an empty directory, a link to the same target) is success.
//
// Creates: CreateFile is safe to retry. Where the server supports it,
// CREATE is EXCLUSIVE with a verifier derived from the path, the data and
// the mode, so that the same file created again (the resent call, or a
// later call by any process) is answered with success for the file the
// first made while it is unwritten, and other content is refused as taken.
// go-nfs answers NFS3ERR_NOTSUPP to EXCLUSIVE; the client then creates
// GUARDED from that answer on, remembered for its life. Either way CREATE
// carries no attributes: one SETATTR sets the mode (and empties a file an
// earlier try made) before the data is written (after it, for a mode that
// does not let the owner write), so a server that cannot set
// a mode fails that call and says so, instead of making the file and
// failing the CREATE. A file made that cannot be filled is removed again
// while the server answers; one left by a lost connection is the caller's to
// meet as taken, and RewriteFile writes into it.
//
// Concurrency: a Client is safe for concurrent use. It holds one
// connection and runs one operation at a time; others wait for their turn
// until their context ends. It starts no goroutine.
//
// Bounds: a server is not trusted. A reply record is at most 256 KiB, its
// buffer grown only as bytes arrive; every length in it is checked against
// the bytes left and the protocol's limits (file handles 64 bytes, names
// 255, verifiers 400, READ data what was asked, link targets 4096) before anything is
// allocated, so reading a reply obeys the call's deadline and decoding it
// takes no longer. A record of more than 64 fragments, or more than 4
// replies to calls not made before the call's own, fail the call at once:
// a server flooding them would otherwise be read until the deadline. A listing fails when a READDIR page does not move it on
// (no entry, or a cookie already sent, short of its end) or when it passes
// 262,144 entries or 16 MiB of names; a listed name that is not one path
// element fails it too. ReadDirPage keeps at most the names it was asked
// for of a reply, whatever the reply holds, and the listing goes on from
// the last one it kept; it fails on a page that does not move on or on four
// pages in a row with no name. A server's FSINFO sizes are kept within 4
// to 64 KiB. A WRITE that says it wrote nothing or more than it
// was sent fails, a short one is sent the rest; a READ with more data than
// asked, or a count other than its data's, fails.
//
// Library: the protocol's types and the XDR encoder of calls come from
// github.com/willscott/go-nfs-client (over github.com/rasky/go-xdr); its
// decoder, RPC client and Target are not used. The decoder allocates
// whatever length a reply announces, up to 4 GiB, before reading it. The
// RPC client and Target take no context and retry a lost call for
// minutes, panic on a malformed reply or an RPC version mismatch, bind a
// reserved port only as uid 0, start a goroutine per Target that never
// ends, cache lookups, pass ".." in paths to the server and have no
// FSSTAT.
//
// Handles: Open walks a path once and returns a Handle; LookupIn,
// ReadNamesIn (a bounded part of a listing), RemoveIn and RenameIn act by
// a Handle and one name, so a walk over a deep tree costs one call per
// step rather than its depth, and acts on the directory it opened, as a
// descriptor does, whatever is renamed meanwhile. A copy of a tree reads
// and writes by handles too:
//
//	ReadDirPage(dir, cursor, limit) ──▶ names each with the cursor
//	    after it, next cursor, done: a
//	    listing resumed page by page (READDIR with its cookie and
//	    verifier); ErrCursorExpired when the server no longer honours
//	    the cursor, and the caller lists the directory again
//	LookupIn ──▶ Handle whose Attr tells the type (regular, directory,
//	    symlink, FIFO, device, socket), mode and size
//	ReadAt, Readlink ──▶ a file's data in READs of FSINFO's rtmax, a
//	    link's target as stored
//	MkdirIn, CreateIn, Symlink, WriteFileAt, Commit, SetMode ──▶ the
//	    copy, each new object's handle returned, a link's target stored
//	    as given and never resolved
package nfsclient
