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

package hostpathnodes

import (
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/provfleet/provfleet/api/v1alpha1"
)

// agentState is how far a node's Lease shows its agent serving one
// ProvisionerConfig, in order.
type agentState int

const (
	// agentNoLease: no agent ever held the node's Lease.
	agentNoLease agentState = iota
	// agentExpired: the Lease has no holder or was not renewed in time.
	agentExpired
	// agentUnreadable: a live agent's report cannot be read.
	agentUnreadable
	// agentPending: the live agent has not reported on the
	// ProvisionerConfig yet.
	agentPending
	// agentNotServing: the live agent runs it, with a Ready reason other
	// than servingReasons.
	agentNotServing
	// agentServing: the live agent runs it with one of servingReasons.
	agentServing
)

// servingReasons are the agent's Ready reasons of a served node: its
// instance runs, even when paused.
var servingReasons = []string{v1alpha1.ReasonRunning, v1alpha1.ReasonStandby, v1alpha1.ReasonPaused}

// nodeService is what a node's Lease says of how its agent serves one
// ProvisionerConfig.
type nodeService struct {
	state agentState
	// report is the agent's entry for the ProvisionerConfig, from
	// agentNotServing on.
	report provisionerReport
	// unserved says why the node is not served; nil when it is.
	unserved *v1alpha1.UnservedNode
	// expiry is when the Lease expires unless renewed, from agentUnreadable
	// on: renewals send no event a watcher acts on, so it wakes then.
	expiry time.Time
}

// agentLive reports whether an agent holds the node's Lease and renews it
// in time, whatever it reports.
func (s nodeService) agentLive() bool {
	return s.state > agentExpired
}

// serviceOf reads, at now, the Lease of node in namespace from leases (a
// cache of node Leases) into how its agent serves the ProvisionerConfig
// config, judging its expiry by clock. It is the one reader of the node
// Leases' reports: the status counts the nodes it finds served; placement
// and node removal decide on its state.
func serviceOf(leases cache.Store, clock *leaseClock, namespace, node, config string, now time.Time) nodeService {
	leaseName := namespace + "/" + NodeLeaseName(node)
	obj, exists, err := leases.GetByKey(leaseName)
	lease, _ := obj.(*coordinationv1.Lease)
	switch {
	case err != nil:
		return notServed(node, agentNoLease, v1alpha1.ReasonNoNodeAgent, "cannot read Lease %s: %v", leaseName, err)
	case !exists || lease == nil:
		return notServed(node, agentNoLease, v1alpha1.ReasonNoNodeAgent, "no node agent has run on the node: there is no Lease %s", leaseName)
	}
	expiry, held := clock.expiry(lease, now)
	if !held || !expiry.After(now) {
		return notServed(node, agentExpired, v1alpha1.ReasonNoNodeAgent, "no node agent renews Lease %s", leaseName)
	}
	s := readService(lease, config, node)
	s.expiry = expiry
	return s
}

// notServed is the service of node in state, not served for reason.
func notServed(node string, state agentState, reason, format string, args ...any) nodeService {
	return nodeService{state: state, unserved: &v1alpha1.UnservedNode{Node: node, Reason: reason, Message: fmt.Sprintf(format, args...)}}
}

// readService reads how the agent of node, which holds lease, serves
// config, from its report.
func readService(lease *coordinationv1.Lease, config, node string) nodeService {
	reports, err := readNodeReport(lease)
	if err != nil {
		return notServed(node, agentUnreadable, v1alpha1.ReasonNoNodeAgent, "%v", err)
	}
	report, ok := reports[config]
	if !ok {
		return notServed(node, agentPending, v1alpha1.ReasonNodeAgentPending, "the node agent %s has not reported on this ProvisionerConfig yet", *lease.Spec.HolderIdentity)
	}
	if !slices.Contains(servingReasons, report.Reason) {
		s := notServed(node, agentNotServing, report.Reason, "%s", report.Message)
		s.report = report
		return s
	}
	return nodeService{state: agentServing, report: report}
}
