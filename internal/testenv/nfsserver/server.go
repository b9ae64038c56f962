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

package nfsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	billy "github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	nfs "github.com/willscott/go-nfs"
	nfshelper "github.com/willscott/go-nfs/helpers"
)

// handleLimit bounds go-nfs's file handle cache; tests never come near it.
const handleLimit = 4096

// verifierLimit bounds the listings go-nfs keeps for READDIR's later pages:
// each is a whole directory's, and a client reads one listing at a time.
const verifierLimit = 2

// memoryBytes is the size an export of a Memory tells in FSSTAT.
const memoryBytes = 1 << 40

// Nobody is the uid and gid root is squashed to, as knfsd's anonuid/anongid.
const Nobody = 65534

// Options say what to serve and how strict to be.
type Options struct {
	// Dir is the host folder served; it must exist, unless Memory is set.
	Dir string
	// Memory, when set, is served instead of Dir; RootSquash is refused
	// with it.
	Memory *Memory
	// Path is the export path clients mount; "/" when empty. Mounting any
	// other path fails with MNT3ERR_NOENT.
	Path string
	// Address to listen on; "127.0.0.1:0" (a free loopback port) when empty.
	Address string
	// Secure refuses calls from source ports 1024 and above, as knfsd's
	// default "secure" export option does.
	Secure bool
	// RootSquash runs requests as nobody, as knfsd's default "root_squash":
	// changing a file's owner is refused.
	RootSquash bool
	// Portmapper serves MOUNT on a port of its own, as kernel servers'
	// mountd, and a portmapper that tells clients the ports of MOUNT and
	// NFS, on a free loopback port (PortmapperAddr): the real port, 111,
	// needs root.
	Portmapper bool
	// NoAttributeChanges serves a file system that cannot change modes,
	// owners or times (no billy.Change), as some go-nfs servers do: go-nfs
	// answers NFS3ERR_NOTSUPP to a SETATTR that changes one, makes the file
	// that a CREATE carrying another mode asks for and then answers
	// NFS3ERR_IO, and makes a directory with MKDIR's mode less the umask.
	NoAttributeChanges bool
}

// Server is a running NFSv3 server.
type Server struct {
	opts     Options
	listener *trackingListener
	cancel   context.CancelFunc
	served   chan error
	// mountd and portmapper are nil without Options.Portmapper.
	mountd     *trackingListener
	portmapper *portmapper
	stopped    bool
}

// Start serves opts.Dir until Stop. ctx bounds the server's life too.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if err := checkServed(opts); err != nil {
		return nil, err
	}
	s := &Server{opts: opts}
	if err := s.start(ctx, opts.Address, ""); err != nil {
		return nil, err
	}
	return s, nil
}

// start listens for NFS on address and, with Options.Portmapper, for the
// portmapper on portmapperAddress; free loopback ports where they are
// empty.
func (s *Server) start(ctx context.Context, address, portmapperAddress string) error {
	if address == "" {
		address = "127.0.0.1:0"
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", address)
	if err != nil {
		return fmt.Errorf("cannot listen for NFS on %s: %w", address, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	s.listener, s.cancel, s.served = newTrackingListener(ln, s.opts.Secure), cancel, make(chan error, 2)
	s.mountd, s.portmapper, s.stopped = nil, nil, false
	handler := newHandler(s.opts)
	go func() { s.served <- (&nfs.Server{Handler: handler, Context: ctx}).Serve(s.listener) }()
	if s.opts.Portmapper {
		if err := s.startPortmapper(ctx, handler, portmapperAddress); err != nil {
			return errors.Join(err, s.Stop())
		}
	}
	return nil
}

// Restart stops the server and starts it again on the same address,
// serving the same Dir or Memory, as a server that reboots: connections
// end, and go-nfs forgets its file handles, so clients mount again (they
// see NFS3ERR_STALE). With Options.Portmapper the portmapper comes back on
// its address too and MOUNT on a new port, as a kernel's mountd does. The
// old server's connections left in TIME_WAIT do not hold the port: Go's
// listeners set SO_REUSEADDR. A port another process took meanwhile fails
// Restart, and leaves the server stopped. ctx bounds the new server's
// life. Not safe for use concurrently with the Server's other methods.
func (s *Server) Restart(ctx context.Context) error {
	address, portmapperAddress := s.Addr(), s.PortmapperAddr()
	if err := s.Stop(); err != nil {
		return fmt.Errorf("cannot stop the NFS server: %w", err)
	}
	if err := s.start(ctx, address, portmapperAddress); err != nil {
		return fmt.Errorf("cannot start the NFS server again: %w", err)
	}
	return nil
}

// checkServed checks that opts name something to serve.
func checkServed(opts Options) error {
	if opts.Memory != nil {
		if opts.RootSquash {
			return errors.New("cannot squash root on a Memory export: it keeps no owners to enforce")
		}
		return nil
	}
	info, err := os.Stat(opts.Dir)
	if err != nil {
		return fmt.Errorf("cannot serve %q: %w", opts.Dir, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("cannot serve %q: not a directory", opts.Dir)
	}
	return nil
}

// startPortmapper serves handler's MOUNT on a second port and starts the
// portmapper that tells it and the NFS port, on address unless it is
// empty.
func (s *Server) startPortmapper(ctx context.Context, handler nfs.Handler, address string) error {
	host, _, _ := net.SplitHostPort(s.Addr())
	free := net.JoinHostPort(host, "0")
	mountd, err := (&net.ListenConfig{}).Listen(ctx, "tcp", free)
	if err != nil {
		return fmt.Errorf("cannot listen for MOUNT: %w", err)
	}
	s.mountd = newTrackingListener(mountd, s.listener.secure)
	go func() { s.served <- (&nfs.Server{Handler: handler, Context: ctx}).Serve(s.mountd) }()
	if address == "" {
		address = free
	}
	pmap, err := (&net.ListenConfig{}).Listen(ctx, "tcp", address)
	if err != nil {
		return fmt.Errorf("cannot listen for the portmapper: %w", err)
	}
	s.portmapper = startPortmapper(pmap, map[uint32]uint32{
		mountProgram: uint32(s.mountd.Addr().(*net.TCPAddr).Port), //nolint:gosec // a TCP port
		nfsProgram:   uint32(s.Port()),                            //nolint:gosec // a TCP port
	})
	return nil
}

// PortmapperAddr is the host:port of the portmapper; empty without
// Options.Portmapper.
func (s *Server) PortmapperAddr() string {
	if s.portmapper == nil {
		return ""
	}
	return s.portmapper.listener.Addr().String()
}

// Addr is the host:port clients dial for both MOUNT and NFS.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Port is the TCP port of Addr.
func (s *Server) Port() int { return s.listener.Addr().(*net.TCPAddr).Port }

// Stop closes the listeners and every connection and waits for the accept
// loops and the refused connections to end; the goroutines go-nfs runs per
// connection end as their connections close. Stopping a stopped server does
// nothing.
func (s *Server) Stop() error {
	if s.stopped {
		return nil
	}
	s.stopped = true
	s.cancel()
	var errs []error
	listeners := []*trackingListener{s.listener}
	if s.mountd != nil {
		listeners = append(listeners, s.mountd)
	}
	for _, l := range listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("cannot close the NFS listener: %w", err))
		}
		l.closeAll()
	}
	for range listeners {
		if err := <-s.served; err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("NFS server failed: %w", err))
		}
	}
	if s.portmapper != nil {
		errs = append(errs, s.portmapper.stop())
	}
	return errors.Join(errs...)
}

// handler exports one folder, with real free space and optional root squash.
type handler struct {
	nfs.Handler
	memory     *Memory
	dir        string
	path       string
	rootSquash bool
	noChanges  bool
}

func newHandler(opts Options) nfs.Handler {
	// Bound: the host's symlinks under Dir are never followed out of it.
	var fs billy.Filesystem = linkSafeFS{Filesystem: osfs.New(opts.Dir, osfs.WithBoundOS()), dir: opts.Dir}
	if opts.Memory != nil {
		fs = opts.Memory
	}
	path := opts.Path
	if path == "" {
		path = "/"
	}
	h := &handler{
		Handler:    nfshelper.NewNullAuthHandler(fs),
		memory:     opts.Memory,
		dir:        opts.Dir,
		path:       path,
		rootSquash: opts.RootSquash,
		noChanges:  opts.NoAttributeChanges,
	}
	return nfshelper.NewCachingHandlerWithVerifierLimit(h, handleLimit, verifierLimit)
}

func (h *handler) Mount(ctx context.Context, conn net.Conn, req nfs.MountRequest) (nfs.MountStatus, billy.Filesystem, []nfs.AuthFlavor) {
	status, fs, flavors := h.Handler.Mount(ctx, conn, req)
	if string(req.Dirpath) != h.path {
		// go-nfs makes a handle of the file system even for a refusal.
		return nfs.MountStatusErrNoEnt, fs, nil
	}
	return status, fs, flavors
}

func (h *handler) Change(billy.Filesystem) billy.Change {
	switch {
	case h.noChanges:
		return nil
	case h.memory != nil:
		return h.memory
	}
	change := boundChange{dir: h.dir}
	if h.rootSquash {
		return squashedChange{change}
	}
	return change
}

// FSStat answers the figures of the served folder's file system.
func (h *handler) FSStat(_ context.Context, _ billy.Filesystem, stat *nfs.FSStat) error {
	if h.memory != nil {
		stat.TotalSize, stat.FreeSize, stat.AvailableSize = memoryBytes, memoryBytes, memoryBytes
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(h.dir, &st); err != nil {
		return fmt.Errorf("cannot statfs %q: %w", h.dir, err)
	}
	bsize := uint64(st.Bsize) //nolint:gosec // a block size is positive
	stat.TotalSize = st.Blocks * bsize
	stat.FreeSize = st.Bfree * bsize
	stat.AvailableSize = st.Bavail * bsize
	stat.TotalFiles = st.Files
	stat.FreeFiles = st.Ffree
	stat.AvailableFiles = st.Ffree
	return nil
}
