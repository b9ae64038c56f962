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

package dirvoltest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/provfleet/provfleet/pkg/backend/internal/dirvol"
)

// Big trees the removal tests build, the sizes a tenant's volume may
// have: a directory of ManyFiles files, a chain of ChainDepth directories.
// Under the race detector, which slows every NFS round trip tenfold, they
// are a tenth as big; make test runs them at full size without it.
const (
	ManyFiles  = 100_000 / raceScale
	ChainDepth = 20_000 / raceScale
	// CopyDepth is the chain the copy tests copy whole: as deep as a copy
	// goes (dirvol.MaxCopyDepth), a tenth of it under the race detector.
	CopyDepth = dirvol.MaxCopyDepth / raceScale
)

// Bounds of a removal, beyond what the process held before it: a few open
// directories, and the names of a listing (dirvol.RemoveBatch) with what a
// test server in the same process holds to serve it.
const (
	RemovalFiles = 16
	RemovalHeap  = 64 << 20
)

// Usage is the most a removal held beyond what the process held before it.
type Usage struct {
	// Files is the count of open descriptors, in /proc/self/fd.
	Files int
	// Heap is the live heap, as of the last garbage collection.
	Heap int64
}

// CheckRemoval runs remove and fails the test unless it succeeds holding at
// most RemovalFiles more open descriptors and RemovalHeap more live heap
// than the process held before. A goroutine samples both while remove runs
// and cancels its context as soon as either goes beyond, so a removal that
// is not bounded fails the test rather than exhaust the machine.
func CheckRemoval(t testing.TB, remove func(context.Context) error) Usage {
	t.Helper()
	runtime.GC()
	before := sample(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	stop := make(chan struct{})
	peak := make(chan Usage)
	go func() {
		var most Usage
		for {
			now := sample(t)
			used := Usage{Files: now.Files - before.Files, Heap: now.Heap - before.Heap}
			most = Usage{Files: max(most.Files, used.Files), Heap: max(most.Heap, used.Heap)}
			if used.Files > RemovalFiles || used.Heap > RemovalHeap {
				cancel(fmt.Errorf("the removal holds %d more open files and %d MiB more heap than before", used.Files, used.Heap>>20))
			}
			select {
			case <-stop:
				peak <- most
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	err := remove(ctx)
	close(stop)
	most := <-peak
	if cause := context.Cause(ctx); cause != nil {
		t.Fatalf("%v (stopped; it returned %v)", cause, err)
	}
	if err != nil {
		t.Fatalf("removal failed: %v", err)
	}
	t.Logf("the removal held at most %d more open files and %d KiB more heap than before", most.Files, most.Heap>>10)
	if most.Files > RemovalFiles || most.Heap > RemovalHeap {
		t.Fatalf("the removal held %d more open files and %d MiB more heap than before, want at most %d and %d MiB", most.Files, most.Heap>>20, RemovalFiles, RemovalHeap>>20)
	}
	return most
}

// sample counts the process's open descriptors and reads its live heap.
func sample(t testing.TB) Usage {
	t.Helper()
	fds, err := os.Open("/proc/self/fd")
	if err != nil {
		t.Error(err)
		return Usage{}
	}
	defer fds.Close()
	names, err := fds.Readdirnames(-1)
	if err != nil {
		t.Error(err)
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	return Usage{Files: len(names), Heap: int64(live[0].Value.Uint64())} //nolint:gosec // a heap fits
}
