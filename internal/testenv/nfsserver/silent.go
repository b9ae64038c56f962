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
	"strconv"
	"sync"
)

// Silent is a server that accepts connections and never answers a call, as
// a hung NFS server does.
type Silent struct {
	listener *trackingListener
	accepted sync.WaitGroup
}

// StartSilent listens on a free loopback port until Stop.
func StartSilent(ctx context.Context) (*Silent, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot listen: %w", err)
	}
	s := &Silent{listener: newTrackingListener(ln, false)}
	s.accepted.Go(func() {
		for {
			// Accept keeps the connection until Stop; nothing reads it.
			if _, err := s.listener.Accept(); err != nil {
				return
			}
		}
	})
	return s, nil
}

// Host is the address clients dial, without the port.
func (s *Silent) Host() string {
	return s.listener.Addr().(*net.TCPAddr).IP.String()
}

// Port is the port clients dial.
func (s *Silent) Port() int {
	return s.listener.Addr().(*net.TCPAddr).Port
}

// Addr is host:port.
func (s *Silent) Addr() string {
	return net.JoinHostPort(s.Host(), strconv.Itoa(s.Port()))
}

// Stop closes the listener and every connection.
func (s *Silent) Stop() error {
	err := s.listener.Close()
	s.accepted.Wait()
	s.listener.closeAll()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("cannot close the listener: %w", err)
	}
	return nil
}
