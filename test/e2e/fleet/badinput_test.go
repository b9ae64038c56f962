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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/internal/polltest"
	"github.com/provfleet/provfleet/internal/testenv"
)

// internalWording is what a refusal must never say to an administrator:
// the wording of the apiserver's or CEL's internals, not of the field.
var internalWording = []string{"type conversion error", "no such key", "no matching overload", "runtime error", "panic"}

// TestBadProvisionerConfigsRefusedAtApply applies, through the real
// apiserver with strict field validation as kubectl does, ProvisionerConfigs
// that break each bound, enum, pattern and CEL rule, and absurd durations
// and sizes: each is refused with a message that names the field, in the
// words of the field, and nothing is stored.
func TestBadProvisionerConfigsRefusedAtApply(t *testing.T) {
	const hostPath = `backend: {hostPath: {path: /data}}`
	const nfs = `backend: {nfs: {server: nfs.example.com, path: /export}}`
	tests := map[string]struct {
		spec string
		// want are the parts the refusal must hold, the field first.
		want []string
	}{
		"no provisionerName":                  {spec: `{` + hostPath + `}`, want: []string{"spec.provisionerName", "Required"}},
		"a provisionerName with a space":      {spec: `{provisionerName: "bad name", ` + hostPath + `}`, want: []string{"spec.provisionerName", "must be a valid StorageClass provisioner name"}},
		"a provisionerName too long":          {spec: `{provisionerName: ` + strings.Repeat("a", 320) + `, ` + hostPath + `}`, want: []string{"spec.provisionerName", "may not be more than"}},
		"an additional name repeating it":     {spec: `{provisionerName: a.example.com/x, additionalProvisionerNames: [a.example.com/x], ` + hostPath + `}`, want: []string{"spec", "additionalProvisionerNames must not repeat provisionerName"}},
		"additional names repeated":           {spec: `{provisionerName: x, additionalProvisionerNames: [y, y], ` + hostPath + `}`, want: []string{"spec.additionalProvisionerNames[1]", "Duplicate value"}},
		"seventeen additional names":          {spec: `{provisionerName: x, additionalProvisionerNames: [` + names(17) + `], ` + hostPath + `}`, want: []string{"spec.additionalProvisionerNames", "must have at most 16 items"}},
		"no workers":                          {spec: `{provisionerName: x, workers: 0, ` + hostPath + `}`, want: []string{"spec.workers", "greater than or equal to 1"}},
		"too many workers":                    {spec: `{provisionerName: x, workers: 257, ` + hostPath + `}`, want: []string{"spec.workers", "less than or equal to 256"}},
		"workers as a word":                   {spec: `{provisionerName: x, workers: four, ` + hostPath + `}`, want: []string{"spec.workers", "must be of type integer"}},
		"a resync of no time":                 {spec: `{provisionerName: x, resyncPeriod: 0s, ` + hostPath + `}`, want: []string{"spec.resyncPeriod", "resyncPeriod must be between 1s and 24h"}},
		"a resync of a year":                  {spec: `{provisionerName: x, resyncPeriod: 8760h, ` + hostPath + `}`, want: []string{"spec.resyncPeriod", "resyncPeriod must be between 1s and 24h"}},
		"a resync of overflowing hours":       {spec: `{provisionerName: x, resyncPeriod: 9999999999999h, ` + hostPath + `}`, want: []string{"spec.resyncPeriod", "should match"}},
		"a resync that is no duration":        {spec: `{provisionerName: x, resyncPeriod: soon, ` + hostPath + `}`, want: []string{"spec.resyncPeriod", "should match"}},
		"a negative failure threshold":        {spec: `{provisionerName: x, retry: {provisionFailureThreshold: -1}, ` + hostPath + `}`, want: []string{"spec.retry.provisionFailureThreshold", "greater than or equal to 0"}},
		"a zero API budget":                   {spec: `{provisionerName: x, retry: {qps: 0}, ` + hostPath + `}`, want: []string{"spec.retry.qps", "greater than or equal to 1"}},
		"a backoff of centuries":              {spec: `{provisionerName: x, retry: {maxDelay: 1000000h}, ` + hostPath + `}`, want: []string{"spec.retry.maxDelay"}},
		"an unknown save mode":                {spec: `{provisionerName: x, volumeSave: {mode: Sometimes}, ` + hostPath + `}`, want: []string{"spec.volumeSave.mode", "Unsupported value", "Sometimes"}},
		"a provision timeout of no time":      {spec: `{provisionerName: x, timeouts: {provision: 0s}, ` + hostPath + `}`, want: []string{"spec.timeouts.provision"}},
		"a lease shorter than its renewal":    {spec: `{provisionerName: x, leaderElection: {leaseDuration: 5s, renewDeadline: 10s}, ` + hostPath + `}`, want: []string{"spec.leaderElection"}},
		"no backend":                          {spec: `{provisionerName: x, backend: {}}`, want: []string{"spec.backend", "exactly one"}},
		"two backends":                        {spec: `{provisionerName: x, backend: {hostPath: {path: /data}, nfs: {server: s, path: /e}}}`, want: []string{"spec.backend", "exactly one"}},
		"a relative hostPath":                 {spec: `{provisionerName: x, backend: {hostPath: {path: data}}}`, want: []string{"spec.backend.hostPath.path", "must be an absolute path"}},
		"a hostPath climbing out":             {spec: `{provisionerName: x, backend: {hostPath: {path: /data/../etc}}}`, want: []string{"spec.backend.hostPath.path", "must not contain a '..' segment"}},
		"an unknown volume type":              {spec: `{provisionerName: x, backend: {hostPath: {path: /data, volumeType: Block}}}`, want: []string{"spec.backend.hostPath.volumeType", "Unsupported value", "Block"}},
		"an unknown onDelete":                 {spec: `{provisionerName: x, backend: {hostPath: {path: /data, onDelete: Shred}}}`, want: []string{"spec.backend.hostPath.onDelete", "Unsupported value", "Shred"}},
		"a pattern climbing out":              {spec: `{provisionerName: x, backend: {hostPath: {path: /data, pathPattern: "../{{.PVC.Name}}"}}}`, want: []string{"spec.backend.hostPath.pathPattern"}},
		"a mode that is no octal":             {spec: `{provisionerName: x, backend: {hostPath: {path: /data, mode: "0999"}}}`, want: []string{"spec.backend.hostPath.mode"}},
		"a negative uid":                      {spec: `{provisionerName: x, backend: {hostPath: {path: /data, uid: -1}}}`, want: []string{"spec.backend.hostPath.uid", "greater than or equal to 0"}},
		"nodeName and nodeSelector":           {spec: `{provisionerName: x, backend: {hostPath: {path: /data, nodeName: a, nodeSelector: {matchLabels: {a: b}}}}}`, want: []string{"spec.backend.hostPath", "nodeName and nodeSelector are exclusive"}},
		"a node name in capitals":             {spec: `{provisionerName: x, backend: {hostPath: {path: /data, nodeName: Node-A}}}`, want: []string{"spec.backend.hostPath.nodeName", "should match"}},
		"an unknown selector operator":        {spec: `{provisionerName: x, backend: {hostPath: {path: /data, nodeSelector: {matchExpressions: [{key: a, operator: Near}]}}}}`, want: []string{"spec.backend.hostPath.nodeSelector.matchExpressions[0].operator"}},
		"a node path of no node":              {spec: `{provisionerName: x, backend: {hostPath: {path: /data, nodePaths: [{path: /other}]}}}`, want: []string{"spec.backend.hostPath.nodePaths[0]", "exactly one of nodes and nodeSelector must be set"}},
		"an unknown node removal policy":      {spec: `{provisionerName: x, backend: {hostPath: {path: /data, nodeRemoval: {policy: Forget}}}}`, want: []string{"spec.backend.hostPath.nodeRemoval.policy", "Unsupported value"}},
		"a shared file system of local":       {spec: `{provisionerName: x, backend: {hostPath: {path: /data, sharedFileSystem: true}}}`, want: []string{"spec.backend.hostPath", "set volumeType HostPath"}},
		"a StorageClass listed twice":         {spec: `{provisionerName: x, backend: {hostPath: {path: /data, storageClasses: [{storageClassName: a, path: /a}, {storageClassName: a, path: /b}]}}}`, want: []string{"spec.backend.hostPath.storageClasses[1]", "Duplicate value"}},
		"an unknown local-path pattern":       {spec: `{provisionerName: x, backend: {hostPath: {path: /data, localPathPatterns: [Group]}}}`, want: []string{"spec.backend.hostPath.localPathPatterns[0]", "Unsupported value"}},
		"a capacity of minus one byte":        {spec: `{provisionerName: x, backend: {hostPath: {path: /data, capacity: {maxBytes: "-1"}}}}`, want: []string{"spec.backend.hostPath.capacity"}},
		"a capacity that is no quantity":      {spec: `{provisionerName: x, backend: {hostPath: {path: /data, capacity: {maxBytes: lots}}}}`, want: []string{"spec.backend.hostPath.capacity.maxBytes"}},
		"an NFS port beyond 65535":            {spec: `{provisionerName: x, backend: {nfs: {server: s, path: /e, port: 70000}}}`, want: []string{"spec.backend.nfs.port", "less than or equal to 65535"}},
		"an NFS server with a space":          {spec: `{provisionerName: x, backend: {nfs: {server: "nfs server", path: /e}}}`, want: []string{"spec.backend.nfs.server"}},
		"an nfs-subdir origin of no name":     {spec: `{provisionerName: x, backend: {nfs: {server: s, path: /e, nfsSubdir: {provisionerName: old, version: v4.0.2}}}}`, want: []string{"spec", "nfsSubdir.provisionerName must be one of additionalProvisionerNames"}},
		"an nfs-subdir version of no release": {spec: `{provisionerName: x, additionalProvisionerNames: [old], backend: {nfs: {server: s, path: /e, nfsSubdir: {provisionerName: old, version: latest}}}}`, want: []string{"spec.backend.nfs.nfsSubdir.version"}},
		"a misspelt field":                    {spec: `{provisionerName: x, ` + nfs + `, worker: 3}`, want: []string{`unknown field "spec.worker"`}},
		"a custom backend of no driver":       {spec: `{provisionerName: x, backend: {custom: {}}}`, want: []string{"spec.backend.custom.driver", "Required"}},
	}
	env := testenv.Env(t)
	client, err := dynamic.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	resource := client.Resource(schema.GroupVersionResource{Group: v1alpha1.SchemeGroupVersion.Group, Version: v1alpha1.SchemeGroupVersion.Version, Resource: "provisionerconfigs"})
	i := 0
	for name, tc := range tests {
		i++
		t.Run(name, func(t *testing.T) {
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatalf("the test's spec: %v", err)
			}
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "ProvisionerConfig",
				"metadata": map[string]any{"name": fmt.Sprintf("bad-input-%d", i)}, "spec": spec,
			}}
			created, err := resource.Create(t.Context(), obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
			if err == nil {
				_ = resource.Delete(t.Context(), created.GetName(), metav1.DeleteOptions{})
				t.Fatalf("applied, want refused naming %q", tc.want[0])
			}
			for _, part := range tc.want {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("refusal %q does not say %q", err, part)
				}
			}
			for _, internal := range internalWording {
				if strings.Contains(strings.ToLower(err.Error()), internal) {
					t.Errorf("refusal %q speaks of %q", err, internal)
				}
			}
		})
	}
}

// names lists n provisioner names.
func names(n int) string {
	var list []string
	for i := range n {
		list = append(list, fmt.Sprintf("n%d", i))
	}
	return strings.Join(list, ", ")
}

// TestBadProvisionerConfigsReportedNotReady applies ProvisionerConfigs that
// the schema takes but that cannot run: a name, Lease or base another
// object has, a hostPath outside the node agents' root or on a file, a path
// pattern that always climbs out, nodes that none selects, an NFS server
// that answers nothing and a custom driver no manager knows. Each is
// reported Ready=False with a reason and a message, and a sound
// ProvisionerConfig beside them keeps provisioning.
func TestBadProvisionerConfigsReportedNotReady(t *testing.T) {
	f := newFixture(t)
	f.startManager("bad-ready")
	sound := f.provisioner(f.prefix + "-sound")
	f.waitReady(sound.Name, 1, v1alpha1.ReasonRunning)
	// creationTimestamp has a resolution of one second: the bad objects
	// are the newer ones.
	time.Sleep(time.Second)
	file := filepath.Join(f.root, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		mutate func(*v1alpha1.ProvisionerConfig)
		reason string
		// want is a part of the Ready condition's message.
		want string
	}{
		"the provisioner name of another": {
			mutate: func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.ProvisionerName = sound.Spec.ProvisionerName },
			reason: v1alpha1.ReasonProvisionerNameConflict, want: sound.Name,
		},
		"an additional name of another's": {
			mutate: func(pc *v1alpha1.ProvisionerConfig) {
				pc.Spec.AdditionalProvisionerNames = []v1alpha1.ProvisionerName{sound.Spec.ProvisionerName}
			},
			reason: v1alpha1.ReasonProvisionerNameConflict, want: sound.Name,
		},
		"the Lease of another's name": {
			mutate: func(pc *v1alpha1.ProvisionerConfig) {
				pc.Spec.ProvisionerName = v1alpha1.ProvisionerName(strings.Replace(string(sound.Spec.ProvisionerName), "/", "-", 1))
			},
			reason: v1alpha1.ReasonLeaseNameConflict, want: sound.Name,
		},
		"a base inside another's": {
			mutate: func(pc *v1alpha1.ProvisionerConfig) {
				pc.Spec.Backend.HostPath.Path = sound.Spec.Backend.HostPath.Path + "/inner"
			},
			reason: v1alpha1.ReasonBackendOverlap, want: sound.Name,
		},
		"a StorageClass base around another's": {
			mutate: func(pc *v1alpha1.ProvisionerConfig) {
				pc.Spec.Backend.HostPath.StorageClasses = []v1alpha1.HostPathStorageClass{{StorageClassName: "fast", Path: v1alpha1.AbsolutePath(f.root)}}
			},
			reason: v1alpha1.ReasonBackendOverlap, want: "storageClasses[0].path",
		},
		"a hostPath outside the agents' root": {
			mutate: func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Backend.HostPath.Path = "/etc/provfleet-bad-input" },
			reason: v1alpha1.ReasonInvalidSpec, want: "outside the host path root",
		},
		"a hostPath that is a file": {
			mutate: func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Backend.HostPath.Path = v1alpha1.AbsolutePath(file) },
			reason: v1alpha1.ReasonInvalidSpec, want: "not a directory",
		},
		"a pattern that always climbs out": {
			mutate: func(pc *v1alpha1.ProvisionerConfig) { pc.Spec.Backend.HostPath.PathPattern = `{{".."}}/x` },
			reason: v1alpha1.ReasonInvalidSpec, want: `renders ".." for every claim`,
		},
		"nodes that none selects": {
			mutate: func(pc *v1alpha1.ProvisionerConfig) {
				pc.Spec.Backend.HostPath.NodeSelector = &v1alpha1.NodeLabelSelector{MatchLabels: map[string]string{"provfleet.io/no-such-label": "x"}}
			},
			reason: v1alpha1.ReasonNoNodeServed, want: "no node is selected",
		},
		"an NFS server that answers nothing": {
			mutate: func(pc *v1alpha1.ProvisionerConfig) {
				pc.Spec.Backend = v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{Server: "127.0.0.1", Port: 1, Path: "/export"}}
			},
			reason: v1alpha1.ReasonBackendUnavailable, want: "127.0.0.1",
		},
		"a custom driver no manager knows": {
			mutate: func(pc *v1alpha1.ProvisionerConfig) {
				pc.Spec.Backend = v1alpha1.BackendSpec{Custom: &v1alpha1.CustomBackend{Driver: "example.com/unknown"}}
			},
			// Another build of the manager may have it.
			reason: v1alpha1.ReasonBackendUnavailable, want: `"custom/example.com/unknown": no such backend in this manager`,
		},
	}
	i := 0
	for name, tc := range tests {
		i++
		t.Run(name, func(t *testing.T) {
			pc := f.provisioner(fmt.Sprintf("%s-%d", f.prefix, i), tc.mutate)
			polltest.Until(f.ctx, t, fmt.Sprintf("%s reported Ready=False %s naming %q", pc.Name, tc.reason, tc.want), 200*time.Millisecond, waitTimeout, func(ctx context.Context) (bool, error) {
				got, err := f.pcfg.ProvfleetV1alpha1().ProvisionerConfigs().Get(ctx, pc.Name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
				if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != tc.reason || !strings.Contains(ready.Message, tc.want) {
					return false, fmt.Errorf("Ready is %+v", ready)
				}
				return true, nil
			})
			// Each case alone: a base around the root would overlap the next.
			f.deleteConfig(pc.Name)
		})
	}
	f.claim("beside-the-bad", sound.Name)
	f.waitBound("beside-the-bad")
	f.waitReady(sound.Name, 1, v1alpha1.ReasonRunning)
}
