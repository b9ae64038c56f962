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

package fleet

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/backend"
	"github.com/provfleet/provfleet/pkg/backend/hostpath"
	"github.com/provfleet/provfleet/pkg/backend/nfs"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// BackendRequest is what a BackendFactory gets to build the backend of one
// ProvisionerConfig.
type BackendRequest struct {
	// Spec is the object's spec.backend; a custom factory reads
	// Spec.Custom.Parameters. Read-only.
	Spec *v1alpha1.BackendSpec
	// ProvisionerNames are the names the instance answers to.
	ProvisionerNames []string
	// Volumes are the PersistentVolumes of the fleet's shared cache, indexed
	// with backend.VolumePathIndex.
	Volumes Volumes
	// HostPathRoot is the manager's --host-path-root.
	HostPathRoot string
	// NodeName is the node the manager runs on (NODE_NAME).
	NodeName string
}

// Volumes is what the built-in backends read of the cluster's
// PersistentVolumes; every backend gets the fleet's one backend.PathIndex.
type Volumes interface {
	List() ([]*corev1.PersistentVolume, error)
	Exists(name string) (bool, error)
	Overlapping(server, volumePath string) ([]*corev1.PersistentVolume, error)
}

// BackendFactory builds the backend of one ProvisionerConfig. It is called
// again whenever spec.backend changes. An error wrapping backend.ErrInvalidSpec
// is reported as Ready=False InvalidSpec, any other as BackendUnavailable.
// A backend with a Close method (see closer) has it called once its instance
// stopped. A factory should not wait on a slow server: the fleet's workers
// build every backend.
type BackendFactory func(ctx context.Context, req BackendRequest) (provisioning.Provisioner, error)

// closer is a backend that holds something to release, such as a
// connection, once its instance stopped.
type closer interface {
	Close()
}

// closeBackend releases p when it holds something.
func closeBackend(p provisioning.Provisioner) {
	if c, ok := p.(closer); ok {
		c.Close()
	}
}

// factoryFor returns the factory of the backend spec selects: a built-in one,
// or the custom driver registered with WithBackend.
func factoryFor(spec *v1alpha1.BackendSpec, custom map[string]BackendFactory) (BackendFactory, bool) {
	switch {
	case spec.HostPath != nil:
		return newHostPath, true
	case spec.NFS != nil:
		return newNFS, true
	case spec.Custom != nil:
		f, ok := custom[spec.Custom.Driver]
		return f, ok
	}
	return nil, false
}

func newHostPath(_ context.Context, req BackendRequest) (provisioning.Provisioner, error) {
	spec := req.Spec.HostPath
	dir, err := directory(spec.VolumeDirectory)
	if err != nil {
		return nil, err
	}
	// The node agent serves its own node: spec.nodeName only selects nodes.
	// A shared file system is no node's.
	node := req.NodeName
	if spec.SharedFileSystem {
		node = ""
	}
	var additional []string
	for _, p := range spec.AdditionalPaths {
		additional = append(additional, string(p))
	}
	// The node agent has read nodePaths: what is left is this node's.
	classes := map[string][]string{}
	for _, class := range spec.StorageClasses {
		classes[class.StorageClassName] = v1alpha1.JoinPaths(class.Path, class.AdditionalPaths)
	}
	return hostpath.New(hostpath.Config{
		Path:            string(spec.Path),
		AdditionalPaths: additional,
		StorageClasses:  classes,
		NodeAffinityKey: spec.NodeAffinityKey,
		VolumeType:      hostpath.VolumeType(spec.VolumeType),
		NodeName:        node,
		Shared:          spec.SharedFileSystem,
		PathPattern:     string(spec.PathPattern),
		OnDelete:        backend.OnDeletePolicy(spec.OnDelete),
		Capacity:        capacity(spec.Capacity),
		Directory:       dir,
		HostPathRoot:    req.HostPathRoot,
		LocalPathPatterns: hostpath.LocalPathPatterns{
			Owner: slices.Contains(spec.LocalPathPatterns, v1alpha1.LocalPathPatternOwner),
			Mode:  slices.Contains(spec.LocalPathPatterns, v1alpha1.LocalPathPatternMode),
		},

		AdoptRetainedDirectories: spec.AdoptRetainedDirectories,
	}, hostpath.Options{ProvisionerNames: req.ProvisionerNames, Volumes: req.Volumes})
}

func newNFS(_ context.Context, req BackendRequest) (provisioning.Provisioner, error) {
	spec := req.Spec.NFS
	dir, err := directory(spec.VolumeDirectory)
	if err != nil {
		return nil, err
	}
	subdir, err := nfsSubdir(spec.NFSSubdir)
	if err != nil {
		return nil, err
	}
	return nfs.New(nfs.Config{
		Server:       spec.Server,
		Path:         string(spec.Path),
		Port:         int(spec.Port),
		MountPath:    string(spec.MountPath),
		PathPattern:  string(spec.PathPattern),
		OnDelete:     backend.OnDeletePolicy(spec.OnDelete),
		MountOptions: spec.MountOptions,
		Capacity:     capacity(spec.Capacity),
		Directory:    dir,
		NFSSubdir:    subdir,

		AdoptRetainedDirectories: spec.AdoptRetainedDirectories,
	}, nfs.Options{ProvisionerNames: req.ProvisionerNames, Volumes: req.Volumes})
}

// nfsSubdir maps backend.nfs.nfsSubdir; the CRD refuses a bad version,
// which only an object that bypassed it can have.
func nfsSubdir(spec *v1alpha1.NFSSubdirOrigin) (*backend.NFSSubdir, error) {
	if spec == nil {
		return nil, nil
	}
	version, err := backend.ParseNFSSubdirVersion(spec.Version)
	if err != nil {
		return nil, fmt.Errorf("%w: nfsSubdir: %w", backend.ErrInvalidSpec, err)
	}
	return &backend.NFSSubdir{ProvisionerName: string(spec.ProvisionerName), Version: version}, nil
}

func capacity(spec *v1alpha1.CapacitySpec) backend.Capacity {
	if spec == nil {
		return backend.Capacity{}
	}
	c := backend.Capacity{MaxVolumes: spec.MaxVolumes}
	if spec.Storage != nil {
		c.Storage = spec.Storage.DeepCopy()
	}
	return c
}

// directory maps mode, uid and gid of a backend spec; the CRD refuses a bad
// mode, which only an object that bypassed it can have.
func directory(spec v1alpha1.VolumeDirectory) (backend.Directory, error) {
	var d backend.Directory
	// Copies: the spec belongs to the informer's cache.
	if spec.UID != nil {
		d.UID = ptr.To(*spec.UID)
	}
	if spec.GID != nil {
		d.GID = ptr.To(*spec.GID)
	}
	if spec.Mode != "" {
		mode, err := backend.ParseMode(spec.Mode)
		if err != nil {
			return backend.Directory{}, fmt.Errorf("%w: %w", backend.ErrInvalidSpec, err)
		}
		d.Mode = &mode
	}
	return d, nil
}

// errUnknownDriver means spec.backend names a custom driver this manager was not
// built with.
var errUnknownDriver = errors.New("no such backend in this manager")

// buildBackend runs the factory of req.Spec, turning a panic into an error so
// a faulty backend fails its own object only.
func buildBackend(ctx context.Context, custom map[string]BackendFactory, req BackendRequest) (p provisioning.Provisioner, err error) {
	name := req.Spec.Name()
	factory, ok := factoryFor(req.Spec, custom)
	if !ok {
		return nil, fmt.Errorf("cannot start backend %q: %w", name, errUnknownDriver)
	}
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("cannot start backend %q: it panicked: %v", name, r)
		}
	}()
	p, err = factory(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("cannot start backend %q: %w", name, err)
	}
	if p == nil {
		return nil, fmt.Errorf("cannot start backend %q: the factory returned no provisioner", name)
	}
	return p, nil
}

// base is a directory tree a backend makes its volumes in: on the manager's
// filesystem when server is empty, else on that NFS server.
type base struct {
	field  string
	server string
	path   string
}

func (b base) String() string {
	if b.server == "" {
		return fmt.Sprintf("%s %q", b.field, b.path)
	}
	return fmt.Sprintf("%s %q on server %q", b.field, b.path, b.server)
}

// bases returns the directory trees of a built-in backend; a custom backend
// declares none.
func bases(spec *v1alpha1.BackendSpec) []base {
	switch {
	case spec.HostPath != nil:
		// Node paths count on every node: two objects that share a path on
		// disjoint nodes are refused too, rather than trusted to stay apart.
		bases := []base{{field: "hostPath.path", path: string(spec.HostPath.Path)}}
		bases = appendBases(bases, "hostPath.additionalPaths", spec.HostPath.AdditionalPaths)
		for i, nodePath := range spec.HostPath.NodePaths {
			bases = append(bases, base{field: fmt.Sprintf("hostPath.nodePaths[%d].path", i), path: string(nodePath.Path)})
			bases = appendBases(bases, fmt.Sprintf("hostPath.nodePaths[%d].additionalPaths", i), nodePath.AdditionalPaths)
		}
		for i, class := range spec.HostPath.StorageClasses {
			field := fmt.Sprintf("hostPath.storageClasses[%d]", i)
			bases = append(bases, base{field: field + ".path", path: string(class.Path)})
			bases = appendBases(bases, field+".additionalPaths", class.AdditionalPaths)
			for j, nodePath := range class.NodePaths {
				bases = append(bases, base{field: fmt.Sprintf("%s.nodePaths[%d].path", field, j), path: string(nodePath.Path)})
				bases = appendBases(bases, fmt.Sprintf("%s.nodePaths[%d].additionalPaths", field, j), nodePath.AdditionalPaths)
			}
		}
		return bases
	case spec.NFS != nil:
		export := base{field: "nfs.path", server: backend.NFSServer(spec.NFS.Server, int(spec.NFS.Port)), path: string(spec.NFS.Path)}
		if spec.NFS.MountPath == "" {
			return []base{export}
		}
		return []base{{field: "nfs.mountPath", path: string(spec.NFS.MountPath)}, export}
	}
	return nil
}

// appendBases appends the host paths of the list field to bases.
func appendBases(bases []base, field string, paths []v1alpha1.AbsolutePath) []base {
	for i, p := range paths {
		bases = append(bases, base{field: fmt.Sprintf("%s[%d]", field, i), path: string(p)})
	}
	return bases
}

// overlappingBases describes where the backends of a and b could reach each
// other's volumes, "" when they cannot: hostPath paths or NFS mount paths of
// which one contains the other, or export paths of one NFS server of which
// one contains the other. Servers are compared as written: a host name and its
// address are not known to be one server.
func overlappingBases(a, b *v1alpha1.ProvisionerConfigSpec) string {
	for _, p := range bases(&a.Backend) {
		for _, q := range bases(&b.Backend) {
			if p.server == q.server && nestedPaths(p.path, q.path) {
				return fmt.Sprintf("backend %s overlaps %s", p, q)
			}
		}
	}
	return ""
}

// nestedPaths reports whether one of two absolute paths contains the other.
func nestedPaths(a, b string) bool {
	return backend.Overlaps(path.Clean(a), path.Clean(b))
}
