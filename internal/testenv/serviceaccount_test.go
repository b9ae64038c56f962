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

package testenv_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/provfleet/provfleet/internal/testenv"
)

// The shipped ServiceAccounts' configs authenticate as those ServiceAccounts:
// what the RBAC tests prove with them holds for the manager and the agents.
func TestShippedServiceAccountConfigs(t *testing.T) {
	env := testenv.Env(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		config func(context.Context, string, ...string) (*rest.Config, error)
		want   string
	}{
		"manager": {
			config: env.ManagerServiceAccountConfig,
			want:   "system:serviceaccount:" + testenv.ManagerNamespace + ":" + testenv.ManagerServiceAccount,
		},
		"node agent": {
			config: env.NodeAgentServiceAccountConfig,
			want:   "system:serviceaccount:" + testenv.NodeAgentNamespace + ":" + testenv.NodeAgentServiceAccount,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			config, err := tc.config(ctx, root)
			if err != nil {
				t.Fatal(err)
			}
			review, err := kubernetes.NewForConfigOrDie(config).AuthenticationV1().SelfSubjectReviews().
				Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, review.Status.UserInfo.Username); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}
