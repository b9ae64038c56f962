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

	corev1 "k8s.io/api/core/v1"

	"github.com/provfleet/provfleet/api/v1alpha1"
	"github.com/provfleet/provfleet/pkg/hostpathnodes"
	"github.com/provfleet/provfleet/pkg/provisioning"
)

// nodeRole is the fleet as the node side sees it (hostpathnodes.Fleet): the
// node agent's instances run in the manager's registry, each keyed by
// nodeKeyPrefix and the name of its ProvisionerConfig.
type nodeRole struct{ m *Manager }

func (r nodeRole) Enqueue(name string) { r.m.queue.Add(name) }

func (r nodeRole) RunOnNode(ctx context.Context, pc *v1alpha1.ProvisionerConfig, backend *v1alpha1.BackendSpec, scope provisioning.Scope) hostpathnodes.Outcome {
	m := r.m
	obs := m.runInstance(ctx, pc, instanceSpec{
		key:      nodeKeyPrefix + pc.Name,
		backend:  backend,
		settings: instanceSettings{identity: m.settings.Identity, probeInterval: m.settings.BackendProbeInterval},
		scope:    scope,
	})
	return hostpathnodes.Outcome{Reason: obs.reason, Message: obs.message, Running: obs.running, Retry: obs.retry,
		Storage: obs.storage, ProbedAt: obs.probedAt}
}

func (r nodeRole) StopOnNode(ctx context.Context, name string) { r.m.stop(ctx, nodeKeyPrefix+name) }

func (r nodeRole) OnNode() []string {
	var names []string
	r.m.instances.Each(func(key string, _ *instance) {
		if name := configOf(key); name != key {
			names = append(names, name)
		}
	})
	return names
}

func (r nodeRole) ProvisionerOnNode(name string) provisioning.Provisioner {
	if inst := r.m.instances.Get(nodeKeyPrefix + name); inst != nil {
		return inst.provisioner
	}
	return nil
}

// RequeueOnNode has the node instance of name look at claim, which the
// coordinator handed over to it.
func (r nodeRole) RequeueOnNode(name string, claim *corev1.PersistentVolumeClaim) {
	inst := r.m.instances.Get(nodeKeyPrefix + name)
	if inst == nil {
		return
	}
	if q, ok := inst.controller.(interface {
		Requeue(*corev1.PersistentVolumeClaim)
	}); ok {
		q.Requeue(claim)
	}
}
