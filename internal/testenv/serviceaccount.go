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
	"fmt"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// serviceAccountTokenSeconds outlives any test binary.
const serviceAccountTokenSeconds = 24 * 60 * 60

// ManagerNamespace and ManagerServiceAccount are the Namespace and the
// ServiceAccount examples/deploy runs the manager in and as.
const (
	ManagerNamespace      = "provfleet-system"
	ManagerServiceAccount = "provfleet"
)

// NodeAgentNamespace and NodeAgentServiceAccount are the Namespace and the
// ServiceAccount examples/deploy runs the node agents in and as.
const (
	NodeAgentNamespace      = "provfleet-node"
	NodeAgentServiceAccount = "provfleet-node"
)

// ServiceAccountConfig applies the manifests as admin (typically a Namespace, a
// ServiceAccount and its RBAC), then returns a rest.Config that authenticates as
// ServiceAccount namespace/name with a token from the TokenRequest API. Code run
// with it gets exactly the permissions the manifests grant.
func (e *Environment) ServiceAccountConfig(ctx context.Context, namespace, name string, manifests ...string) (*rest.Config, error) {
	if err := e.Apply(ctx, manifests...); err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(e.admin)
	if err != nil {
		return nil, fmt.Errorf("cannot build the admin client: %w", err)
	}
	request := &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](serviceAccountTokenSeconds)},
	}
	token, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, request, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot get a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	config := rest.AnonymousClientConfig(e.admin)
	config.BearerToken = token.Status.Token
	return config, nil
}

// ManagerServiceAccountConfig applies the Namespaces and the RBAC of
// examples/deploy of the repository at root, then the further manifests, and
// returns a rest.Config of the manager's ServiceAccount: code run with it has
// exactly the permissions the project ships.
func (e *Environment) ManagerServiceAccountConfig(ctx context.Context, root string, manifests ...string) (*rest.Config, error) {
	manifests = append(DeployManifests(root, "namespace.yaml", "rbac.yaml"), manifests...)
	return e.ServiceAccountConfig(ctx, ManagerNamespace, ManagerServiceAccount, manifests...)
}

// NodeAgentServiceAccountConfig is ManagerServiceAccountConfig for the node
// agents: it applies the Namespaces and the agents' RBAC of examples/deploy,
// then the further manifests, and returns a rest.Config of the agents'
// ServiceAccount.
func (e *Environment) NodeAgentServiceAccountConfig(ctx context.Context, root string, manifests ...string) (*rest.Config, error) {
	manifests = append(DeployManifests(root, "namespace.yaml", "node-rbac.yaml"), manifests...)
	return e.ServiceAccountConfig(ctx, NodeAgentNamespace, NodeAgentServiceAccount, manifests...)
}

// DeployManifests are the paths of the named files of examples/deploy of the
// repository at root.
func DeployManifests(root string, names ...string) []string {
	paths := make([]string, len(names))
	for i, name := range names {
		paths[i] = filepath.Join(root, "examples", "deploy", name)
	}
	return paths
}
