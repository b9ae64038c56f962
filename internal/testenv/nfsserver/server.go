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

// Nobody is the uid and gid root is squashed to, as knfsd's anonuid/anongid.
const Nobody = 65534

// Options say what to serve and how strict to be.
type Options struct {
	// Dir is the host folder served; it must exist.
	Dir string
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
}

// Server is a running NFSv3 server.
type Server struct {
	listener *trackingListener
	cancel   context.CancelFunc
	served   chan error
}

// Start serves opts.Dir until Stop. ctx bounds the server's life too.
func Start(ctx context.Context, opts Options) (*Server, error) {
	info, err := os.Stat(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("cannot serve %q: %w", opts.Dir, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("cannot serve %q: not a directory", opts.Dir)
	}
	address := opts.Address
	if address == "" {
		address = "127.0.0.1:0"
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", address)
	if err != nil {
		return nil, fmt.Errorf("cannot listen for NFS on %s: %w", address, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Server{
		listener: newTrackingListener(ln, opts.Secure),
		cancel:   cancel,
		served:   make(chan error, 1),
	}
	server := &nfs.Server{Handler: newHandler(opts), Context: ctx}
	go func() { s.served <- server.Serve(s.listener) }()
	return s, nil
}

// Addr is the host:port clients dial for both MOUNT and NFS.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Port is the TCP port of Addr.
func (s *Server) Port() int { return s.listener.Addr().(*net.TCPAddr).Port }

// Stop closes the listener and every connection and waits for the accept
// loop and the refused connections to end; the goroutines go-nfs runs per
// connection end as their connections close.
func (s *Server) Stop() error {
	s.cancel()
	err := s.listener.Close()
	s.listener.closeAll()
	serveErr := <-s.served
	if serveErr != nil && !errors.Is(serveErr, net.ErrClosed) {
		return fmt.Errorf("NFS server failed: %w", serveErr)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("cannot close the NFS listener: %w", err)
	}
	return nil
}

// handler exports one folder, with real free space and optional root squash.
type handler struct {
	nfs.Handler
	dir        string
	path       string
	rootSquash bool
}

func newHandler(opts Options) nfs.Handler {
	// Bound: the host's symlinks under Dir are never followed out of it.
	fs := linkSafeFS{Filesystem: osfs.New(opts.Dir, osfs.WithBoundOS()), dir: opts.Dir}
	path := opts.Path
	if path == "" {
		path = "/"
	}
	h := &handler{
		Handler:    nfshelper.NewNullAuthHandler(fs),
		dir:        opts.Dir,
		path:       path,
		rootSquash: opts.RootSquash,
	}
	return nfshelper.NewCachingHandler(h, handleLimit)
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
	change := boundChange{dir: h.dir}
	if h.rootSquash {
		return squashedChange{change}
	}
	return change
}

// FSStat answers the figures of the served folder's file system.
func (h *handler) FSStat(_ context.Context, _ billy.Filesystem, stat *nfs.FSStat) error {
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
