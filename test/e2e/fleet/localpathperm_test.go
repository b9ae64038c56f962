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
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// TestLocalPathPatterns: a hostPath ProvisionerConfig with
// localPathPatterns Owner and Mode, served by a node agent, gives the
// directories of local-path-provisioner's classes the mode and owner their
// userPattern, groupPattern and permPattern render for each claim, from a
// class parameter or else its annotation, as local-path's setup script
// with its chown and chmod lines did; a pattern that cannot be rendered
// for a claim refuses it with an Event naming the pattern. The owner is
// checked only where the test runs as root, as the agents do.
func TestLocalPathPatterns(t *testing.T) {
	f := newFixture(t)
	node := f.prefix + "-node"
	f.node(node, nil)
	disk := filepath.Join(f.root, "disk")
	if err := os.MkdirAll(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	f.startAgent("agent-lpperm", node, disk)
	f.startManagerRole("lpperm-manager")
	base := filepath.Join(disk, "volumes")
	f.provisioner(f.prefix, func(pc *v1alpha1.ProvisionerConfig) {
		hp := pc.Spec.Backend.HostPath
		hp.Path, hp.NodeName = v1alpha1.AbsolutePath(base), node
		hp.LocalPathPatterns = []v1alpha1.LocalPathPattern{v1alpha1.LocalPathPatternOwner, v1alpha1.LocalPathPatternMode}
	})
	f.waitReady(f.prefix, 1, v1alpha1.ReasonRunning)

	oldName := "cluster.local/" + f.prefix
	f.answerTo(f.prefix, oldName)
	classes := map[string]struct{ params, annotations map[string]string }{
		"params": {params: map[string]string{
			"userPattern": "{{.PVC.Annotations.uid}}", "groupPattern": "{{index .PVC.Labels `gid`}}", "permPattern": " {{.PVC.Annotations.perm}}\n",
		}},
		"annotations": {annotations: map[string]string{"groupPattern": "3000", "permPattern": "2770"}},
	}
	for name, c := range classes {
		f.createClass(&storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: f.prefix + "-" + name, Annotations: c.annotations},
			Provisioner:       oldName,
			Parameters:        c.params,
			ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		})
	}
	onNode := func(annotations map[string]string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": node}
			for k, v := range annotations {
				c.Annotations[k] = v
			}
		}
	}
	f.labelledClaim("from-params", f.prefix+"-params", map[string]string{"gid": "2000"}, onNode(map[string]string{"uid": "1000", "perm": "0750"}))
	f.labelledClaim("from-annotations", f.prefix+"-annotations", nil, onNode(nil))
	f.labelledClaim("no-uid", f.prefix+"-params", map[string]string{"gid": "2000"}, onNode(map[string]string{"perm": "0750"}))
	f.waitBound("from-params", "from-annotations")
	f.waitEvent(f.namespace, "no-uid", corev1.EventTypeWarning, provisioning.EventProvisioningFailed, "cannot render userPattern", "uid")

	type directory struct {
		Mode     os.FileMode
		UID, GID uint32
	}
	agent := directory{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())} //nolint:gosec // ids fit
	want := map[string]directory{
		"from-params":      {Mode: os.ModeDir | 0o750, UID: 1000, GID: 2000},
		"from-annotations": {Mode: os.ModeDir | os.ModeSetgid | 0o770, UID: agent.UID, GID: 3000},
	}
	got := map[string]directory{}
	for claim := range want {
		pv := f.boundVolume(claim)
		info, err := os.Stat(pv.Spec.HostPath.Path)
		if err != nil {
			t.Fatalf("the directory of claim %s: %v", claim, err)
		}
		st, _ := info.Sys().(*syscall.Stat_t)
		got[claim] = directory{Mode: info.Mode(), UID: st.Uid, GID: st.Gid}
	}
	if os.Geteuid() != 0 {
		t.Log("Not root: the owner is not checked, since only root may give a directory away")
		for claim, d := range want {
			want[claim] = directory{Mode: d.Mode, UID: got[claim].UID, GID: got[claim].GID}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mode and owner of each claim's directory (-want +got):\n%s", diff)
	}
}
