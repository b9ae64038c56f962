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

package v1alpha1_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/client-go/util/jsonpath"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// crdUnderTest is the generated CRD with the validators the apiserver builds
// from it.
type crdUnderTest struct {
	crd        *apiextensionsv1.CustomResourceDefinition
	version    *apiextensionsv1.CustomResourceDefinitionVersion
	structural *structuralschema.Structural
	schema     validation.SchemaValidator
	status     validation.SchemaValidator
	cel        *cel.Validator
}

func loadCRD(t *testing.T) *crdUnderTest {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "crds", "*.yaml"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("want exactly one CRD file in crds/, got %v (%v)", paths, err)
	}
	data, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(crd); err != nil {
		t.Fatalf("cannot decode %s: %v", paths[0], err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("want one version, got %d", len(crd.Spec.Versions))
	}
	version := &crd.Spec.Versions[0]

	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(version.Schema.OpenAPIV3Schema, internal, nil); err != nil {
		t.Fatal(err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatalf("schema is not structural: %v", err)
	}
	schemaValidator, _, err := validation.NewSchemaValidator(internal)
	if err != nil {
		t.Fatal(err)
	}
	statusProps := internal.Properties["status"]
	statusValidator, _, err := validation.NewSchemaValidator(&statusProps)
	if err != nil {
		t.Fatal(err)
	}
	return &crdUnderTest{
		crd:        crd,
		version:    version,
		structural: structural,
		schema:     schemaValidator,
		status:     statusValidator,
		cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}
}

// admit does to a request body what the apiserver does on create (old == nil)
// or update: prune, default, then validate with the OpenAPI schema, list types
// and CEL rules. It returns the stored object and the refusals.
func (c *crdUnderTest) admit(t *testing.T, obj, old map[string]any) (map[string]any, []string) {
	t.Helper()
	var refusals []string
	for _, path := range pruning.PruneWithOptions(obj, c.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		refusals = append(refusals, "unknown field "+path)
	}
	defaulting.Default(obj, c.structural)

	var errs field.ErrorList
	if old == nil {
		errs = validation.ValidateCustomResource(nil, obj, c.schema)
	} else {
		errs = validation.ValidateCustomResourceUpdate(nil, obj, old, c.schema)
	}
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, c.structural, obj)...)
	if hasBlockingError(errs) {
		errs = append(errs, field.Invalid(nil, nil, celSkipped))
	} else {
		var oldObj any
		if old != nil {
			oldObj = old
		}
		celErrs, _ := c.cel.Validate(context.Background(), nil, c.structural, obj, oldObj, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	for _, err := range errs {
		refusals = append(refusals, err.Error())
	}
	return obj, refusals
}

// celSkipped is the apiserver's note when it skips the CEL rules.
const celSkipped = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"

// hasBlockingError tells whether the apiserver skips CEL rules for these errors.
func hasBlockingError(errs field.ErrorList) bool {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

func decode(t *testing.T, doc string) map[string]any {
	t.Helper()
	obj := map[string]any{}
	if err := yaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096).Decode(&obj); err != nil {
		t.Fatalf("cannot decode test object: %v", err)
	}
	return obj
}

// withSpec wraps a spec, written as YAML, into a ProvisionerConfig.
func withSpec(spec string) string {
	return "apiVersion: provfleet.io/v1alpha1\nkind: ProvisionerConfig\nmetadata: {name: test}\nspec: " + spec
}

func typed(t *testing.T, obj map[string]any) *v1alpha1.ProvisionerConfig {
	t.Helper()
	out := &v1alpha1.ProvisionerConfig{}
	// Strict: a CRD field the Go types do not know is an error.
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj, out, true); err != nil {
		t.Fatalf("stored object does not fit the Go types: %v", err)
	}
	return out
}

// designExample is the example of the API contract in DESIGN.md, without
// status (the main resource ignores it).
const designExample = `
apiVersion: provfleet.io/v1alpha1
kind: ProvisionerConfig
metadata:
  name: fast-local
spec:
  provisionerName: provfleet.io/fast-local
  additionalProvisionerNames: []
  paused: false
  workers: 4
  resyncPeriod: 15m
  finalizer: true
  retry:
    provisionFailureThreshold: 15
    deleteFailureThreshold: 15
    exponentialBackoff: true
    initialDelay: 15s
    maxDelay: 1000s
    qps: 10
    burst: 100
  volumeSave:
    mode: Retry
    retries: 5
    interval: 10s
  leaderElection:
    leaseDuration: 15s
    renewDeadline: 10s
    retryPeriod: 2s
  backend:
    hostPath:
      path: /var/lib/provfleet/fast-local
      volumeType: Local
      nodeName: ""
      pathPattern: ""
      onDelete: Delete
`

const minimal = `
apiVersion: provfleet.io/v1alpha1
kind: ProvisionerConfig
metadata:
  name: fast-local
spec:
  provisionerName: provfleet.io/fast-local
  backend:
    hostPath:
      path: /var/lib/provfleet/fast-local
`

func duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// documentedDefaults is the spec of DESIGN.md, which lists the defaults.
func documentedDefaults() v1alpha1.ProvisionerConfigSpec {
	return v1alpha1.ProvisionerConfigSpec{
		ProvisionerName: "provfleet.io/fast-local",
		Workers:         4,
		ResyncPeriod:    duration(15 * time.Minute),
		Finalizer:       new(true),
		Retry: v1alpha1.RetrySpec{
			ProvisionFailureThreshold: new(int32(15)),
			DeleteFailureThreshold:    new(int32(15)),
			ExponentialBackoff:        new(true),
			InitialDelay:              duration(15 * time.Second),
			MaxDelay:                  duration(1000 * time.Second),
			QPS:                       10,
			Burst:                     100,
		},
		VolumeSave: v1alpha1.VolumeSaveSpec{
			Mode:     v1alpha1.VolumeSaveRetry,
			Retries:  5,
			Interval: duration(10 * time.Second),
		},
		// Not in DESIGN.md: added later.
		Timeouts: v1alpha1.TimeoutsSpec{
			Provision: duration(2 * time.Minute),
			Delete:    duration(2 * time.Minute),
			Drain:     duration(10 * time.Second),
		},
		LeaderElection: v1alpha1.LeaderElectionSpec{
			LeaseDuration: duration(15 * time.Second),
			RenewDeadline: duration(10 * time.Second),
			RetryPeriod:   duration(2 * time.Second),
		},
		Backend: v1alpha1.BackendSpec{HostPath: &v1alpha1.HostPathBackend{
			Path:            "/var/lib/provfleet/fast-local",
			NodeAffinityKey: "kubernetes.io/hostname",
			VolumeType:      v1alpha1.HostPathVolumeLocal,
			OnDelete:        v1alpha1.OnDeleteDelete,
		}},
	}
}

func TestCRDPassesAPIServerChecks(t *testing.T) {
	c := loadCRD(t)
	crd := c.crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	crd.Status.StoredVersions = []string{c.version.Name}
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil); err != nil {
		t.Fatal(err)
	}
	// Includes compiling every CEL rule and checking its estimated cost.
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), internal); len(errs) > 0 {
		t.Errorf("the apiserver would refuse the CRD:\n%s", errs.ToAggregate())
	}
	names := crd.Spec.Names
	got := []string{crd.Spec.Group, string(crd.Spec.Scope), names.Kind, names.Plural, strings.Join(names.ShortNames, ","), c.version.Name}
	want := []string{"provfleet.io", "Cluster", "ProvisionerConfig", "provisionerconfigs", "pcfg", "v1alpha1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if c.version.Subresources == nil || c.version.Subresources.Status == nil {
		t.Error("want a status subresource")
	}
}

func TestDefaults(t *testing.T) {
	c := loadCRD(t)
	for name, doc := range map[string]string{"DESIGN.md example": designExample, "minimal": minimal} {
		t.Run(name, func(t *testing.T) {
			obj, refusals := c.admit(t, decode(t, doc), nil)
			if len(refusals) > 0 {
				t.Fatalf("refused: %q", refusals)
			}
			got := typed(t, obj).Spec
			if diff := cmp.Diff(documentedDefaults(), got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("spec after defaulting (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNestedDefaults(t *testing.T) {
	c := loadCRD(t)
	doc := withSpec(`{provisionerName: a.example/b, retry: {qps: 3}, leaderElection: {leaseDuration: 30s},
  backend: {nfs: {server: nfs.example, path: /export, mountPath: /mnt/nfs}}}`)
	obj, refusals := c.admit(t, decode(t, doc), nil)
	if len(refusals) > 0 {
		t.Fatalf("refused: %q", refusals)
	}
	want := documentedDefaults()
	want.ProvisionerName = "a.example/b"
	want.Retry.QPS = 3
	want.LeaderElection.LeaseDuration = duration(30 * time.Second)
	want.Backend = v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{
		Server: "nfs.example", Path: "/export", MountPath: "/mnt/nfs", OnDelete: v1alpha1.OnDeleteDelete,
	}}
	if diff := cmp.Diff(want, typed(t, obj).Spec); diff != "" {
		t.Errorf("spec after defaulting (-want +got):\n%s", diff)
	}
}

const badProvisionerName = "must be a valid StorageClass provisioner name: an optional DNS subdomain prefix and '/', then at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"

func TestValidation(t *testing.T) {
	const hostPath = `backend: {hostPath: {path: /data}}`
	tests := map[string]struct {
		spec    string
		oldSpec string // set: an update from this spec
		want    []string
	}{
		"every backend and option": {
			spec: `{provisionerName: Example.COM/Nfs_1, additionalProvisionerNames: [example.com/old, legacy], paused: true,
  workers: 256, resyncPeriod: 1h30m, finalizer: false,
  retry: {provisionFailureThreshold: 0, deleteFailureThreshold: 0, exponentialBackoff: false, initialDelay: 1s, maxDelay: 1s, qps: 1, burst: 1},
  volumeSave: {mode: RetryForever, retries: 100, interval: 500ms},
  timeouts: {provision: 1h, delete: 1s, drain: 10m},
  leaderElection: {leaseDuration: 3s, renewDeadline: 2500ms, retryPeriod: 2s},
  backend: {nfs: {server: "fd00::1", path: /export/k8s, mountPath: /mnt/nfs, pathPattern: "{{.PVC.Namespace}}/{{.PVC.Name}}",
    onDelete: Archive, mountOptions: [nfsvers=4.1, hard], capacity: {storage: 1Ti, maxVolumes: 1000}}}}`,
		},
		"custom backend": {
			spec: `{provisionerName: example.com/custom, backend: {custom: {driver: example.com/lvm, parameters: {vg: fast}}}}`,
		},
		"hostPath with capacity": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, volumeType: HostPath, nodeName: node-1.example, onDelete: Retain, capacity: {maxVolumes: 3}}}}`,
		},
		"hostPath with several paths per node and a nodeAffinityKey": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, additionalPaths: [/data2, /data3], nodeAffinityKey: topology.example.com/rack,
  nodePaths: [{nodes: [node-1], path: /mnt/fast, additionalPaths: [/mnt/slow]}]}}}`,
		},
		"nodeAffinityKey that is no label name": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, nodeAffinityKey: "rack key"}}}`,
			want: []string{`spec.backend.hostPath.nodeAffinityKey: Invalid value: "rack key": spec.backend.hostPath.nodeAffinityKey in body should match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'`},
		},
		"nodeAffinityKey of a name longer than 63": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, nodeAffinityKey: example.com/` + strings.Repeat("a", 64) + `}}}`,
			want: []string{`spec.backend.hostPath.nodeAffinityKey: Invalid value: "example.com/` + strings.Repeat("a", 64) + `": must be a qualified label name: a prefix of at most 253 characters and a name of at most 63`},
		},
		"additionalPaths relative": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, additionalPaths: [data2]}}}`,
			want: []string{`spec.backend.hostPath.additionalPaths[0]: Invalid value: "data2": must be an absolute path`},
		},
		"hostPath on selected nodes": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data,
  nodeSelector: {matchLabels: {disk: ssd}, matchExpressions: [{key: zone, operator: In, values: [a, b]}, {key: spot, operator: DoesNotExist}]},
  nodePaths: [{nodes: [node-1, node-2], path: /mnt/fast}, {nodeSelector: {matchLabels: {disk: nvme}}, path: /nvme}],
  nodeRemoval: {policy: Delete, gracePeriod: 1h}}}}`,
		},
		"hostPath on a shared file system": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /mnt/shared, sharedFileSystem: true, volumeType: HostPath, capacity: {maxVolumes: 3}}}}`,
		},
		"a shared file system of local volumes": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /mnt/shared, sharedFileSystem: true}}}`,
			want: []string{`spec.backend.hostPath: Invalid value: sharedFileSystem volumes have no node affinity, which a local volume requires: set volumeType HostPath`},
		},
		"a shared file system of selected nodes": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /mnt/shared, sharedFileSystem: true, volumeType: HostPath, nodeSelector: {matchLabels: {a: b}}}}}`,
			want: []string{`spec.backend.hostPath: Invalid value: sharedFileSystem serves one path that every node mounts: nodeName, nodeSelector, nodePaths, nodeRemoval and additionalPaths do not apply`},
		},
		"a shared file system with a nodeAffinityKey": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /mnt/shared, sharedFileSystem: true, volumeType: HostPath, nodeAffinityKey: rack}}}`,
			want: []string{`spec.backend.hostPath: Invalid value: sharedFileSystem volumes are pinned to no node: nodeAffinityKey does not apply`},
		},
		"base directories of StorageClasses": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, storageClasses: [
  {storageClassName: fast, path: /mnt/fast, additionalPaths: [/mnt/fast2], nodePaths: [{nodes: [node-1], path: /nvme}]},
  {storageClassName: slow, path: /data}]}}}`,
		},
		"a StorageClass listed twice": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, storageClasses: [{storageClassName: fast, path: /a}, {storageClassName: fast, path: /b}]}}}`,
			want: []string{`spec.backend.hostPath.storageClasses[1]: Duplicate value: {"storageClassName":"fast"}`},
		},
		"a StorageClass name that names none": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, storageClasses: [{storageClassName: Fast, path: /a}]}}}`,
			want: []string{`spec.backend.hostPath.storageClasses[0].storageClassName: Invalid value: "Fast": spec.backend.hostPath.storageClasses[0].storageClassName in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'`},
		},
		"a StorageClass path relative": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, storageClasses: [{storageClassName: fast, path: fast}]}}}`,
			want: []string{`spec.backend.hostPath.storageClasses[0].path: Invalid value: "fast": must be an absolute path`},
		},
		"StorageClasses on a shared file system": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /mnt/shared, sharedFileSystem: true, volumeType: HostPath, storageClasses: [{storageClassName: fast, path: /mnt/fast}]}}}`,
		},
		"a StorageClass of several paths on a shared file system": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /mnt/shared, sharedFileSystem: true, volumeType: HostPath, storageClasses: [{storageClassName: fast, path: /mnt/fast, additionalPaths: [/mnt/fast2]}]}}}`,
			want: []string{`spec.backend.hostPath: Invalid value: sharedFileSystem serves one path per StorageClass: storageClasses[].additionalPaths and nodePaths do not apply`},
		},
		"nodeName with nodeSelector": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, nodeName: node-a, nodeSelector: {matchLabels: {a: b}}}}}`,
			want: []string{`spec.backend.hostPath: Invalid value: nodeName and nodeSelector are exclusive: nodeName serves one node, nodeSelector a set`},
		},
		"node path naming no node": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, nodePaths: [{path: /other}]}}}`,
			want: []string{`spec.backend.hostPath.nodePaths[0]: Invalid value: exactly one of nodes and nodeSelector must be set`},
		},
		"node path naming nodes twice": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, nodePaths: [{nodes: [a], nodeSelector: {}, path: /other}]}}}`,
			want: []string{`spec.backend.hostPath.nodePaths[0]: Invalid value: exactly one of nodes and nodeSelector must be set`},
		},
		"relative node path": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, nodePaths: [{nodes: [a], path: other}]}}}`,
			want: []string{`spec.backend.hostPath.nodePaths[0].path: Invalid value: "other": must be an absolute path`},
		},
		"In without values": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, nodeSelector: {matchExpressions: [{key: zone, operator: In}]}}}}`,
			want: []string{`spec.backend.hostPath.nodeSelector.matchExpressions[0]: Invalid value: values must be set for In and NotIn, and only for them`},
		},
		"unknown operator and removal policy": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, nodeSelector: {matchExpressions: [{key: zone, operator: Gt, values: ["1"]}]}, nodeRemoval: {policy: Forget}}}}`,
			want: []string{
				`spec.backend.hostPath.nodeSelector.matchExpressions[0].operator: Unsupported value: "Gt": supported values: "In", "NotIn", "Exists", "DoesNotExist"`,
				`spec.backend.hostPath.nodeRemoval.policy: Unsupported value: "Forget": supported values: "Report", "Delete"`,
				"<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
			},
		},
		"two backends": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data}, custom: {driver: d}}}`,
			want: []string{`spec.backend: Invalid value: exactly one backend must be set: hostPath, nfs or custom`},
		},
		"no backend": {
			spec: `{provisionerName: x, backend: {}}`,
			want: []string{`spec.backend: Invalid value: exactly one backend must be set: hostPath, nfs or custom`},
		},
		"no provisionerName": {
			spec: `{` + hostPath + `}`,
			want: []string{
				`spec.provisionerName: Required value`,
				`<nil>: Invalid value: null: ` + celSkipped,
			},
		},
		"provisioner name with a space": {
			spec: `{provisionerName: "provfleet.io/fast local", ` + hostPath + `}`,
			want: []string{`spec.provisionerName: Invalid value: "provfleet.io/fast local": ` + badProvisionerName},
		},
		"provisioner name part too long": {
			spec: `{provisionerName: "provfleet.io/` + strings.Repeat("a", 64) + `", ` + hostPath + `}`,
			want: []string{`spec.provisionerName: Invalid value: "provfleet.io/` + strings.Repeat("a", 64) + `": ` + badProvisionerName},
		},
		"bad additional provisioner name": {
			spec: `{provisionerName: x, additionalProvisionerNames: [ok, "bad_prefix/x"], ` + hostPath + `}`,
			want: []string{`spec.additionalProvisionerNames[1]: Invalid value: "bad_prefix/x": ` + badProvisionerName},
		},
		"duplicate additional provisioner names": {
			spec: `{provisionerName: x, additionalProvisionerNames: [b, b], ` + hostPath + `}`,
			want: []string{`spec.additionalProvisionerNames[1]: Duplicate value: "b"`},
		},
		"additional name repeats provisionerName": {
			spec: `{provisionerName: x, additionalProvisionerNames: [x], ` + hostPath + `}`,
			want: []string{`spec: Invalid value: additionalProvisionerNames must not repeat provisionerName`},
		},
		"renewDeadline equal to leaseDuration": {
			spec: `{provisionerName: x, leaderElection: {leaseDuration: 10s}, ` + hostPath + `}`,
			want: []string{`spec.leaderElection: Invalid value: renewDeadline must be less than leaseDuration`},
		},
		"retryPeriod too close to renewDeadline": {
			spec: `{provisionerName: x, leaderElection: {renewDeadline: 2400ms}, ` + hostPath + `}`,
			want: []string{`spec.leaderElection: Invalid value: retryPeriod must be less than renewDeadline / 1.2 (client-go's jitter factor)`},
		},
		"negative workers": {
			spec: `{provisionerName: x, workers: -1, ` + hostPath + `}`,
			want: []string{`spec.workers: Invalid value: -1: spec.workers in body should be greater than or equal to 1`},
		},
		"negative threshold": {
			spec: `{provisionerName: x, retry: {provisionFailureThreshold: -1}, ` + hostPath + `}`,
			want: []string{`spec.retry.provisionFailureThreshold: Invalid value: -1: spec.retry.provisionFailureThreshold in body should be greater than or equal to 0`},
		},
		"bad onDelete": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, onDelete: Shred}}}`,
			want: []string{
				`spec.backend.hostPath.onDelete: Unsupported value: "Shred": supported values: "Delete", "Retain", "Archive"`,
				`<nil>: Invalid value: null: ` + celSkipped,
			},
		},
		"relative hostPath": {
			spec: `{provisionerName: x, backend: {hostPath: {path: data/x}}}`,
			want: []string{`spec.backend.hostPath.path: Invalid value: "data/x": must be an absolute path`},
		},
		"hostPath with a .. segment": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data/../etc}}}`,
			want: []string{`spec.backend.hostPath.path: Invalid value: "/data/../etc": must not contain a '..' segment`},
		},
		"absolute pathPattern": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, pathPattern: "/{{.PVName}}"}}}`,
			want: []string{`spec.backend.hostPath.pathPattern: Invalid value: "/{{.PVName}}": must be relative to the backend's base directory`},
		},
		"hostPath pathPattern that climbs out of path": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, pathPattern: "../{{.PVName}}"}}}`,
			want: []string{`spec.backend.hostPath.pathPattern: Invalid value: "../{{.PVName}}": must not contain a '..' path element: every volume lies under the backend's base directory`},
		},
		"nfs pathPattern with a .. element inside": {
			spec: `{provisionerName: x, backend: {nfs: {server: s, path: /e, pathPattern: "{{.PVC.Namespace}}/../{{.PVC.Name}}"}}}`,
			want: []string{`spec.backend.nfs.pathPattern: Invalid value: "{{.PVC.Namespace}}/../{{.PVC.Name}}": must not contain a '..' path element: every volume lies under the backend's base directory`},
		},
		"nfs pathPattern that is ..": {
			spec: `{provisionerName: x, backend: {nfs: {server: s, path: /e, pathPattern: ".."}}}`,
			want: []string{`spec.backend.nfs.pathPattern: Invalid value: "..": must not contain a '..' path element: every volume lies under the backend's base directory`},
		},
		"pathPattern with dots inside names": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, pathPattern: "{{.PVC.Namespace}}/v..{{.PVC.Name}}..x"}}}`,
		},
		// The bounds' rule is not evaluated on a string that is no
		// duration, so the refusal names the format alone.
		"duration that does not parse": {
			spec: `{provisionerName: x, resyncPeriod: 15 minutes, ` + hostPath + `}`,
			want: []string{
				`spec.resyncPeriod: Invalid value: "15 minutes": spec.resyncPeriod in body should match '^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$'`,
			},
		},
		// Numbers of at most five digits keep every duration the pattern
		// takes far from an overflow.
		"durations beyond a number's five digits": {
			spec: `{provisionerName: x, resyncPeriod: 9999999999999h, leaderElection: {leaseDuration: 100000s, renewDeadline: 10s}, ` + hostPath + `}`,
			want: []string{
				`spec.leaderElection.leaseDuration: Invalid value: "100000s": spec.leaderElection.leaseDuration in body should match '^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$'`,
				`spec.resyncPeriod: Invalid value: "9999999999999h": spec.resyncPeriod in body should match '^([0-9]{1,5}(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$'`,
			},
		},
		"the longest durations the pattern takes": {
			spec: `{provisionerName: x, resyncPeriod: 99999h99999h99999h99999h, ` + hostPath + `}`,
			want: []string{`spec.resyncPeriod: Invalid value: "99999h99999h99999h99999h": resyncPeriod must be between 1s and 24h`},
		},
		"timeouts out of bounds": {
			spec: `{provisionerName: x, timeouts: {provision: 500ms, delete: 2h, drain: 11m}, ` + hostPath + `}`,
			want: []string{
				`spec.timeouts.delete: Invalid value: "2h": delete must be between 1s and 1h`,
				`spec.timeouts.drain: Invalid value: "11m": drain must be between 1s and 10m`,
				`spec.timeouts.provision: Invalid value: "500ms": provision must be between 1s and 1h`,
			},
		},
		"initialDelay above maxDelay": {
			spec: `{provisionerName: x, retry: {initialDelay: 20m}, ` + hostPath + `}`,
			want: []string{`spec.retry: Invalid value: initialDelay must not exceed maxDelay`},
		},
		"empty capacity": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, capacity: {}}}}`,
			want: []string{`spec.backend.hostPath.capacity: Invalid value: 0: spec.backend.hostPath.capacity in body should have at least 1 properties`},
		},
		"zero capacity": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, capacity: {storage: "0"}}}}`,
			want: []string{`spec.backend.hostPath.capacity: Invalid value: storage must be positive`},
		},
		"nfsSubdir of an additional name": {
			spec: `{provisionerName: x, additionalProvisionerNames: [cluster.local/nfs], backend: {nfs: {server: s, path: /e, nfsSubdir: {provisionerName: cluster.local/nfs, version: v4.0.2}}}}`,
		},
		"nfsSubdir of a name not answered to": {
			spec: `{provisionerName: x, backend: {nfs: {server: s, path: /e, nfsSubdir: {provisionerName: cluster.local/nfs, version: v4.0.2}}}}`,
			want: []string{`spec: Invalid value: backend.nfs.nfsSubdir.provisionerName must be one of additionalProvisionerNames`},
		},
		"nfsSubdir version not a release": {
			spec: `{provisionerName: x, additionalProvisionerNames: [cluster.local/nfs], backend: {nfs: {server: s, path: /e, nfsSubdir: {provisionerName: cluster.local/nfs, version: latest}}}}`,
			want: []string{`spec.backend.nfs.nfsSubdir.version: Invalid value: "latest": spec.backend.nfs.nfsSubdir.version in body should match '^v?[0-9]+\.[0-9]+\.[0-9]+$'`},
		},
		"directory mode and owner": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, mode: "0750", uid: 1000, gid: 0}}}`,
		},
		"nfs directory mode with setgid": {
			spec: `{provisionerName: x, backend: {nfs: {server: s, path: /e, mountPath: /m, mode: "2770", uid: 0, gid: 2147483647}}}`,
		},
		"three-digit mode": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, mode: "750"}}}`,
		},
		"mode not octal": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, mode: "0778"}}}`,
			want: []string{`spec.backend.hostPath.mode: Invalid value: "0778": must be an octal mode of three or four digits, such as "0750" or "2770"`},
		},
		"mode of four letters": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, mode: "rwxr"}}}`,
			want: []string{`spec.backend.hostPath.mode: Invalid value: "rwxr": must be an octal mode of three or four digits, such as "0750" or "2770"`},
		},
		"mode symbolic": {
			spec: `{provisionerName: x, backend: {nfs: {server: s, path: /e, mountPath: /m, mode: "u+rwx"}}}`,
			want: []string{
				"<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
				"spec.backend.nfs.mode: Too long: may not be more than 4 bytes",
			},
		},
		"mode of five digits": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, mode: "07777"}}}`,
			want: []string{
				"<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
				"spec.backend.hostPath.mode: Too long: may not be more than 4 bytes",
			},
		},
		"mode as a number": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, mode: 750}}}`,
			want: []string{
				"<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
				`spec.backend.hostPath.mode: Invalid value: "number": spec.backend.hostPath.mode in body must be of type string: "number"`,
			},
		},
		"negative uid, gid too large": {
			spec: `{provisionerName: x, backend: {nfs: {server: s, path: /e, mountPath: /m, uid: -1, gid: 2147483648}}}`,
			want: []string{
				"spec.backend.nfs.gid: Invalid value: 2.147483648e+09: spec.backend.nfs.gid in body should be less than or equal to 2.147483647e+09",
				"spec.backend.nfs.uid: Invalid value: -1: spec.backend.nfs.uid in body should be greater than or equal to 0",
			},
		},
		"misspelt field": {
			spec: `{provisionerName: x, backend: {hostPath: {path: /data, ondelete: Retain}}}`,
			want: []string{`unknown field spec.backend.hostPath.ondelete`},
		},
		"provisionerName changed": {
			oldSpec: `{provisionerName: example.com/a, ` + hostPath + `}`,
			spec:    `{provisionerName: example.com/b, ` + hostPath + `}`,
			want:    []string{`spec.provisionerName: Invalid value: "example.com/b": provisionerName is immutable`},
		},
		"other fields changed": {
			oldSpec: `{provisionerName: example.com/a, ` + hostPath + `}`,
			spec:    `{provisionerName: example.com/a, workers: 8, backend: {nfs: {server: s, path: /e, mountPath: /m}}}`,
		},
	}
	c := loadCRD(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var old map[string]any
			if tc.oldSpec != "" {
				var refusals []string
				if old, refusals = c.admit(t, decode(t, withSpec(tc.oldSpec)), nil); len(refusals) > 0 {
					t.Fatalf("old object refused: %q", refusals)
				}
			}
			_, got := c.admit(t, decode(t, withSpec(tc.spec)), old)
			// The apiserver reports CEL refusals in no set order.
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.SortSlices(strings.Compare)); diff != "" {
				t.Errorf("refusals (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusValidation(t *testing.T) {
	tests := map[string]struct {
		status string
		want   []string
	}{
		"as the manager writes it": {
			status: `{observedGeneration: 3, leader: manager-7d9f_3c2e, backend: hostPath, conditions: [
  {type: Ready, status: "True", reason: Running, message: "", lastTransitionTime: "2026-01-02T03:04:05Z", observedGeneration: 3},
  {type: Leading, status: "True", reason: Running, message: "", lastTransitionTime: "2026-01-02T03:04:05Z"}]}`,
		},
		"one condition type twice": {
			status: `{conditions: [
  {type: Ready, status: "True", reason: Running, message: "", lastTransitionTime: "2026-01-02T03:04:05Z"},
  {type: Ready, status: "False", reason: Paused, message: "", lastTransitionTime: "2026-01-02T03:04:05Z"}]}`,
			want: []string{`status.conditions[1]: Duplicate value: {"type":"Ready"}`},
		},
	}
	c := loadCRD(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			status := decode(t, tc.status)
			errs := validation.ValidateCustomResource(field.NewPath("status"), status, c.status)
			statusSchema := c.structural.Properties["status"]
			errs = append(errs, listtype.ValidateListSetsAndMaps(field.NewPath("status"), &statusSchema, status)...)
			var got []string
			for _, err := range errs {
				got = append(got, err.Error())
			}
			// The apiserver reports CEL refusals in no set order.
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.SortSlices(strings.Compare)); diff != "" {
				t.Errorf("refusals (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrinterColumns(t *testing.T) {
	c := loadCRD(t)
	obj := decode(t, minimal)
	obj["metadata"].(map[string]any)["creationTimestamp"] = "2026-01-02T03:04:05Z"
	obj["status"] = decode(t, `{leader: manager-1, backend: hostPath, nodes: {selected: 3, served: 2, summary: 2/3}, conditions: [
  {type: Leading, status: "True", reason: Running},
  {type: Ready, status: "False", reason: Paused}]}`)

	type column struct{ Name, Type, Value string }
	var got []column
	for _, col := range c.version.AdditionalPrinterColumns {
		jp := jsonpath.New(col.Name)
		if err := jp.Parse("{" + col.JSONPath + "}"); err != nil {
			t.Fatalf("column %s: %v", col.Name, err)
		}
		var out bytes.Buffer
		if err := jp.Execute(&out, obj); err != nil {
			t.Fatalf("column %s: %v", col.Name, err)
		}
		got = append(got, column{col.Name, col.Type, out.String()})
	}
	want := []column{
		{"Provisioner", "string", "provfleet.io/fast-local"},
		{"Backend", "string", "hostPath"},
		{"Ready", "string", "False"},
		{"Leader", "string", "manager-1"},
		{"Nodes", "string", "2/3"},
		{"Age", "date", "2026-01-02T03:04:05Z"},
		{"Reason", "string", "Paused"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("printer columns (-want +got):\n%s", diff)
	}
}

// TestSchemaIsDocumentedAndBounded keeps `kubectl explain` useful and every
// value bounded, which also keeps CEL cost estimates low.
func TestSchemaIsDocumentedAndBounded(t *testing.T) {
	c := loadCRD(t)
	var problems []string
	var walk func(path string, s apiextensionsv1.JSONSchemaProps)
	walk = func(path string, s apiextensionsv1.JSONSchemaProps) {
		if s.Description == "" {
			problems = append(problems, path+": no description")
		}
		switch {
		case s.XIntOrString:
			if s.Pattern == "" {
				problems = append(problems, path+": int-or-string without pattern")
			}
		case s.Type == "string":
			if s.MaxLength == nil && len(s.Enum) == 0 && s.Format == "" {
				problems = append(problems, path+": string without maxLength, enum or format")
			}
		case s.Type == "integer":
			// An int64 is a generation: bounded below only.
			if s.Minimum == nil || (s.Maximum == nil && s.Format != "int64") {
				problems = append(problems, path+": integer without minimum and maximum")
			}
		case s.Type == "array":
			if s.MaxItems == nil {
				problems = append(problems, path+": array without maxItems")
			}
			item := *s.Items.Schema
			if item.Description == "" {
				item.Description = "the list's"
			}
			walk(path+"[]", item)
		case s.Type == "object" && s.AdditionalProperties != nil:
			if s.MaxProperties == nil {
				problems = append(problems, path+": map without maxProperties")
			}
		}
		for name, prop := range s.Properties {
			walk(path+"."+name, prop)
		}
	}
	root := c.version.Schema.OpenAPIV3Schema
	for _, name := range []string{"spec", "status"} {
		walk(name, root.Properties[name])
	}
	if len(problems) > 0 {
		t.Errorf("schema problems:\n%s", strings.Join(problems, "\n"))
	}
}

func TestBackendName(t *testing.T) {
	tests := map[string]struct {
		backend v1alpha1.BackendSpec
		want    string
	}{
		"hostPath": {backend: v1alpha1.BackendSpec{HostPath: &v1alpha1.HostPathBackend{}}, want: "hostPath"},
		"nfs":      {backend: v1alpha1.BackendSpec{NFS: &v1alpha1.NFSBackend{}}, want: "nfs"},
		"custom":   {backend: v1alpha1.BackendSpec{Custom: &v1alpha1.CustomBackend{Driver: "example.com/lvm"}}, want: "custom/example.com/lvm"},
		"none":     {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.backend.Name()); diff != "" {
				t.Errorf("Name() (-want +got):\n%s", diff)
			}
		})
	}
}
