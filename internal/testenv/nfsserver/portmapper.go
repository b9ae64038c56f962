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
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
)

// Programs, procedures and statuses of the portmapper (RFC 1833, version
// 2) and of RPC replies (RFC 5531) that portmapper answers with.
const (
	pmapProgram      = 100000
	pmapVersion      = 2
	pmapProcNull     = 0
	pmapProcGetPort  = 3
	mountProgram     = 100005
	nfsProgram       = 100003
	ipProtoTCP       = 6
	rpcCall          = 0
	rpcMsgAccepted   = 0
	rpcSuccess       = 0
	rpcProgUnavail   = 1
	rpcProcUnavail   = 3
	maxPortmapRecord = 4096
)

// portmapper answers GETPORT for MOUNT and NFS version 3 over TCP, on a
// port of its own: kernel servers run theirs on 111, which only root may
// bind, and clients find mountd's port through it.
type portmapper struct {
	listener *trackingListener
	// ports are the TCP ports of the programs it knows, by program.
	ports map[uint32]uint32
	wg    sync.WaitGroup
}

func startPortmapper(ln net.Listener, ports map[uint32]uint32) *portmapper {
	p := &portmapper{listener: newTrackingListener(ln, false), ports: ports}
	p.wg.Add(1)
	go p.accept()
	return p
}

func (p *portmapper) accept() {
	defer p.wg.Done()
	for {
		conn, err := p.listener.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(conn)
	}
}

// stop closes the listener and every connection and waits for them.
func (p *portmapper) stop() error {
	err := p.listener.Close()
	p.listener.closeAll()
	p.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("cannot close the portmapper's listener: %w", err)
	}
	return nil
}

// serve answers the calls of one connection until it closes.
func (p *portmapper) serve(conn net.Conn) {
	defer p.wg.Done()
	defer func() { _ = conn.Close() }()
	r := bufio.NewReader(conn)
	for {
		call, err := readRecord(r, maxPortmapRecord)
		if err != nil {
			return
		}
		reply, err := p.answer(call)
		if err != nil {
			return
		}
		if _, err := conn.Write(reply); err != nil {
			return
		}
	}
}

// answer decodes a call and encodes its reply record.
func (p *portmapper) answer(call []byte) ([]byte, error) {
	head, err := parseCall(call)
	if err != nil {
		return nil, err
	}
	words := []uint32{head.XID, rpcReply, rpcMsgAccepted, 0, 0}
	switch {
	case head.Program != pmapProgram || head.Version != pmapVersion:
		words = append(words, rpcProgUnavail)
	case head.Procedure == pmapProcNull:
		words = append(words, rpcSuccess)
	case head.Procedure == pmapProcGetPort:
		var mapping struct{ Program, Version, Protocol, Port uint32 }
		if err := binary.Read(bytes.NewReader(head.Args), binary.BigEndian, &mapping); err != nil {
			return nil, err
		}
		port := uint32(0)
		if mapping.Version == 3 && mapping.Protocol == ipProtoTCP {
			port = p.ports[mapping.Program]
		}
		words = append(words, rpcSuccess, port)
	default:
		words = append(words, rpcProcUnavail)
	}
	reply := make([]byte, 4, 4+4*len(words))
	binary.BigEndian.PutUint32(reply, lastFragment|uint32(4*len(words))) //nolint:gosec // a few words
	for _, w := range words {
		reply = binary.BigEndian.AppendUint32(reply, w)
	}
	return reply, nil
}
