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
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/provfleet/provfleet/internal/testenv"
	"github.com/provfleet/provfleet/internal/testenv/faultproxy"
	"github.com/provfleet/provfleet/internal/testenv/managerproc"
)

// faultyKubeconfig starts a fault proxy in front of the apiserver with
// rates and seed, and returns the path of a kubeconfig of the manager's
// ServiceAccount that reaches the apiserver through it, and the proxy.
func (f *fixture) faultyKubeconfig(rates faultproxy.Rates, seed uint64) (string, *faultproxy.Proxy) {
	f.t.Helper()
	env := testenv.Env(f.t)
	upstream, err := url.Parse(env.Config().Host)
	if err != nil {
		f.t.Fatal(err)
	}
	transport, err := rest.TransportFor(rest.AnonymousClientConfig(env.Config()))
	if err != nil {
		f.t.Fatal(err)
	}
	proxy, err := faultproxy.New(faultproxy.Options{
		Upstream: upstream, Transport: transport, Seed: seed, Rates: rates,
		SlowDelay: 500 * time.Millisecond, WatchCutAfter: 5 * time.Second, HoldLimit: 5 * time.Second,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(proxy.Close)
	addr, caPEM, err := proxy.Endpoint("manager")
	if err != nil {
		f.t.Fatal(err)
	}
	manager, err := clientcmd.BuildConfigFromFlags("", managerKubeconfig(f.t))
	if err != nil {
		f.t.Fatal(err)
	}
	path := filepath.Join(f.t.TempDir(), "faulty.kubeconfig")
	if err := testenv.WriteKubeconfig(path, &rest.Config{Host: addr, BearerToken: manager.BearerToken, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}); err != nil {
		f.t.Fatal(err)
	}
	return path, proxy
}

// Through a control plane that fails one request in ten (errors before and
// after a write is carried out, throttling, timeouts, slow answers, watches
// cut mid-way), the manager provisions every claim exactly once and
// releases every volume, and keeps running. A failing run logs its seed.
func TestProvisioningThroughAPIFaults(t *testing.T) {
	f := newFixture(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("fault seed %d", seed)
	kubeconfig, proxy := f.faultyKubeconfig(faultproxy.Uniform(0.1), seed)
	const identity = "apifaults"
	node := "node-" + identity
	f.node(node, nil)
	manager := f.start(identity, managerproc.Options{
		Binary:       managerBinary,
		Kubeconfig:   kubeconfig,
		Namespace:    testenv.ManagerNamespace,
		HostPathRoot: f.root,
		NodeName:     node,
		Args:         append([]string{"--role=manager,node", nodeLeaseDuration}, replicaLease...),
	})
	name := f.prefix + "-faults"
	f.provisioner(name)

	const claims = 20
	var names []string
	for i := range claims {
		names = append(names, fmt.Sprintf("claim-%d", i))
		f.claim(names[i], name)
	}
	f.waitBound(names...)
	for claim, provisioners := range f.volumesOf() {
		if len(provisioners) != 1 {
			t.Errorf("claim %s has %d volumes, want 1", claim, len(provisioners))
		}
	}

	var volumes []string
	for _, claim := range names {
		pvc, err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Get(f.ctx, claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		volumes = append(volumes, pvc.Spec.VolumeName)
		if err := f.kube.CoreV1().PersistentVolumeClaims(f.namespace).Delete(f.ctx, claim, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pv := range volumes {
		f.waitGone(pv)
	}
	f.eventually("every volume directory removed", func(context.Context) (bool, error) {
		left, err := volumeDirs(filepath.Join(f.root, name))
		return len(left) == 0, err
	})

	injected := proxy.Injected()
	t.Logf("faults injected: %v", injected)
	if len(injected) == 0 {
		t.Error("no fault was injected: the manager did not go through the proxy")
	}
	if exited, err := manager.Exited(); exited {
		t.Errorf("the manager exited: %v", err)
	}
}

// volumeDirs lists the entries of base other than hidden ones (owner
// markers and the store's own folders).
func volumeDirs(base string) ([]string, error) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil, fmt.Errorf("cannot list %s: %w", base, err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}
