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
	"encoding/binary"
	"io"
	"net"
	"sync"
)

// RPC reply words of a call denied for a weak credential (RFC 5531).
const (
	rpcReply       = 1
	rpcMsgDenied   = 1
	rpcAuthError   = 1
	rpcAuthTooWeak = 5
	lastFragment   = 1 << 31
	reservedPorts  = 1024
)

// trackingListener remembers every accepted connection so Stop can close
// them, and in secure mode keeps unreserved ones from go-nfs.
type trackingListener struct {
	net.Listener
	secure bool

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
	refusers sync.WaitGroup
}

func newTrackingListener(ln net.Listener, secure bool) *trackingListener {
	return &trackingListener{Listener: ln, secure: secure, conns: map[net.Conn]struct{}{}}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !l.track(conn) {
			_ = conn.Close()
			continue
		}
		if l.secure && conn.RemoteAddr().(*net.TCPAddr).Port >= reservedPorts {
			l.refusers.Add(1)
			go l.refuse(conn)
			continue
		}
		return conn, nil
	}
}

// track adds conn unless the listener is closing.
func (l *trackingListener) track(conn net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[conn] = struct{}{}
	return true
}

// closeAll closes every accepted connection and waits for the refusers.
func (l *trackingListener) closeAll() {
	l.mu.Lock()
	l.closed = true
	for conn := range l.conns {
		_ = conn.Close()
	}
	l.mu.Unlock()
	l.refusers.Wait()
}

// refuse denies every call on conn as knfsd does for a secure export.
func (l *trackingListener) refuse(conn net.Conn) {
	defer l.refusers.Done()
	defer func() { _ = conn.Close() }()
	r := bufio.NewReader(conn)
	for {
		var marker uint32
		if err := binary.Read(r, binary.BigEndian, &marker); err != nil {
			return
		}
		var xid uint32
		if err := binary.Read(r, binary.BigEndian, &xid); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, r, int64(marker&^lastFragment)-4); err != nil {
			return
		}
		reply := []uint32{lastFragment | 5*4, xid, rpcReply, rpcMsgDenied, rpcAuthError, rpcAuthTooWeak}
		if err := binary.Write(conn, binary.BigEndian, reply); err != nil {
			return
		}
	}
}
