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
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/testenv/nfsserver"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

const (
	// nfsAddress is where every test server listens; they differ by port.
	nfsAddress = "127.0.0.1"
	// exportPath is the path every test server exports.
	exportPath = "/export"
	// reservedPorts is the first port a process without privilege may bind
	// when net.ipv4.ip_unprivileged_port_start is left at its default.
	reservedPorts = 1024
)

// NFS exports through one running manager, with no mount: each
// ProvisionerConfig is applied while the manager runs and its claims bind on
// the go-nfs server the test process serves.
func TestNFSExportsThroughTheManager(t *testing.T) {
	f := newFixture(t)
	// Probes every second make an outage seen soon.
	p := f.startManager("nfs", "--backend-probe-interval=1s")
	t.Run("onDelete", func(t *testing.T) { f.sub(t).checkOnDelete() })
	t.Run("two servers on one address", func(t *testing.T) { f.sub(t).checkTwoServers() })
	t.Run("link planted on the export", func(t *testing.T) { f.sub(t).checkPlantedLink() })
	t.Run("free space", func(t *testing.T) { f.sub(t).checkFreeSpace() })
	t.Run("server outage", func(t *testing.T) { f.sub(t).checkOutage() })
	t.Run("secure export", func(t *testing.T) {
		f.sub(t).checkSecureExport(!canBindReserved(t))
	})
	if exited, err := p.Exited(); exited {
		t.Errorf("the manager exited, so its provisioners were not applied while it ran: %v", err)
	}
	checkNoNFSMount(t)
}

// A manager that may not bind a reserved port against an export that
// accepts only those: its status and an Event say why and what to do. As
// root, the manager runs without CAP_NET_BIND_SERVICE.
func TestNFSSecureExportRefusesAnUnprivilegedManager(t *testing.T) {
	binary := unprivilegedManager(t)
	f := newFixture(t)
	f.startManagerBinary(binary, "nfs-unprivileged")
	f.checkSecureExport(true)
}

// sub is f for the subtest t, so a failure ends t rather than the test that
// made f; namespace, clients and manager are shared.
func (f *fixture) sub(t *testing.T) *fixture {
	t.Helper()
	c := *f
	c.t = t
	return &c
}

// checkOnDelete: a claim's directory is made on the export, the PV names it
// with the server's port, and its release deletes, archives (below
// subfolders) or retains it on the server.
func (f *fixture) checkOnDelete() {
	cases := map[string]struct {
		nfs func(*v1alpha1.NFSBackend)
		// dir is the volume's directory, relative to the export.
		dir         func(claim string, pv *corev1.PersistentVolume) string
		wantOptions func(port string) []string
		// afterRelease is what leftBeside finds of the directory.
		afterRelease []string
	}{
		"delete": {
			nfs:         func(*v1alpha1.NFSBackend) {},
			dir:         func(_ string, pv *corev1.PersistentVolume) string { return pv.Name },
			wantOptions: func(port string) []string { return []string{"mountport=" + port, "port=" + port} },
		},
		"archive-subfolders": {
			nfs: func(b *v1alpha1.NFSBackend) {
				b.PathPattern = "{{.PVC.Namespace}}/{{.PVC.Name}}"
				b.OnDelete = v1alpha1.OnDeleteArchive
			},
			dir:          func(claim string, _ *corev1.PersistentVolume) string { return path.Join(f.namespace, claim) },
			wantOptions:  func(port string) []string { return []string{"mountport=" + port, "port=" + port} },
			afterRelease: []string{"archived"},
		},
		"retain": {
			// The administrator's options stay, and a port they name already
			// is not named twice.
			nfs: func(b *v1alpha1.NFSBackend) {
				b.OnDelete = v1alpha1.OnDeleteRetain
				b.MountOptions = []string{"nfsvers=3", fmt.Sprintf("port=%d", b.Port)}
			},
			dir:          func(_ string, pv *corev1.PersistentVolume) string { return pv.Name },
			wantOptions:  func(port string) []string { return []string{"mountport=" + port, "nfsvers=3", "port=" + port} },
			afterRelease: []string{"kept"},
		},
	}
	for name, tc := range cases {
		f.t.Run(name, func(t *testing.T) {
			f := f.sub(t)
			e := f.serveNFS(nfsserver.Options{})
			pcName := f.prefix + "-" + name
			f.nfsProvisioner(pcName, e, tc.nfs)
			f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
			f.claim(name, pcName)
			f.waitBound(name)
			pv := f.boundVolume(name)
			dir := tc.dir(name, pv)
			e.checkVolume(t, pv, dir, tc.wantOptions(strconv.Itoa(e.server.Port())))

			f.release(name, pv.Name)
			if diff := cmp.Diff(tc.afterRelease, leftBeside(t, filepath.Join(e.dir, dir))); diff != "" {
				t.Errorf("what is left of the volume's directory on the server (-want +got):\n%s", diff)
			}
		})
	}
}

// checkTwoServers: two servers on one address, on two ports, export the
// same path; one manager provisions on both, each claim's volume on its own
// server, at the same directory on each, and neither export is refused as
// overlapping the other.
func (f *fixture) checkTwoServers() {
	exports := map[string]*nfsExport{"first": f.serveNFS(nfsserver.Options{}), "second": f.serveNFS(nfsserver.Options{})}
	for name, e := range exports {
		f.nfsProvisioner(f.prefix+"-"+name, e, func(b *v1alpha1.NFSBackend) { b.PathPattern = "{{.PVC.Namespace}}/same" })
	}
	for name := range exports {
		f.waitReady(f.prefix+"-"+name, 1, v1alpha1.ReasonRunning)
		f.claim("on-"+name, f.prefix+"-"+name)
	}
	f.waitBound("on-first", "on-second")
	for name, e := range exports {
		port := strconv.Itoa(e.server.Port())
		e.checkVolume(f.t, f.boundVolume("on-"+name), path.Join(f.namespace, "same"), []string{"mountport=" + port, "port=" + port})
	}
}

// checkPlantedLink: a folder that a pattern makes, swapped on the server
// for a link to a folder outside the export holding a lookalike of a
// volume, sends neither a create nor a delete there, nor to where the link
// would lead inside the export (go-nfs, as knfsd, resolves no link for a
// client: only a client that followed links itself could go anywhere), nor
// to the real folder moved aside: both fail with an Event, and succeed on
// the real folder once the link is gone.
func (f *fixture) checkPlantedLink() {
	e := f.serveNFS(nfsserver.Options{})
	pcName := f.prefix + "-link"
	f.nfsProvisioner(pcName, e, func(b *v1alpha1.NFSBackend) { b.PathPattern = "{{.PVC.Namespace}}/{{.PVC.Name}}" })
	f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
	f.claim("victim", pcName)
	f.waitBound("victim")
	pv := f.boundVolume("victim")

	folder := filepath.Join(e.dir, f.namespace)
	outside := filepath.Join(filepath.Dir(e.dir), "outside")
	plant(f.t, folder, outside, pv.Name)
	before := contents(f.t, outside)
	exportBefore := volumeContents(f.t, e.dir)

	f.claim("planted", pcName)
	f.t.Logf("create through the link: %s", f.waitEvent(f.namespace, "planted", corev1.EventTypeWarning, provisioning.EventProvisioningFailed))
	if err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Delete(f.ctx, "victim", metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.t.Logf("delete through the link: %s", f.waitEvent(metav1.NamespaceDefault, pv.Name, corev1.EventTypeWarning, provisioning.EventVolumeFailedDelete))
	if diff := cmp.Diff(before, contents(f.t, outside)); diff != "" {
		f.t.Errorf("the folder outside the export changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(exportBefore, volumeContents(f.t, e.dir)); diff != "" {
		f.t.Errorf("the export changed (-before +after):\n%s", diff)
	}

	unplant(f.t, folder)
	f.waitGone(pv.Name)
	f.waitBound("planted")
	if _, err := os.Lstat(filepath.Join(folder, "victim")); !errors.Is(err, fs.ErrNotExist) {
		f.t.Errorf("the victim's directory is still on the server: %v", err)
	}
	if diff := cmp.Diff(before, contents(f.t, outside)); diff != "" {
		f.t.Errorf("the folder outside the export changed (-before +after):\n%s", diff)
	}
}

// checkOutage: a server that stops makes its provisioner Ready=False,
// BackendUnavailable, with the server's error, and a claim waits with a
// Warning Event; the server back on its port and folder, the provisioner
// is Ready again and the claim binds, with no restart of the manager.
func (f *fixture) checkOutage() {
	e := f.serveNFS(nfsserver.Options{})
	pcName := f.prefix + "-outage"
	f.nfsProvisioner(pcName, e)
	f.waitReady(pcName, 1, v1alpha1.ReasonRunning)

	e.stop(f)
	// The first probe may meet the connection the server closed; the next
	// ones find nothing listening.
	f.eventually("Ready=False, BackendUnavailable, connection refused", func(ctx context.Context) (bool, error) {
		pc, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(ctx, pcName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ready := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == v1alpha1.ReasonBackendUnavailable &&
			strings.Contains(ready.Message, "connection refused"), nil
	})
	f.claim("during-outage", pcName)
	f.t.Logf("claim during the outage: %s", f.waitEvent(f.namespace, "during-outage", corev1.EventTypeWarning, provisioning.EventProvisioningFailed, "connection refused"))

	e.start(f)
	f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
	f.waitBound("during-outage")
	pv := f.boundVolume("during-outage")
	port := strconv.Itoa(e.server.Port())
	e.checkVolume(f.t, pv, pv.Name, []string{"mountport=" + port, "port=" + port})
}

// checkFreeSpace: the status holds the space of the served folder's file
// system, as the server's FSSTAT answers it.
func (f *fixture) checkFreeSpace() {
	e := f.serveNFS(nfsserver.Options{})
	pcName := f.prefix + "-space"
	f.nfsProvisioner(pcName, e)
	var storage *v1alpha1.StorageStatus
	f.eventually("status.storage of "+pcName, func(ctx context.Context) (bool, error) {
		pc, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(ctx, pcName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		storage = pc.Status.Storage
		return storage != nil, nil
	})
	var st syscall.Statfs_t
	if err := syscall.Statfs(e.dir, &st); err != nil {
		f.t.Fatal(err)
	}
	total := int64(st.Blocks) * st.Bsize //nolint:gosec // a file system's size fits
	if storage.Total.Value() != total || storage.Available.Sign() <= 0 || storage.Available.Cmp(storage.Total) > 0 {
		f.t.Errorf("status.storage has %s available of %s, want some of %d bytes", &storage.Available, &storage.Total, total)
	}
}

// plant moves folder aside and puts in its place a link to outside, which
// it fills with what the store would take for the volume pvName's
// directory "victim" and its owner marker.
func plant(t *testing.T, folder, outside, pvName string) {
	t.Helper()
	if err := os.Rename(folder, folder+"-aside"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(outside, "victim"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"victim/data": "keep me", ".victim.provfleet-volume": pvName}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(outside, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, folder); err != nil {
		t.Fatal(err)
	}
}

// unplant puts the folder plant moved aside back in place of the link.
func unplant(t *testing.T, folder string) {
	t.Helper()
	if err := os.Remove(folder); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(folder+"-aside", folder); err != nil {
		t.Fatal(err)
	}
}

// volumeContents is contents without the store's own folders at the top,
// where records of volumes come and go.
func volumeContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := contents(t, dir)
	maps.DeleteFunc(got, func(p, _ string) bool { return strings.HasPrefix(p, ".provfleet-") })
	return got
}

// contents maps each path below dir to "dir", a link's target or a file's
// content.
func contents(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			got[rel] = "dir"
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			got[rel] = "link to " + target
			return err
		default:
			data, err := os.ReadFile(p)
			got[rel] = string(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// checkSecureExport: against an export that accepts only reserved source
// ports, a manager that may bind one provisions, and one that may not
// reports the server's refusal with what to do, on the status and in an
// Event.
func (f *fixture) checkSecureExport(refused bool) {
	e := f.serveNFS(nfsserver.Options{Secure: true})
	pcName := f.prefix + "-secure"
	f.nfsProvisioner(pcName, e)
	if !refused {
		f.t.Log("the manager may bind reserved ports (it runs as root): the secure export serves it")
		f.waitReady(pcName, 1, v1alpha1.ReasonRunning)
		f.claim("secure", pcName)
		f.waitBound("secure")
		return
	}
	advice := []string{"unreserved source port", "net.ipv4.ip_unprivileged_port_start", `"insecure"`}
	down := f.waitReady(pcName, 1, v1alpha1.ReasonBackendUnavailable)
	ready := meta.FindStatusCondition(down.Status.Conditions, v1alpha1.ConditionReady)
	if ready.Status != metav1.ConditionFalse || !containsAll(ready.Message, advice) {
		f.t.Errorf("Ready is %s with %q, want False with %q", ready.Status, ready.Message, advice)
	}
	f.waitEvent(metav1.NamespaceDefault, pcName, corev1.EventTypeWarning, v1alpha1.ReasonBackendUnavailable, advice...)
}

// canBindReserved says whether this process, and so a manager it starts
// as it is, may bind a reserved port.
func canBindReserved(t *testing.T) bool {
	t.Helper()
	var lc net.ListenConfig
	for port := 600; port < 664; port++ {
		ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(nfsAddress, strconv.Itoa(port)))
		if err == nil {
			_ = ln.Close()
			return true
		}
		if errors.Is(err, syscall.EACCES) {
			return false
		}
	}
	t.Fatal("no reserved port to probe is free")
	return false
}

// unprivilegedManager returns a manager binary that may not bind reserved
// ports: the manager itself when this process may not, else a script that
// runs it without CAP_NET_BIND_SERVICE.
func unprivilegedManager(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end")
	}
	if !canBindReserved(t) {
		t.Skip("the manager runs unprivileged already: the secure export of TestNFSExportsThroughTheManager shows the refusal")
	}
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
	if err != nil {
		t.Skipf("cannot tell which ports need privilege: %v", err)
	}
	if start, err := strconv.Atoi(strings.TrimSpace(string(data))); err != nil || start < reservedPorts {
		t.Skipf("net.ipv4.ip_unprivileged_port_start is %q: any process may bind reserved ports", data)
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("cannot drop CAP_NET_BIND_SERVICE: %v", err)
	}
	script := filepath.Join(t.TempDir(), "manager")
	text := fmt.Sprintf("#!/bin/sh\nexec %s --bounding-set=-net_bind_service %s \"$@\"\n", shellQuote(setpriv), shellQuote(managerBinary))
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// checkNoNFSMount fails the test when anything of the test servers is
// mounted: the manager speaks NFS itself.
func checkNoNFSMount(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		_, after, _ := strings.Cut(line, " - ")
		if fields := strings.Fields(after); len(fields) >= 2 && strings.HasPrefix(fields[0], "nfs") && strings.HasPrefix(fields[1], nfsAddress+":") {
			t.Errorf("an export is mounted: %s", line)
		}
	}
}

// nfsExport is a host folder that a go-nfs server of the test process
// exports at exportPath; server is nil while stopped.
type nfsExport struct {
	dir    string
	opts   nfsserver.Options
	server *nfsserver.Server
}

// serveNFS serves a new folder until the test ends.
func (f *fixture) serveNFS(opts nfsserver.Options) *nfsExport {
	f.t.Helper()
	opts.Dir = filepath.Join(f.t.TempDir(), "export")
	opts.Path = exportPath
	if err := os.Mkdir(opts.Dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	e := &nfsExport{dir: opts.Dir, opts: opts}
	e.start(f)
	// Later starts listen where the first did, as a restarted server does.
	e.opts.Address = e.server.Addr()
	f.t.Cleanup(func() {
		if e.server != nil {
			e.stop(f)
		}
	})
	return e
}

// hostDir is the host folder of the subdirectory of the export that pv,
// an NFS volume of it, names.
func (e *nfsExport) hostDir(t *testing.T, pv *corev1.PersistentVolume) string {
	t.Helper()
	if pv.Spec.NFS == nil {
		t.Fatalf("volume %s is not an NFS volume", pv.Name)
	}
	rel, err := filepath.Rel(exportPath, pv.Spec.NFS.Path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		t.Fatalf("volume %s is no subdirectory of the export: %q", pv.Name, pv.Spec.NFS.Path)
	}
	return filepath.Join(e.dir, rel)
}

func (e *nfsExport) start(f *fixture) {
	f.t.Helper()
	server, err := nfsserver.Start(f.ctx, e.opts)
	if err != nil {
		f.t.Fatal(err)
	}
	e.server = server
}

func (e *nfsExport) stop(f *fixture) {
	f.t.Helper()
	if err := e.server.Stop(); err != nil {
		f.t.Error(err)
	}
	e.server = nil
}

// nfsProvisioner creates a ProvisionerConfig of the export, with no
// mountPath, and its StorageClass; failed claims and deletions are retried
// quickly and for ever.
func (f *fixture) nfsProvisioner(name string, e *nfsExport, mutate ...func(*v1alpha1.NFSBackend)) {
	f.t.Helper()
	f.provisioner(name, func(pc *v1alpha1.ProvisionerConfig) {
		f.nfsSpec(pc, e)
		for _, m := range mutate {
			m(pc.Spec.Backend.NFS)
		}
	})
}

// nfsSpec makes pc an NFS provisioner of e that retries quickly and for ever.
func (f *fixture) nfsSpec(pc *v1alpha1.ProvisionerConfig, e *nfsExport) {
	pc.Spec.Backend = v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{
		Server: nfsAddress,
		Path:   exportPath,
		Port:   int32(e.server.Port()), //nolint:gosec // a TCP port fits
	}}
	pc.Spec.Retry.InitialDelay = &metav1.Duration{Duration: 500 * time.Millisecond}
	pc.Spec.Retry.MaxDelay = &metav1.Duration{Duration: 2 * time.Second}
	pc.Spec.Retry.ProvisionFailureThreshold = ptr.To[int32](0)
	pc.Spec.Retry.DeleteFailureThreshold = ptr.To[int32](0)
}

// checkVolume checks that pv names the directory dir of the export, with
// the mount options wantOptions in any order, and that the directory is on
// the server with its owner marker beside it.
func (e *nfsExport) checkVolume(t *testing.T, pv *corev1.PersistentVolume, dir string, wantOptions []string) {
	t.Helper()
	want := &corev1.NFSVolumeSource{Server: nfsAddress, Path: path.Join(exportPath, dir)}
	if diff := cmp.Diff(want, pv.Spec.NFS); diff != "" {
		t.Errorf("NFS source of PV %s (-want +got):\n%s", pv.Name, diff)
	}
	if diff := cmp.Diff(wantOptions, slices.Sorted(slices.Values(pv.Spec.MountOptions))); diff != "" {
		t.Errorf("mount options of PV %s (-want +got):\n%s", pv.Name, diff)
	}
	if info, err := os.Lstat(filepath.Join(e.dir, dir)); err != nil || !info.IsDir() {
		t.Errorf("no directory %s on the server for PV %s: %v", dir, pv.Name, err)
	}
	marker := filepath.Join(e.dir, filepath.Dir(dir), "."+filepath.Base(dir)+".provfleet-volume")
	if owner, err := os.ReadFile(marker); err != nil || string(owner) != pv.Name {
		t.Errorf("owner marker of %s names %q (%v), want %s", dir, owner, err, pv.Name)
	}
}

// release deletes a claim and waits until its PV pvName is gone.
func (f *fixture) release(claim, pvName string) {
	f.t.Helper()
	if err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Delete(f.ctx, claim, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.waitGone(pvName)
}
