package hostpath

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
)

func FuzzHostPath(f *testing.F) {
	backendtest.FuzzConfinement(f, backendtest.FuzzBackend{
		New: func(t *testing.T, root, base string, onDelete backend.OnDeletePolicy, opts backend.Options) backendtest.Reclaiming {
			p, err := New(Config{Path: base, HostPathRoot: root, DefaultNodeName: "node-a", OnDelete: onDelete}, opts)
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		LocalPath: func(pv *v1.PersistentVolume, base string) string { return pv.Spec.Local.Path },
	})
}
