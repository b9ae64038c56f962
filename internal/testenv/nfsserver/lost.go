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
	"io"
	"slices"
	"sync"
)

// LoseReplies is a Hostile server's Answer that passes the first Count
// NFS calls of each of Procedures on to the server and loses their
// replies, whatever they were: the client's connection is closed, the call
// carried out, as when a connection breaks after the server ran it. It
// passes every other call on. Safe for concurrent use.
type LoseReplies struct {
	// Upstream is the host:port of the server behind the Hostile one, which
	// the calls whose replies are lost reach on connections of their own,
	// without credentials.
	Upstream   string
	Procedures []uint32
	Count      int

	mu   sync.Mutex
	lost map[uint32]int
}

// Answer is the Hostile server's Answer.
func (l *LoseReplies) Answer(ctx context.Context, call Call, _ io.Writer) (bool, error) {
	if call.Program != nfsProgram || !slices.Contains(l.Procedures, call.Procedure) || !l.lose(call.Procedure) {
		return false, nil
	}
	if _, err := exchange(ctx, l.Upstream, call, call.Procedure, call.Args); err != nil {
		return true, err
	}
	return true, errReplyLost
}

func (l *LoseReplies) lose(proc uint32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost[proc] >= l.Count {
		return false
	}
	if l.lost == nil {
		l.lost = map[uint32]int{}
	}
	l.lost[proc]++
	return true
}

// Lost returns how many replies of proc were lost so far.
func (l *LoseReplies) Lost(proc uint32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost[proc]
}
