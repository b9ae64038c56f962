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

package deploy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/pkg/hostpathnodes"
)

// appNamespace stands for any namespace of claims.
const appNamespace = "some-app"

// The shipped RBAC lets the node agents make the calls of their role and none
// of the manager's, and read but never write the removal lists; it lets the
// manager read, annotate and delete the agents' Leases and write the removal
// lists, and delete the membership Leases of replicas gone for good in its
// own namespace: each ServiceAccount asks the API server what it may do.
// Which node an agent may act on is the node restriction policies' part,
// beyond RBAC.
func TestRBAC(t *testing.T) {
	env := testenv.Env(t)
	ctx := t.Context()
	root := repoRoot(t)
	agentConfig, err := env.NodeAgentServiceAccountConfig(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	managerConfig, err := env.ManagerServiceAccountConfig(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	agent, manager := kubernetes.NewForConfigOrDie(agentConfig), kubernetes.NewForConfigOrDie(managerConfig)
	nodeLease := hostpathnodes.NodeLeaseName("node-a")
	lease := func(namespace, verb string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: nodeLease}
	}
	core := func(namespace, verb, resource string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Resource: resource}
	}
	list := func(verb string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: testenv.NodeAgentNamespace, Verb: verb, Resource: "configmaps", Name: hostpathnodes.RemovedListName("node-a")}
	}
	pcfg := func(verb, subresource string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Group: "provfleet.io", Resource: "provisionerconfigs", Subresource: subresource}
	}
	cases := map[string]struct {
		client  kubernetes.Interface
		access  authorizationv1.ResourceAttributes
		allowed bool
	}{
		"agent creates its node Lease":                       {client: agent, access: lease(testenv.NodeAgentNamespace, "create"), allowed: true},
		"agent renews its node Lease":                        {client: agent, access: lease(testenv.NodeAgentNamespace, "update"), allowed: true},
		"agent watches the node Leases":                      {client: agent, access: lease(testenv.NodeAgentNamespace, "watch"), allowed: true},
		"agent deletes a node Lease":                         {client: agent, access: lease(testenv.NodeAgentNamespace, "delete")},
		"agent creates a Lease in the manager's namespace":   {client: agent, access: lease(testenv.ManagerNamespace, "create")},
		"agent renews a Lease in the manager's namespace":    {client: agent, access: lease(testenv.ManagerNamespace, "update")},
		"agent creates a PersistentVolume":                   {client: agent, access: core("", "create", "persistentvolumes"), allowed: true},
		"agent patches a PersistentVolume":                   {client: agent, access: core("", "patch", "persistentvolumes"), allowed: true},
		"agent deletes a PersistentVolume":                   {client: agent, access: core("", "delete", "persistentvolumes"), allowed: true},
		"agent patches a claim":                              {client: agent, access: core(appNamespace, "patch", "persistentvolumeclaims"), allowed: true},
		"agent deletes a claim":                              {client: agent, access: core(appNamespace, "delete", "persistentvolumeclaims")},
		"agent creates an Event":                             {client: agent, access: core(appNamespace, "create", "events"), allowed: true},
		"agent reads Secrets":                                {client: agent, access: core(appNamespace, "get", "secrets")},
		"agent creates Pods":                                 {client: agent, access: core(appNamespace, "create", "pods")},
		"agent watches ProvisionerConfigs":                   {client: agent, access: pcfg("watch", ""), allowed: true},
		"agent writes a ProvisionerConfig":                   {client: agent, access: pcfg("update", "")},
		"agent writes the status of a ProvisionerConfig":     {client: agent, access: pcfg("update", "status")},
		"agent writes the finalizers of a ProvisionerConfig": {client: agent, access: pcfg("update", "finalizers")},
		"manager watches the node Leases":                    {client: manager, access: lease(testenv.NodeAgentNamespace, "watch"), allowed: true},
		"manager annotates a node Lease":                     {client: manager, access: lease(testenv.NodeAgentNamespace, "patch"), allowed: true},
		"manager creates a node Lease":                       {client: manager, access: lease(testenv.NodeAgentNamespace, "create"), allowed: true},
		"manager renews a node Lease":                        {client: manager, access: lease(testenv.NodeAgentNamespace, "update")},
		"manager deletes a node Lease":                       {client: manager, access: lease(testenv.NodeAgentNamespace, "delete"), allowed: true},
		"manager deletes a replica's membership Lease":       {client: manager, access: lease(testenv.ManagerNamespace, "delete"), allowed: true},
		"agent reads its removal list":                       {client: agent, access: list("watch"), allowed: true},
		"agent creates a removal list":                       {client: agent, access: list("create")},
		"agent updates a removal list":                       {client: agent, access: list("update")},
		"agent patches a removal list":                       {client: agent, access: list("patch")},
		"agent deletes a removal list":                       {client: agent, access: list("delete")},
		"manager updates a removal list":                     {client: manager, access: list("update"), allowed: true},
		"manager deletes a removal list":                     {client: manager, access: list("delete"), allowed: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			review := &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &tc.access},
			}
			got, err := tc.client.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), review, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.allowed, got.Status.Allowed); diff != "" {
				t.Errorf("allowed (-want +got):\n%s", diff)
			}
		})
	}
}

// An agent, as its ServiceAccount with a token bound to its Pod on its node,
// creates and renews its node's Lease in the shipped namespace, and may not
// take the Lease of another node, nor one of the manager's; a token bound to
// no Pod on a node holds no Lease; the manager, which the node restriction
// policies do not concern, annotates any node's Lease.
func TestNodeAgentHoldsItsNodeLease(t *testing.T) {
	env := testenv.Env(t)
	ctx := t.Context()
	config, err := env.NodeAgentPodConfig(ctx, repoRoot(t), "node-b")
	if err != nil {
		t.Fatal(err)
	}
	agent := kubernetes.NewForConfigOrDie(config)
	admin := kubernetes.NewForConfigOrDie(env.Config())
	leases := agent.CoordinationV1().Leases(testenv.NodeAgentNamespace)
	created, err := leases.Create(ctx, nodeLease("node-b"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("cannot create the node Lease: %v", err)
	}
	t.Cleanup(func() {
		_ = admin.CoordinationV1().Leases(testenv.NodeAgentNamespace).Delete(context.Background(), created.Name, metav1.DeleteOptions{})
	})
	created.Spec.RenewTime = &metav1.MicroTime{Time: created.CreationTimestamp.Time}
	if _, err := leases.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("cannot renew the node Lease: %v", err)
	}
	if _, err := leases.Create(ctx, nodeLease("node-c"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("want Forbidden for the Lease of another node, got %v", err)
	}
	_, err = agent.CoordinationV1().Leases(testenv.ManagerNamespace).Create(ctx, nodeLease("node-b"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("want Forbidden for a Lease in %s, got %v", testenv.ManagerNamespace, err)
	}
	unbound, err := env.NodeAgentServiceAccountConfig(ctx, repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubernetes.NewForConfigOrDie(unbound).CoordinationV1().Leases(testenv.NodeAgentNamespace).Create(ctx, nodeLease("node-d"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "bound to a Pod on a node") {
		t.Errorf("want Forbidden for a token bound to no Pod, got %v", err)
	}
	managerConfig, err := env.ManagerServiceAccountConfig(ctx, repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"annotations":{"provfleet.io/removed-volumes":"{}"}}}`)
	_, err = kubernetes.NewForConfigOrDie(managerConfig).CoordinationV1().Leases(testenv.NodeAgentNamespace).Patch(ctx, created.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Errorf("the manager cannot annotate a node Lease: %v", err)
	}
}

// nodeLease is a Lease of node held by its agent.
func nodeLease(node string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: hostpathnodes.NodeLeaseName(node)},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent-of-" + node), LeaseDurationSeconds: ptr.To[int32](15)},
	}
}
