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

// Package nfsserver serves a host folder over NFSv3 on loopback, for tests
// and local runs that need a real NFS server without a kernel mount.
//
//	Start(ctx, Options{Dir, Path, Secure, RootSquash, Portmapper, NoAttributeChanges}) ──▶ *Server
//	    one TCP port answers MOUNT and NFS (github.com/willscott/go-nfs), and
//	    clients dial Addr() directly; with Portmapper, MOUNT also has a port
//	    of its own and a portmapper at PortmapperAddr() tells both, as with a
//	    kernel server (on a free port: 111 needs root)
//	Stop() ──▶ closes the listener and every connection, waits for them
//	Restart(ctx) ──▶ Stop, then serves the same Dir or Memory again on the
//	    same address (the portmapper on its own too, MOUNT on a new port),
//	    as a server that reboots: go-nfs forgets its handles, clients mount
//	    again
//	StartHostile(ctx, HostileOptions{Upstream, Answer, Record}) ──▶ *Hostile
//	    stands in front of a server (Upstream, e.g. a Server's Addr) and
//	    passes calls and replies on, except the calls its Answer takes
//	    over with whatever bytes it likes: huge lengths, endless listings,
//	    lying counts, trickles, floods; Record sees the replies passed on;
//	    WorstReplies.Answer takes turns with the worst of them;
//	    CreateScript.Answer scripts CREATE: EXCLUSIVE carried out as knfsd
//	    does (go-nfs answers NFS3ERR_NOTSUPP), replies lost after the file
//	    was made, files made and answered with NFS3ERR_IO;
//	    Faults{Upstream, Seed, Rate}.Answer fails a seeded share of the
//	    calls that change the file system: NFS3ERR_IO, NFS3ERR_NOSPC or
//	    NFS3ERR_ROFS answered for the server, or passed on and the reply
//	    dropped; Injected() counts them by kind;
//	    LoseReplies{Upstream, Procedures, Count}.Answer carries out the
//	    first Count calls of each of those procedures and loses their
//	    replies, for tests of calls sent again
//	StartSilent(ctx) ──▶ *Silent, a server that never answers
//
// What it serves: Dir through go-billy's bound osfs, which does not follow a
// symlink out of Dir on the host, so a link planted in the export cannot
// reach files outside it (an absolute link is read as a path under Dir).
// Remove and Rename act on a link itself, and CREATE and MKDIR fail on a
// link in the way rather than create its target, as knfsd does; SETATTR's
// chown, chmod and utimes (which the bound osfs lacks) resolve paths
// inside Dir the same way. With Options.Memory it serves a Memory instead: a
// tree in this process's memory, for trees deeper than the host's paths
// allow (the bound osfs fails past 4 KiB of path) or too big to write to
// disk quickly, which the test builds directly (Memory.MakeChain,
// Memory.MakeFiles), checks (Memory.Count), and has tell of an entry that
// vanished between READDIR and LOOKUP (Memory.ListVanished).
// FSSTAT answers the statfs figures of Dir (go-nfs alone answers
// 2^62 bytes). go-nfs answers NFS3ERR_IO where knfsd says NOTEMPTY, and
// NFS3ERR_ACCES where knfsd says EXIST for a file or link in the way of
// MKDIR or CREATE.
//
// With Options.NoAttributeChanges it serves a file system that cannot
// change modes, owners or times, as go-nfs servers over such file systems
// do: SETATTR of a mode answers NFS3ERR_NOTSUPP, and a CREATE carrying a
// mode makes the file, then answers NFS3ERR_IO.
//
// To mimic Linux knfsd it can be made to refuse clients whose source port is
// 1024 or above (Options.Secure: every call on such a connection is denied
// with AUTH_ERROR/AUTH_TOOWEAK, as knfsd's "secure" export does) and to
// squash root (Options.RootSquash: requests run as nobody, so changing a
// file's owner is refused with NFS3ERR_ACCES). go-nfs ignores the caller's
// credentials otherwise: files belong to the user running this process.
//
// Goroutines: one accepting connections per port, one per connection
// serving its calls (two with go-nfs's write serializer), and one per
// refused connection answering its calls; a Hostile server one accepting
// and one per connection (a CreateScript or a Faults starts none: it
// reaches the server on the goroutine of the call, as a LoseReplies does).
// Stop ends them all.
package nfsserver
