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
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
)

// maxCallBytes bounds a call record read from a client.
const maxCallBytes = 1 << 20

// Call is an RPC call a client sent, as a Hostile server sees it.
type Call struct {
	XID       uint32
	Program   uint32
	Version   uint32
	Procedure uint32
	// Args are the procedure's arguments, after the credential and the
	// verifier.
	Args []byte
}

// Answer decides the reply to a call. It either writes to client what the
// client reads instead of the server's reply (record markers included, so
// it may break the framing too, or write forever) and returns true, or
// writes nothing and returns false to pass the call to the server. An
// error ends the connection.
type Answer func(ctx context.Context, call Call, client io.Writer) (bool, error)

// HostileOptions say where a Hostile server sends the calls it passes on
// and which it answers itself.
type HostileOptions struct {
	// Upstream is the host:port of the real server (Start's Addr).
	Upstream string
	// Answer takes over calls; nil passes every call on.
	Answer Answer
	// Record, when set, sees each call passed on and the reply record the
	// server sent (its marker left out), to capture real replies.
	Record func(call Call, reply []byte)
}

// Hostile is an NFS server that lies: it stands between clients and a real
// server, passing calls and replies on, except those its Answer takes
// over. One goroutine accepts connections and one serves each; Stop ends
// them all.
type Hostile struct {
	opts     HostileOptions
	listener *trackingListener
	ctx      context.Context
	cancel   context.CancelFunc
	served   sync.WaitGroup
}

// StartHostile listens on a free loopback port until Stop.
func StartHostile(ctx context.Context, opts HostileOptions) (*Hostile, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot listen: %w", err)
	}
	if opts.Answer == nil {
		opts.Answer = func(context.Context, Call, io.Writer) (bool, error) { return false, nil }
	}
	h := &Hostile{opts: opts, listener: newTrackingListener(ln, false)}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.served.Go(func() {
		for {
			conn, err := h.listener.Accept()
			if err != nil {
				return
			}
			h.served.Go(func() { h.serve(conn) })
		}
	})
	return h, nil
}

// Host is the address clients dial, without the port.
func (h *Hostile) Host() string { return h.listener.Addr().(*net.TCPAddr).IP.String() }

// Port is the port clients dial, for MOUNT and NFS alike.
func (h *Hostile) Port() int { return h.listener.Addr().(*net.TCPAddr).Port }

// Addr is host:port.
func (h *Hostile) Addr() string { return net.JoinHostPort(h.Host(), strconv.Itoa(h.Port())) }

// Stop closes the listener and every connection, and waits for them.
func (h *Hostile) Stop() error {
	h.cancel()
	err := h.listener.Close()
	h.listener.closeAll()
	h.served.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("cannot close the listener: %w", err)
	}
	return nil
}

// serve answers the calls of one client connection, one at a time, with a
// connection of its own to the server.
func (h *Hostile) serve(conn net.Conn) {
	defer func() { _ = conn.Close() }()
	upstream, err := (&net.Dialer{}).DialContext(h.ctx, "tcp", h.opts.Upstream)
	if err != nil {
		return
	}
	defer func() { _ = upstream.Close() }()
	// Stop closes the client's connection; this one ends with it.
	defer context.AfterFunc(h.ctx, func() { _ = upstream.Close() })()
	fromClient, fromServer := bufio.NewReader(conn), bufio.NewReader(upstream)
	for {
		record, err := readRecord(fromClient, maxCallBytes)
		if err != nil {
			return
		}
		call, err := parseCall(record)
		if err != nil {
			return
		}
		answered, err := h.opts.Answer(h.ctx, call, conn)
		if err != nil {
			return
		}
		if !answered && h.passOn(call, record, upstream, fromServer, conn) != nil {
			return
		}
	}
}

// passOn sends a call to the server and its reply back to the client.
func (h *Hostile) passOn(call Call, record []byte, upstream io.Writer, fromServer *bufio.Reader, client io.Writer) error {
	if _, err := upstream.Write(Frame(record)); err != nil {
		return err
	}
	reply, err := readRecord(fromServer, maxCallBytes)
	if err != nil {
		return err
	}
	if h.opts.Record != nil {
		h.opts.Record(call, reply)
	}
	_, err = client.Write(Frame(reply))
	return err
}

// readRecord reads the fragments of one record, at most limit bytes.
func readRecord(r io.Reader, limit int) ([]byte, error) {
	var record []byte
	for {
		var marker uint32
		if err := binary.Read(r, binary.BigEndian, &marker); err != nil {
			return nil, err
		}
		size := int(marker &^ lastFragment)
		if len(record)+size > limit {
			return nil, fmt.Errorf("record of more than %d bytes", limit)
		}
		fragment := make([]byte, size)
		if _, err := io.ReadFull(r, fragment); err != nil {
			return nil, err
		}
		record = append(record, fragment...)
		if marker&lastFragment != 0 {
			return record, nil
		}
	}
}

// parseCall reads a call's header: xid, type, RPC version, program,
// version, procedure, then the credential and the verifier, a flavor and
// an opaque body each.
func parseCall(record []byte) (Call, error) {
	words := func(n int) ([]uint32, error) {
		if len(record) < 4*n {
			return nil, errors.New("short RPC call")
		}
		out := make([]uint32, n)
		for i := range out {
			out[i] = binary.BigEndian.Uint32(record[4*i:])
		}
		record = record[4*n:]
		return out, nil
	}
	head, err := words(6)
	if err != nil || head[1] != rpcCall {
		return Call{}, errors.New("not an RPC call")
	}
	for range 2 {
		auth, err := words(2)
		if err != nil {
			return Call{}, err
		}
		padded := (int(auth[1]) + 3) &^ 3
		if padded > len(record) {
			return Call{}, errors.New("short RPC call")
		}
		record = record[padded:]
	}
	return Call{XID: head[0], Program: head[3], Version: head[4], Procedure: head[5], Args: record}, nil
}

// Frame makes payload one record: a single fragment, marked last.
func Frame(payload []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, lastFragment|uint32(len(payload))) //nolint:gosec // test records are small
	return append(out, payload...)
}

// Success is the payload of an accepted reply to xid that succeeded
// (AUTH_NULL verifier), followed by result: what Frame makes a record of.
func Success(xid uint32, result ...uint32) []byte {
	out := Words(xid, rpcReply, rpcMsgAccepted, 0, 0, rpcSuccess)
	return append(out, Words(result...)...)
}

// Words encodes XDR unsigned integers.
func Words(words ...uint32) []byte {
	out := make([]byte, 0, 4*len(words))
	for _, w := range words {
		out = binary.BigEndian.AppendUint32(out, w)
	}
	return out
}
