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

package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/bench/internal/report"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
)

// nfsExportPath is the path the harness's NFS server exports.
const nfsExportPath = "/exports"

// nfsScenario is scenario 7: scenario 1's claims on an NFS export that the
// manager reaches through its own NFSv3 client, with no mount, next to the
// limit. The server (go-nfs on loopback) runs in the harness's process, so
// its CPU is in no system's figures.
func (b *bench) nfsScenario(ctx context.Context) error {
	dir := filepath.Join(b.cfg.Work, "nfs", strconv.Itoa(b.nextSeq()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create the NFS export's folder: %w", err)
	}
	server, err := nfsserver.Start(ctx, nfsserver.Options{Dir: dir, Path: nfsExportPath})
	if err != nil {
		return err
	}
	defer func() {
		if err := server.Stop(); err != nil {
			b.logf("%v", err)
		}
	}()
	sys, err := newNFSSystem(b, server, dir)
	if err != nil {
		return err
	}
	b.logf("NFS server on %s exporting %s as %s", server.Addr(), dir, nfsExportPath)
	if err := b.provisionScenario(ctx, provisionCase{report.S7NFSProvision, report.S7NFSDelete, 1, b.cfg.S7Claims, []system{sys}}); err != nil {
		return err
	}
	b.mu.Lock()
	section := report.NFSSection(b.run.Measurements)
	b.mu.Unlock()
	b.addSection(section)
	return nil
}

// nfsSystem is provfleet with its tenant's volumes on one NFS export whose
// folder the harness can see.
type nfsSystem struct {
	*provfleetSystem
	dir string
}

// newNFSSystem is provfleet with every tenant on server's export, served from
// dir. Two tenants would share the export, which the manager refuses as
// overlapping: the scenario runs one.
func newNFSSystem(b *bench, server *nfsserver.Server, dir string) (*nfsSystem, error) {
	nfs, err := exportOf(server)
	if err != nil {
		return nil, err
	}
	return &nfsSystem{
		provfleetSystem: &provfleetSystem{b: b, backend: func(tenant) v1alpha1.BackendSpec {
			return v1alpha1.BackendSpec{NFS: nfs.DeepCopy()}
		}},
		dir: dir,
	}, nil
}

// exportOf is the backend of a provisioner whose volumes are on server's
// export.
func exportOf(server *nfsserver.Server) (v1alpha1.NFSBackend, error) {
	host, _, err := net.SplitHostPort(server.Addr())
	if err != nil {
		return v1alpha1.NFSBackend{}, fmt.Errorf("cannot read the NFS server's address: %w", err)
	}
	port := int32(server.Port()) //nolint:gosec // a TCP port
	return v1alpha1.NFSBackend{Server: host, Port: port, Path: nfsExportPath}, nil
}

// volumeDirs are the volume directories on the export's top level.
func (s *nfsSystem) volumeDirs() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list the NFS export's folder: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "pvc-") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// exporter is a system whose volumes are directories the harness can list.
type exporter interface {
	volumeDirs() ([]string, error)
}

// checkExport fails unless the volume directories on sys's export are
// exactly want, a system without one passes: the harness sees that the
// claims went through the server, not only that PVs appeared.
func checkExport(sys system, want []string) error {
	e, ok := sys.(exporter)
	if !ok {
		return nil
	}
	got, err := e.volumeDirs()
	if err != nil {
		return err
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	missing, unexpected := absentFrom(want, got), absentFrom(got, want)
	if len(missing) > 0 || len(unexpected) > 0 {
		return fmt.Errorf("the NFS export's volume directories are not the PVs': %d missing %v, %d unexpected %v", len(missing), missing, len(unexpected), unexpected)
	}
	return nil
}

// absentFrom are the names of names that sorted lacks.
func absentFrom(names, sorted []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(name string) bool {
		_, found := slices.BinarySearch(sorted, name)
		return found
	})
}

// hostileBackend puts tenant t on an export behind a Hostile server that
// answers every call with the worst replies, the other tenants of sys on
// their hostPath directories, and returns the replies' count and what
// stops both servers.
func (b *bench) hostileBackend(ctx context.Context, sys *provfleetSystem, t *tenant) (*nfsserver.WorstReplies, func(), error) {
	dir := filepath.Join(b.cfg.Work, "nfs", strconv.Itoa(b.nextSeq()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("cannot create the NFS export's folder: %w", err)
	}
	server, err := nfsserver.Start(ctx, nfsserver.Options{Dir: dir, Path: nfsExportPath})
	if err != nil {
		return nil, nil, err
	}
	worst := &nfsserver.WorstReplies{}
	hostile, err := nfsserver.StartHostile(ctx, nfsserver.HostileOptions{Upstream: server.Addr(), Answer: worst.Answer})
	if err != nil {
		if stopErr := server.Stop(); stopErr != nil {
			b.logf("%v", stopErr)
		}
		return nil, nil, err
	}
	t.failing, t.hostile = false, true
	nfs := v1alpha1.NFSBackend{Server: hostile.Host(), Port: int32(hostile.Port()), Path: nfsExportPath} //nolint:gosec // a TCP port
	sys.backend = func(other tenant) v1alpha1.BackendSpec {
		if other.name == t.name {
			return v1alpha1.BackendSpec{NFS: nfs.DeepCopy()}
		}
		return sys.hostPathBackend(other)
	}
	return worst, func() {
		for _, s := range []interface{ Stop() error }{hostile, server} {
			if err := s.Stop(); err != nil {
				b.logf("%v", err)
			}
		}
		b.logf("hostile NFS server sent %d rounds of the worst replies", worst.Rounds())
	}, nil
}
