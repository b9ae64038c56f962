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

package provisioning_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/provfleet/provfleet/pkg/backend/hostpath"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// hostPathOn is the hostPath backend, a provisioning.Reclaimer, with its
// volumes below root/vols.
func hostPathOn(t *testing.T, root string) *hostpath.Provisioner {
	t.Helper()
	p, err := hostpath.New(hostpath.Config{
		Path:         filepath.Join(root, "vols"),
		VolumeType:   hostpath.VolumeTypeHostPath,
		NodeName:     "node-1",
		HostPathRoot: root,
	}, hostpath.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dyingHostPath makes the volume, then hangs until its controller is stopped:
// the process dies after the backend's Provision and before the
// PersistentVolume exists. created is closed once the volume exists.
type dyingHostPath struct {
	*hostpath.Provisioner
	created chan struct{}
	once    sync.Once
}

func (b *dyingHostPath) Provision(ctx context.Context, options provisioning.ProvisionOptions) (*corev1.PersistentVolume, provisioning.ProvisioningState, error) {
	volume, state, err := b.Provisioner.Provision(ctx, options)
	b.once.Do(func() { close(b.created) })
	<-ctx.Done()
	return volume, state, err
}

// dirsIn lists the volume directories below root/vols, sorted.
func dirsIn(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, "vols"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, entry := range entries {
		if entry.IsDir() && entry.Name()[0] != '.' {
			dirs = append(dirs, entry.Name())
		}
	}
	slices.Sort(dirs)
	return dirs
}

func unsavedNames(t *testing.T, backend provisioning.Reclaimer) []string {
	t.Helper()
	unsaved, err := backend.Unsaved(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range unsaved {
		names = append(names, u.Volume.Name)
	}
	slices.Sort(names)
	return names
}

// crashAfterProvision runs a controller whose hostPath backend makes the
// claim's directory and dies before the PersistentVolume is created. The
// claim carries no finalizer of the controller meanwhile.
func crashAfterProvision(t *testing.T, f *fixture, root, claimName string) *corev1.PersistentVolumeClaim {
	t.Helper()
	dying := &dyingHostPath{Provisioner: hostPathOn(t, root), created: make(chan struct{})}
	first := f.start(f.config(), dying)
	f.createClass(f.class, nil)
	claim := f.createClaim(claimName, f.class, nil)
	waitCreated(t, dying.created)
	live, err := f.admin.CoreV1().PersistentVolumeClaims(f.namespace).Get(t.Context(), claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(live.Finalizers, provisioning.IntentFinalizer(f.provisioner)) {
		t.Errorf("claim finalizers %v: a backend with its own record needs no intent finalizer", live.Finalizers)
	}
	first.stop(t)
	if diff := cmp.Diff([]string{volumeName(claim)}, unsavedNames(t, dying)); diff != "" {
		t.Fatalf("unsaved volumes after the crash (-want +got):\n%s", diff)
	}
	return claim
}

// The controller dies between the hostPath backend's Provision and the PV's
// creation, and the claim is deleted meanwhile: it goes at once, and the next
// leader finds the directory in the backend's record and deletes it.
func TestRestartWithBackendRecordDeletesTheVolumeOfADeletedClaim(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	claim := crashAfterProvision(t, f, root, "orphan")
	f.deleteClaim(claim.Name)
	f.waitClaimGone(claim.Name)

	second := hostPathOn(t, root)
	f.start(f.config(), second)
	f.eventually("the orphaned directory to be deleted", func(context.Context) (bool, error) {
		return len(dirsIn(t, root)) == 0 && len(unsavedNames(t, second)) == 0, nil
	})
	if _, err := f.admin.CoreV1().PersistentVolumes().Get(t.Context(), volumeName(claim), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("want no PV for the deleted claim, got %v", err)
	}
}

// The controller dies at the same point and the claim stays: the next leader
// binds it to the one directory already made and the record is dropped.
func TestRestartWithBackendRecordFinishesTheClaim(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	claim := crashAfterProvision(t, f, root, "survivor")

	second := hostPathOn(t, root)
	f.start(f.config(), second)
	bound := f.waitBound(claim.Name)
	if diff := cmp.Diff(volumeName(claim), bound.Spec.VolumeName); diff != "" {
		t.Errorf("claim bound to the wrong volume (-want +got):\n%s", diff)
	}
	if source := f.volume(volumeName(claim)).Spec.HostPath; source == nil || source.Path != filepath.Join(root, "vols", volumeName(claim)) {
		t.Errorf("PV source %+v, want the hostPath of the directory made before the crash", source)
	}
	if diff := cmp.Diff([]string{volumeName(claim)}, dirsIn(t, root)); diff != "" {
		t.Errorf("volume directories (-want +got):\n%s", diff)
	}
	f.eventually("the record of the saved volume to go", func(context.Context) (bool, error) {
		return len(unsavedNames(t, second)) == 0, nil
	})
}

// claimWithUID is a claim that exists only in memory, for a backend called
// directly.
func claimWithUID(namespace, name string, uid types.UID) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			},
		},
	}
}

// A record is left of a hostPath volume whose PV exists, when the base is
// shared with another provisioner or the provisioner was edited since, and
// the leader now makes local volumes there: no source of the one is byte for
// byte what the other would build. The leader deletes its own orphan and
// leaves the PV's directory alone; it drops the record only when the PV is
// its own, which it compares by the directory both sources name.
func TestReclaimSparesTheDirectoryOfASavedVolume(t *testing.T) {
	tests := map[string]struct {
		// provisionedBy names who made the PV, given the leader's name.
		provisionedBy func(own string) string
		// kept: the record of the PV's directory stays.
		kept bool
	}{
		"another provisioner's PV":        {provisionedBy: func(own string) string { return own + "-other" }, kept: true},
		"its own PV, from before an edit": {provisionedBy: func(own string) string { return own }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			root := t.TempDir()
			before := hostPathOn(t, root)
			local, err := hostpath.New(hostpath.Config{
				Path:         filepath.Join(root, "vols"),
				VolumeType:   hostpath.VolumeTypeLocal,
				NodeName:     "node-1",
				HostPathRoot: root,
			}, hostpath.Options{})
			if err != nil {
				t.Fatal(err)
			}
			class := f.createClass(f.class, nil)
			// Records are gone through in the order of their PV names: the
			// orphan's comes last, so once it is deleted the other was looked at.
			id := string(uuid.NewUUID())
			theirs := claimWithUID(f.namespace, "theirs", types.UID("0"+id[1:]))
			orphan := claimWithUID(f.namespace, "orphan", types.UID("f"+id[1:]))

			saved, _, err := before.Provision(t.Context(), provisioning.ProvisionOptions{StorageClass: class, PVName: volumeName(theirs), PVC: theirs})
			if err != nil {
				t.Fatal(err)
			}
			saved.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": tc.provisionedBy(f.provisioner)}
			// Retain: the leader must not delete its own PV, released since
			// its claim exists only in memory.
			saved.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
			saved.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: theirs.Namespace, Name: theirs.Name, UID: theirs.UID}
			if _, err := f.admin.CoreV1().PersistentVolumes().Create(t.Context(), saved, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = f.admin.CoreV1().PersistentVolumes().Delete(context.Background(), saved.Name, metav1.DeleteOptions{})
			})
			if _, _, err := local.Provision(t.Context(), provisioning.ProvisionOptions{StorageClass: class, PVName: volumeName(orphan), PVC: orphan}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{volumeName(theirs), volumeName(orphan)}, dirsIn(t, root)); diff != "" {
				t.Fatalf("volume directories (-want +got):\n%s", diff)
			}

			f.start(f.config(), local)
			f.eventually("the orphan alone to be deleted", func(context.Context) (bool, error) {
				return slices.Equal([]string{volumeName(theirs)}, dirsIn(t, root)), nil
			})
			var want []string
			if tc.kept {
				want = []string{volumeName(theirs)}
			}
			if diff := cmp.Diff(want, unsavedNames(t, local)); diff != "" {
				t.Errorf("on record (-want +got):\n%s", diff)
			}
		})
	}
}
