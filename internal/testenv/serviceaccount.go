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
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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

// NodeAgentPodConfig returns a rest.Config of the node agents'
// ServiceAccount as a node agent of the DaemonSet gets it on node: a token
// bound to a Pod of the agents' namespace whose spec.nodeName is node, which
// the API server turns into a user with the node's name in its extra
// (authentication.kubernetes.io/node-name), the name the node restriction
// policies hold the agent to. It applies the Namespaces, the agents' RBAC and
// the node restriction policies of examples/deploy of the repository at
// root, then the further manifests, and creates the Node (with its hostname
// label) and the Pod when missing; no kubelet runs the Pod.
func (e *Environment) NodeAgentPodConfig(ctx context.Context, root, node string, manifests ...string) (*rest.Config, error) {
	manifests = append(DeployManifests(root, "namespace.yaml", "node-rbac.yaml", "node-restriction.yaml"), manifests...)
	if err := e.Apply(ctx, manifests...); err != nil {
		return nil, err
	}
	return e.PodBoundConfig(ctx, NodeAgentNamespace, NodeAgentServiceAccount, node)
}

// PodBoundConfig returns a rest.Config of ServiceAccount namespace/name
// with a token bound to a Pod of that ServiceAccount on node, as the
// kubelet gets it for a DaemonSet's Pod there, once the node restriction
// policies hold it. It creates the Node (with its hostname label) and the
// Pod when missing; no kubelet runs the Pod.
func (e *Environment) PodBoundConfig(ctx context.Context, namespace, name, node string) (*rest.Config, error) {
	client, err := kubernetes.NewForConfig(e.admin)
	if err != nil {
		return nil, fmt.Errorf("cannot build the admin client: %w", err)
	}
	if err := ensureNode(ctx, client, node); err != nil {
		return nil, err
	}
	pod, err := ensurePod(ctx, client, namespace, name, node)
	if err != nil {
		return nil, err
	}
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](serviceAccountTokenSeconds),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	token, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, request, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("cannot get a token bound to Pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	config := rest.AnonymousClientConfig(e.admin)
	config.BearerToken = token.Status.Token
	if err := waitRestricted(ctx, config, namespace, node); err != nil {
		return nil, err
	}
	return config, nil
}

// waitRestricted waits until the node restriction policies hold the agent
// of config, on node: the API server loads a new policy a moment after it
// is created. It asks for another node's Lease in a dry run, which the
// policies refuse once in force; a server without the
// ValidatingAdmissionPolicy admission plugin never does.
func waitRestricted(ctx context.Context, config *rest.Config, namespace, node string) error {
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("cannot build the node agent's client: %w", err)
	}
	probe := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "provfleet-node-" + node + "-probe"}}
	restricted := func(ctx context.Context) (bool, error) {
		_, err := client.CoordinationV1().Leases(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(err), nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, restricted); err != nil {
		return fmt.Errorf("the node restriction policies never held the agent of node %s (is the ValidatingAdmissionPolicy admission plugin on?): %w", node, err)
	}
	return nil
}

// ensureNode creates Node node, labelled with its host name, unless it
// exists.
func ensureNode(ctx context.Context, client kubernetes.Interface, node string) error {
	object := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{corev1.LabelHostname: node}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, object, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cannot create Node %s: %w", node, err)
	}
	return nil
}

// ensurePod returns the Pod of ServiceAccount namespace/account on node,
// created unless it exists.
func ensurePod(ctx context.Context, client kubernetes.Interface, namespace, account, node string) (*corev1.Pod, error) {
	pods := client.CoreV1().Pods(namespace)
	name := account + "-" + node
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: account,
			Containers:         []corev1.Container{{Name: "agent", Image: "provfleet/manager"}},
		},
	}
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = pods.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("cannot create Pod %s/%s on node %s: %w", namespace, name, node, err)
	}
	return created, nil
}
