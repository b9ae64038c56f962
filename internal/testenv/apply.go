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

package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager owns the fields an Environment applies.
const FieldManager = "provfleet-e2e"

// Apply server-side applies, as admin and in order, every object of the given
// multi-document YAML files. Namespaced objects without a namespace go to
// "default". Applying the same files again is a no-op.
func (e *Environment) Apply(ctx context.Context, manifests ...string) error {
	_, err := applyFiles(ctx, e.admin, manifests...)
	return err
}

// applyFiles applies the manifests and returns the applied objects.
func applyFiles(ctx context.Context, config *rest.Config, manifests ...string) ([]*unstructured.Unstructured, error) {
	client, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("cannot build a dynamic client: %w", err)
	}
	discoveryClient, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("cannot build a discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discoveryClient))
	var applied []*unstructured.Unstructured
	for _, manifest := range manifests {
		objects, err := readManifest(manifest)
		if err != nil {
			return nil, err
		}
		for _, obj := range objects {
			out, err := applyObject(ctx, client, mapper, obj)
			if err != nil {
				return nil, fmt.Errorf("cannot apply %s %s from %s: %w", obj.GetKind(), obj.GetName(), filepath.Base(manifest), err)
			}
			applied = append(applied, out)
		}
	}
	return applied, nil
}

func applyObject(ctx context.Context, client dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// The kind may come from a CRD applied a moment ago.
		mapper.Reset()
		mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot map kind %s: %w", gvk, err)
	}
	var resource dynamic.ResourceInterface = client.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		namespace := obj.GetNamespace()
		if namespace == "" {
			namespace = metav1.NamespaceDefault
			obj.SetNamespace(namespace)
		}
		resource = client.Resource(mapping.Resource).Namespace(namespace)
	}
	return resource.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
}

// readManifest decodes every non-empty document of a YAML or JSON file; List
// documents are expanded into their items.
func readManifest(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open manifest: %w", err)
	}
	defer f.Close()
	decoder := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var objects []*unstructured.Unstructured
	for {
		var doc map[string]any
		if err := decoder.Decode(&doc); errors.Is(err, io.EOF) {
			return objects, nil
		} else if err != nil {
			return nil, fmt.Errorf("cannot decode %s: %w", filepath.Base(path), err)
		}
		if len(doc) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: doc}
		if !obj.IsList() {
			objects = append(objects, obj)
			continue
		}
		list, err := obj.ToList()
		if err != nil {
			return nil, fmt.Errorf("cannot read a List in %s: %w", filepath.Base(path), err)
		}
		for i := range list.Items {
			objects = append(objects, &list.Items[i])
		}
	}
}

// installCRDs applies every YAML file of dir, when it exists, and waits until
// each CustomResourceDefinition is Established.
func (e *Environment) installCRDs(ctx context.Context, dir string, timeout time.Duration) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("cannot list CRDs: %w", err)
	}
	var manifests []string
	for _, entry := range entries {
		if name := entry.Name(); !entry.IsDir() && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			manifests = append(manifests, filepath.Join(dir, name))
		}
	}
	slices.Sort(manifests)
	applied, err := applyFiles(ctx, e.admin, manifests...)
	if err != nil {
		return fmt.Errorf("cannot install CRDs: %w", err)
	}
	client, err := apiextensionsclient.NewForConfig(e.admin)
	if err != nil {
		return fmt.Errorf("cannot build the apiextensions client: %w", err)
	}
	for _, obj := range applied {
		if obj.GroupVersionKind().GroupKind() != apiextensionsv1.Kind("CustomResourceDefinition") {
			continue
		}
		if err := waitEstablished(ctx, client, obj.GetName(), timeout); err != nil {
			return err
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, client apiextensionsclient.Interface, name string, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("cannot wait for CRD %s to be Established: %w", name, err)
	}
	return nil
}
