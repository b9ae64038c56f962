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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// TestHostileClaimsRefused: claims a tenant can write against a provisioner
// whose path pattern reads their annotations, labels and names (traversal,
// control characters, names longer than a file name, a missing label),
// claims of what a directory cannot be (block volumes, snapshots, selectors)
// and a claim larger than the disk are each refused on that claim with a
// Warning Event, nothing is made outside the base, the manager keeps
// running, and a sound claim beside them is provisioned.
func TestHostileClaimsRefused(t *testing.T) {
	f := newFixture(t)
	manager := f.startManager("hostile-claims")
	pc := f.provisioner(f.prefix)
	f.waitReady(pc.Name, 1, v1alpha1.ReasonRunning)
	patterned := f.prefix + "-patterned"
	f.createClass(&storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: patterned},
		Provisioner:       string(pc.Spec.ProvisionerName),
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		Parameters:        map[string]string{"pathPattern": `{{.PVC.Namespace}}/{{index .PVC.Labels "team"}}/{{.PVC.Annotations.dir}}-{{.PVC.Name}}`},
	})
	longName := strings.Repeat("n", 253)
	tests := map[string]struct {
		class  string
		mutate func(*corev1.PersistentVolumeClaim)
		// want are parts of the Warning Event's message.
		want []string
	}{
		"an annotation climbing out": {
			class:  patterned,
			mutate: labelled("team", "../../../../etc/cron.d/x"),
			want:   []string{"refused", `path contains ".."`},
		},
		"an annotation with a line break": {
			class:  patterned,
			mutate: labelled("team", "line\nbreak"),
			want:   []string{"refused", "control or non-printable character U+000A"},
		},
		"an annotation with a NUL": {
			class:  patterned,
			mutate: labelled("team", "nul\x00byte"),
			want:   []string{"refused", "control or non-printable character U+0000"},
		},
		"an annotation longer than a path": {
			class:  patterned,
			mutate: labelled("team", strings.Repeat("d", 5000)),
			want:   []string{"cannot render path pattern", "longer than 1024 bytes"},
		},
		"a name longer than a file name": {
			class: patterned,
			mutate: func(c *corev1.PersistentVolumeClaim) {
				labelled("team", strings.Repeat("d", 10))(c)
				c.Name = longName
			},
			want: []string{"refused", "component is longer than 200 bytes"},
		},
		"a label the pattern reads missing": {
			class:  patterned,
			mutate: labelled("other", "d"),
			want:   []string{"refused", "path has an empty component"},
		},
		"a block volume": {
			class:  pc.Name,
			mutate: func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock) },
			want:   []string{"does not support block volume provisioning"},
		},
		"a snapshot to restore": {
			class: pc.Name,
			mutate: func(c *corev1.PersistentVolumeClaim) {
				c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
			},
			want: []string{"cannot fill a volume from data source VolumeSnapshot"},
		},
		"a selector": {
			class: pc.Name,
			mutate: func(c *corev1.PersistentVolumeClaim) {
				c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
			},
			want: []string{"spec.selector"},
		},
		"a claim larger than the disk": {
			class: pc.Name,
			mutate: func(c *corev1.PersistentVolumeClaim) {
				c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("8Ei")
			},
			want: []string{"not enough free space", "more than the whole file system"},
		},
	}
	f.claim("sound", pc.Name)
	f.waitBound("sound")
	// All at once, as a tenant would send them; then each is looked at.
	made := map[string]string{}
	for name, tc := range tests {
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "hostile-" + strings.Repeat("x", len(made)+1), Namespace: f.namespace},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: ptr.To(tc.class),
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
			},
		}
		tc.mutate(claim)
		if _, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Create(f.ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: cannot create claim: %v", name, err)
		}
		made[name] = claim.Name
	}
	for name, tc := range tests {
		t.Logf("%s: %s", name, f.waitEvent(f.namespace, made[name], corev1.EventTypeWarning, "ProvisioningFailed", tc.want...))
	}
	f.claim("sound-after", pc.Name)
	f.waitBound("sound-after")
	if exited, err := manager.Exited(); exited {
		t.Errorf("the manager exited: %v", err)
	}
	// Nothing was made beside the provisioner's base.
	entries, err := os.ReadDir(f.root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != filepath.Base(string(pc.Spec.Backend.HostPath.Path)) {
			t.Errorf("%s was made beside the base", e.Name())
		}
	}
}

// labelled sets a label to "a" and the annotation dir the pattern reads.
func labelled(label, dir string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Labels = map[string]string{label: "a"}
		c.Annotations = map[string]string{"dir": dir}
	}
}
