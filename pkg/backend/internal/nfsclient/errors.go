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

package nfsclient

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/willscott/go-nfs-client/nfs"
)

// NFSv3 statuses (RFC 1813) this package tells apart.
const (
	statusOK        = nfs.NFS3Ok
	statusPerm      = nfs.NFS3ErrPerm
	statusNoEnt     = nfs.NFS3ErrNoEnt
	statusAccess    = nfs.NFS3ErrAcces
	statusExist     = nfs.NFS3ErrExist
	statusNotDir    = nfs.NFS3ErrNotDir
	statusNotEmpty  = nfs.NFS3ErrNotEmpty
	statusStale     = nfs.NFS3ErrStale
	statusBadHandle = nfs.NFS3ErrBadHandle
	statusNoSpace   = nfs.NFS3ErrNoSpc
	statusQuota     = nfs.NFS3ErrDQuot
	statusNotSupp   = nfs.NFS3ErrNotSupp
	statusBadCookie = nfs.NFS3ErrBadCookie
)

// ErrNotDirectory is what a path element that must be a directory and is
// something else (a symlink, a file) wraps: links are never followed.
var ErrNotDirectory = fmt.Errorf("not a directory, and links are not followed: %w", fs.ErrInvalid)

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("NFS client is closed")

// ErrCursorExpired is what a listing's page wraps when the server no
// longer honours its DirCursor (NFS3ERR_BAD_COOKIE, as when the directory
// changed since the listing began): the caller lists the directory again
// from its start.
var ErrCursorExpired = errors.New("the server no longer honours the listing's cursor")

// ErrWriteVerifierChanged is what a write or a Commit wraps when the
// server's write verifier changed since data was written UNSTABLE to the
// file: the server restarted and may have lost that data, so the caller
// writes the file again.
var ErrWriteVerifierChanged = errors.New("the server's write verifier changed: it may have lost data written before, write the file again")

// StatusError is an NFS or MOUNT procedure that the server answered with a
// status other than OK. errors.Is matches it against fs.ErrNotExist,
// fs.ErrExist, fs.ErrPermission (NFS3ERR_PERM and NFS3ERR_ACCES, what a
// refused chown under root_squash answers), syscall.ENOSPC and
// syscall.EDQUOT, as the errors of a local file system match, and
// NFS3ERR_BAD_COOKIE against ErrCursorExpired.
type StatusError struct {
	Op     string
	Path   string
	Status uint32
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("NFS %s %q: %s", e.Op, e.Path, statusName(e.Status))
}

func statusName(status uint32) string {
	// go-nfs-client names all but these, which it turns into os errors.
	switch status {
	case statusPerm:
		return "NFS3ERR_PERM"
	case statusNoEnt:
		return "NFS3ERR_NOENT"
	case statusExist:
		return "NFS3ERR_EXIST"
	}
	if err := nfs.NFS3Error(status); err != nil {
		var named *nfs.Error
		if errors.As(err, &named) {
			return named.ErrorString
		}
		return fmt.Sprintf("status %d (%v)", status, err)
	}
	return "OK"
}

// Is makes errors.Is(err, fs.ErrNotExist) and the like work.
func (e *StatusError) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Status == statusNoEnt
	case fs.ErrExist:
		return e.Status == statusExist || e.Status == statusNotEmpty
	case fs.ErrPermission:
		return e.Status == statusPerm || e.Status == statusAccess
	case ErrNotDirectory:
		return e.Status == statusNotDir
	case syscall.ENOSPC:
		return e.Status == statusNoSpace
	case syscall.EDQUOT:
		return e.Status == statusQuota
	case ErrCursorExpired:
		return e.Status == statusBadCookie
	}
	return false
}

// stale says the server no longer knows a file handle, as after a restart
// of a server whose handles do not persist.
func (e *StatusError) stale() bool {
	return e.Status == statusStale || e.Status == statusBadHandle
}

// Advice on a server that refuses unreserved source ports.
const securePortAdvice = "the server accepts only reserved source ports (below 1024, the \"secure\" export option): " +
	"let the process bind them with the pod sysctl net.ipv4.ip_unprivileged_port_start=%d " +
	"(allowed by the restricted Pod Security level), or add \"insecure\" to the export's options; " +
	"either way a source port proves nothing, as any pod may set that sysctl: only who can reach the server is a bound"

// AuthError is an RPC call the server denied for its credentials
// (AUTH_ERROR, RFC 5531). Knfsd answers AUTH_TOOWEAK to calls from an
// unreserved source port on a "secure" export.
type AuthError struct {
	Stat uint32
	// SourcePort is the local port of the refused connection.
	SourcePort int
}

// authStats names the reasons of AUTH_ERROR (RFC 5531).
var authStats = map[uint32]string{
	1: "AUTH_BADCRED", 2: "AUTH_REJECTEDCRED", 3: "AUTH_BADVERF", 4: "AUTH_REJECTEDVERF", 5: "AUTH_TOOWEAK",
}

func (e *AuthError) Error() string {
	name, ok := authStats[e.Stat]
	if !ok {
		name = fmt.Sprintf("auth error %d", e.Stat)
	}
	msg := "NFS server denied the call: " + name
	if e.SourcePort >= reservedPorts {
		// Not the port itself: the message must not change from call to
		// call, as it ends up in a status and its Events.
		msg += fmt.Sprintf(" from an unreserved source port (1024 or above); "+securePortAdvice, firstReservedPort)
	}
	return msg
}

// Is makes a denial match fs.ErrPermission.
func (e *AuthError) Is(target error) bool { return target == fs.ErrPermission }

// RPCError is a call the server did not run: an unknown program, version
// or procedure, undecodable arguments, or an RPC version mismatch.
type RPCError struct {
	AcceptStat uint32
	Mismatch   bool
}

func (e *RPCError) Error() string {
	if e.Mismatch {
		return "NFS server refused the call: RPC version mismatch"
	}
	return fmt.Sprintf("NFS server refused the call: accept status %d", e.AcceptStat)
}

// closedOnUnreserved explains a connection the server closed before
// answering, from an unreserved port: what some servers do for "secure".
func closedOnUnreserved(err error, sourcePort int) error {
	if sourcePort < reservedPorts {
		return err
	}
	return fmt.Errorf("%w; if "+securePortAdvice, err, firstReservedPort)
}
