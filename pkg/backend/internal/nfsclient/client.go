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
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
	"k8s.io/klog/v2"
)

// SourcePort says which local ports the client connects from.
type SourcePort int

const (
	// ReservedFirst tries a reserved port (below 1024) and falls back to
	// an unreserved one when the process may not bind it.
	ReservedFirst SourcePort = iota
	// Unreserved connects from any port, for exports marked "insecure".
	Unreserved
)

// PortmapperPort is where real NFS servers answer which ports MOUNT and
// NFS listen on.
const PortmapperPort = 111

// Options say which export to reach and how.
type Options struct {
	// Server is the host name or address of the NFS server.
	Server string
	// Path is the exported path, as in server:path.
	Path string
	// Port, when set, is the one port serving both MOUNT and NFS (as
	// go-nfs does); when 0 both are found through the portmapper.
	Port int
	// UID and GID are the AUTH_UNIX credentials of every call; 0 and 0 (a
	// root client, which root_squash maps to nobody) when unset.
	UID, GID uint32
	// MachineName is sent in the credentials; "provfleet" when empty.
	MachineName string
	// SourcePort chooses the local ports; ReservedFirst when unset.
	SourcePort SourcePort
	// Timeout bounds every operation whose context has no earlier
	// deadline, so a server that stops answering cannot hang a caller;
	// DefaultTimeout when 0.
	Timeout time.Duration
}

// DefaultTimeout bounds an operation when Options.Timeout is not set.
const DefaultTimeout = 30 * time.Second

// Client talks NFSv3 over TCP to one export. It is safe for concurrent
// use: calls are serialized on its one connection, each waiting for the
// previous one at most until its context ends.
type Client struct {
	opts    Options
	auth    rpc.Auth
	mntAddr string
	nfsAddr string
	// portmapper is the portmapper's address when Options.Port is 0: port
	// 111 of the server (tests point it elsewhere).
	portmapper string
	// turn is held by the call that owns conn and root.
	turn chan struct{}
	conn *transport
	root []byte
	done bool
	// answered counts calls the server ran, to tell whether an operation
	// that met a stale handle changed anything.
	answered int
	// guardedOnly is set once the server answered NFS3ERR_NOTSUPP to an
	// EXCLUSIVE CREATE (go-nfs does), so it is not asked again.
	guardedOnly bool
	// sizes are the server's READ and WRITE sizes, from FSINFO once.
	sizes transferSizes
	// uncommitted holds the write verifier of each file written UNSTABLE
	// and not committed yet, by handle.
	uncommitted map[string]writeVerifier
	// closing ends with Close, cutting short the call that runs.
	closing context.Context
	close   context.CancelFunc
}

// New returns a Client of the export that has not talked to the server
// yet: its first call connects and mounts, so a server that is down now
// fails calls until it is back, and New never waits for it.
func New(opts Options) *Client {
	if opts.MachineName == "" {
		opts.MachineName = "provfleet"
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	c := &Client{
		opts: opts,
		auth: rpc.NewAuthUnix(opts.MachineName, opts.UID, opts.GID).Auth(),
		turn: make(chan struct{}, 1),
	}
	c.closing, c.close = context.WithCancel(context.Background())
	c.portmapper = net.JoinHostPort(opts.Server, strconv.Itoa(PortmapperPort))
	if opts.Port != 0 {
		c.mntAddr = net.JoinHostPort(opts.Server, strconv.Itoa(opts.Port))
		c.nfsAddr = c.mntAddr
	}
	return c
}

// Dial returns a Client of the export that has resolved its ports and
// mounted it. Later calls reconnect and remount by themselves after the
// server went away.
func Dial(ctx context.Context, opts Options) (*Client, error) {
	c := New(opts)
	if err := c.do(ctx, func(context.Context) error { return nil }); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// resolvePorts asks the portmapper for the ports of MOUNT and NFS, again
// on every reconnection: mountd's port changes when the server restarts.
func (c *Client) resolvePorts(ctx context.Context) error {
	pmap, err := dial(ctx, c.portmapper, Unreserved)
	if err != nil {
		return fmt.Errorf("cannot reach the portmapper: %w", err)
	}
	defer pmap.close()
	for _, svc := range []struct {
		prog uint32
		addr *string
	}{{nfs.MountProg, &c.mntAddr}, {nfs.Nfs3Prog, &c.nfsAddr}} {
		port, err := getPort(ctx, pmap, svc.prog)
		if err != nil {
			return err
		}
		*svc.addr = net.JoinHostPort(c.opts.Server, strconv.Itoa(port))
	}
	return nil
}

func getPort(ctx context.Context, pmap *transport, prog uint32) (int, error) {
	header := rpc.Header{Rpcvers: rpcVersion, Prog: rpc.PmapProg, Vers: rpc.PmapVers, Proc: rpc.PmapProcGetPort}
	mapping := rpc.Mapping{Prog: prog, Vers: 3, Prot: rpc.IPProtoTCP}
	d, err := pmap.call(ctx, header, mapping)
	if err != nil {
		return 0, fmt.Errorf("cannot ask the portmapper for program %d: %w", prog, err)
	}
	port, err := portReply(d)
	if err != nil || port == 0 || port > 65535 {
		return 0, fmt.Errorf("the portmapper knows no TCP port of program %d v3", prog)
	}
	return int(port), nil
}

// do runs op with the connection and the mounted root, connecting and
// mounting first when needed. A stale handle (the server forgot it, as
// go-nfs does when restarted) makes the root be mounted again, and op
// retried once when none of its calls had succeeded.
func (c *Client) do(ctx context.Context, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	defer context.AfterFunc(c.closing, cancel)()
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("cannot wait for the NFS connection: %w", ctx.Err())
	}
	defer func() { <-c.turn }()
	if c.done {
		return ErrClosed
	}
	err := c.ready(ctx)
	if err == nil {
		answered := c.answered
		err = op(ctx)
		var status *StatusError
		if errors.As(err, &status) && status.stale() {
			// Mounted again by the next operation, or now to retry this one
			// when the server has run none of its calls.
			c.root = nil
			if c.answered == answered {
				klog.FromContext(ctx).V(2).Info("NFS root handle is stale, mounting again", "server", c.nfsAddr, "path", c.opts.Path)
				if err = c.ready(ctx); err == nil {
					err = op(ctx)
				}
			}
		}
	}
	if c.conn != nil && c.conn.broken {
		c.conn.close()
		c.conn = nil
	}
	return err
}

// ready connects and mounts the export when not done yet.
func (c *Client) ready(ctx context.Context) error {
	if (c.conn == nil || c.root == nil) && c.opts.Port == 0 {
		if err := c.resolvePorts(ctx); err != nil {
			return err
		}
	}
	if c.conn == nil {
		conn, err := dial(ctx, c.nfsAddr, c.opts.SourcePort)
		if err != nil {
			return err
		}
		c.conn = conn
	}
	if c.root != nil {
		return nil
	}
	root, err := c.mount(ctx)
	if err != nil {
		return err
	}
	c.root = root
	return nil
}

// mount asks MOUNT for the export's root handle, on the NFS connection
// when both share a port.
func (c *Client) mount(ctx context.Context) ([]byte, error) {
	conn := c.conn
	if c.mntAddr != c.nfsAddr {
		mnt, err := dial(ctx, c.mntAddr, c.opts.SourcePort)
		if err != nil {
			return nil, err
		}
		defer mnt.close()
		conn = mnt
	}
	header := rpc.Header{Rpcvers: rpcVersion, Prog: nfs.MountProg, Vers: nfs.MountVers, Proc: nfs.MountProc3MNT, Cred: c.auth, Verf: rpc.AuthNull}
	d, err := c.checked(ctx, conn, header, "MNT", c.opts.Path, c.opts.Path)
	if err != nil {
		return nil, err
	}
	return mountReply(d)
}

// checked makes a call on conn and reads its status, turning denials and
// failures into the errors this package documents.
func (c *Client) checked(ctx context.Context, conn *transport, header rpc.Header, op, path string, args ...any) (*decoder, error) {
	d, err := conn.call(ctx, header, args...)
	var auth *AuthError
	switch {
	case errors.As(err, &auth):
		auth.SourcePort = conn.localPort()
		return nil, fmt.Errorf("cannot %s %q on %s: %w", op, path, conn.conn.RemoteAddr(), err)
	case closedByServer(err) && ctx.Err() == nil:
		return nil, fmt.Errorf("cannot %s %q: %w", op, path, closedOnUnreserved(err, conn.localPort()))
	case err != nil:
		return nil, fmt.Errorf("cannot %s %q on %s: %w", op, path, conn.conn.RemoteAddr(), err)
	}
	status := d.uint32()
	if err := d.check(op); err != nil {
		return nil, err
	}
	if status != statusOK {
		return nil, &StatusError{Op: op, Path: path, Status: status}
	}
	c.answered++
	return d, nil
}

// call runs an NFSv3 procedure on the connection.
func (c *Client) call(ctx context.Context, proc uint32, op, path string, args ...any) (*decoder, error) {
	header := rpc.Header{Rpcvers: rpcVersion, Prog: nfs.Nfs3Prog, Vers: nfs.Nfs3Vers, Proc: proc, Cred: c.auth, Verf: rpc.AuthNull}
	return c.checked(ctx, c.conn, header, op, path, args...)
}

// Close ends the connection; calls after it fail with ErrClosed. A running
// call is cut short, and Close returns once it has.
func (c *Client) Close() {
	c.close()
	c.turn <- struct{}{}
	defer func() { <-c.turn }()
	c.done = true
	if c.conn != nil {
		c.conn.close()
		c.conn = nil
	}
}

// closedByServer says the server ended the connection instead of answering.
func closedByServer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}
