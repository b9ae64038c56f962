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
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/willscott/go-nfs-client/nfs/rpc"
	"github.com/willscott/go-nfs-client/nfs/xdr"
)

// ONC RPC (RFC 5531) words this client reads and writes.
const (
	rpcVersion    = 2
	msgCall       = 0
	msgReply      = 1
	replyAccepted = 0
	replyDenied   = 1
	acceptSuccess = 0
	rejectAuth    = 1
	lastFragment  = 1 << 31
	// maxRecordBytes bounds a reply record, its fragments together: the
	// largest reply asked for is a READ of 64 KiB.
	maxRecordBytes = 256 << 10
	// maxRecordFragments bounds the fragments of one record: servers send
	// one, and empty ones would otherwise be read until the deadline.
	maxRecordFragments = 64
	// maxStrayReplies bounds the replies to other xids skipped before a
	// call's own. A transport carries one call at a time and is dropped
	// when a call fails, so none should come; a few are let through
	// for a server that answers a call twice.
	maxStrayReplies = 4
)

// Reserved source ports are tried from this one up to 1023: the range a
// pod sysctl net.ipv4.ip_unprivileged_port_start=512 makes bindable.
const (
	firstReservedPort = 512
	reservedPorts     = 1024
)

// transport is one TCP connection carrying one RPC call at a time.
type transport struct {
	conn   net.Conn
	r      *bufio.Reader
	xid    uint32
	broken bool
}

// dial connects to addr, from a reserved source port first when
// sourcePort asks for it and the process may bind one.
func dial(ctx context.Context, addr string, sourcePort SourcePort) (*transport, error) {
	var conn net.Conn
	var err error
	if sourcePort == ReservedFirst {
		conn, err = dialReserved(ctx, addr)
	}
	if conn == nil && err == nil {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot connect to %s: %w", addr, addressless(err))
	}
	return &transport{conn: conn, r: bufio.NewReader(conn), xid: rand.Uint32()}, nil //nolint:gosec // an xid needs no secrecy
}

// dialReserved returns no connection and no error when the process may not
// bind a reserved port, or every one is taken, so the caller falls back to
// an unreserved one. It tries each port once from a random one. The ports
// of closed connections wait in TIME_WAIT for a minute, and there are only
// 512: with SO_REUSEADDR such a port is bound again, and only a connection
// to the same server address is refused (EADDRNOTAVAIL), as the kernel
// keeps each connection's addresses unique.
func dialReserved(ctx context.Context, addr string) (net.Conn, error) {
	start := rand.IntN(reservedPorts - firstReservedPort) //nolint:gosec // spreading ports needs no secrecy
	for i := range reservedPorts - firstReservedPort {
		port := firstReservedPort + (start+i)%(reservedPorts-firstReservedPort)
		d := net.Dialer{LocalAddr: &net.TCPAddr{Port: port}, Control: reuseAddress}
		conn, err := d.DialContext(ctx, "tcp", addr)
		switch {
		case err == nil:
			return conn, nil
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
			return nil, nil
		case errors.Is(err, syscall.EADDRINUSE), errors.Is(err, syscall.EADDRNOTAVAIL):
			continue
		default:
			return nil, err
		}
	}
	return nil, nil
}

// reuseAddress sets SO_REUSEADDR on a socket before it is bound.
func reuseAddress(_, _ string, c syscall.RawConn) error {
	var err error
	if controlErr := c.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	}); controlErr != nil {
		return controlErr
	}
	return err
}

// addressless drops the addresses that a *net.OpError names: its local
// port changes with every connection, and errors end up in a status and its
// Events, which must not change from one failed call to the next. Callers
// name the server themselves.
func addressless(err error) error {
	var op *net.OpError
	if !errors.As(err, &op) || op.Err == nil {
		return err
	}
	return fmt.Errorf("%s: %w", op.Op, op.Err)
}

// localPort is the source port of the connection.
func (t *transport) localPort() int {
	if a, ok := t.conn.LocalAddr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

func (t *transport) close() {
	_ = t.conn.Close()
}

// call sends one call and returns the decoder of its result. Any failure to
// exchange a whole call and reply marks the transport broken; replies
// that deny or refuse the call do not.
func (t *transport) call(ctx context.Context, header rpc.Header, args ...any) (*decoder, error) {
	t.xid++
	record, err := encodeCall(t.xid, header, args)
	if err != nil {
		return nil, err
	}
	stop := t.bound(ctx)
	defer stop()
	reply, err := t.exchange(record)
	if err != nil {
		t.broken = true
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%w: %w", ctx.Err(), err)
		case errors.Is(err, os.ErrDeadlineExceeded):
			// The connection's deadline is the context's, reached first.
			return nil, fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		return nil, err
	}
	return decodeReply(t.xid, reply)
}

// bound makes blocked reads and writes return when ctx ends.
func (t *transport) bound(ctx context.Context) func() {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Time{}
	}
	_ = t.conn.SetDeadline(deadline)
	expired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(expired)
		_ = t.conn.SetDeadline(time.Unix(1, 0))
	})
	return func() {
		if !stop() {
			// Already running: let it finish before the next call sets
			// its own deadline.
			<-expired
		}
	}
}

func encodeCall(xid uint32, header rpc.Header, args []any) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(make([]byte, 4)) // record marker, set below
	for _, v := range append([]any{xid, uint32(msgCall), header}, args...) {
		if err := xdr.Write(&buf, v); err != nil {
			return nil, fmt.Errorf("cannot encode an RPC call: %w", err)
		}
	}
	record := buf.Bytes()
	binary.BigEndian.PutUint32(record, lastFragment|uint32(len(record)-4)) //nolint:gosec // calls are small
	return record, nil
}

// exchange writes a record and reads the reply record, skipping at most
// maxStrayReplies replies to other xids: a server flooding them fails the
// call at once rather than at its deadline, which would cost a core on each
// side for as long. Reads end at the connection's deadline, and a reply is
// at most maxRecordBytes, so decoding it takes no longer than reading it.
func (t *transport) exchange(record []byte) ([]byte, error) {
	if _, err := t.conn.Write(record); err != nil {
		return nil, fmt.Errorf("cannot send an RPC call: %w", addressless(err))
	}
	for range maxStrayReplies + 1 {
		reply, err := t.readRecord()
		if err != nil {
			return nil, fmt.Errorf("cannot read an RPC reply: %w", addressless(err))
		}
		if len(reply) >= 4 && binary.BigEndian.Uint32(reply) == t.xid {
			return reply, nil
		}
	}
	return nil, fmt.Errorf("cannot read an RPC reply: the server sent more than %d replies to calls not made", maxStrayReplies)
}

// readRecord reads one record of at most maxRecordBytes and
// maxRecordFragments fragments, its fragments together. A fragment announcing more than that is refused before it is
// read, and the buffer grows only with the bytes that arrive, so a server
// announcing much and sending little costs what it sent.
func (t *transport) readRecord() ([]byte, error) {
	var record bytes.Buffer
	for range maxRecordFragments {
		var marker [4]byte
		if _, err := io.ReadFull(t.r, marker[:]); err != nil {
			return nil, err
		}
		word := binary.BigEndian.Uint32(marker[:])
		size := int64(word &^ lastFragment)
		if int64(record.Len())+size > maxRecordBytes {
			return nil, fmt.Errorf("record of more than %d bytes", maxRecordBytes)
		}
		if _, err := io.CopyN(&record, t.r, size); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if word&lastFragment != 0 {
			return record.Bytes(), nil
		}
	}
	return nil, fmt.Errorf("more than %d fragments in one record", maxRecordFragments)
}
