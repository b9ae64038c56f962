package nfs

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/internal/backendtest"
)

func FuzzNFS(f *testing.F) {
	backendtest.FuzzConfinement(f, backendtest.FuzzBackend{
		New: func(t *testing.T, root, base string, onDelete backend.OnDeletePolicy, opts backend.Options) backendtest.Reclaiming {
			p, err := New(Config{Server: "nfs.example.com", Path: "/export", MountPath: base, OnDelete: onDelete}, opts)
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		LocalPath: func(pv *v1.PersistentVolume, base string) string {
			return base + strings.TrimPrefix(pv.Spec.NFS.Path, "/export")
		},
	})
}
